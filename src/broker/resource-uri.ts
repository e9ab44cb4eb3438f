/**
 * One resource, many spellings: what the policy judges a resource URI as (`policy.ts`). An
 * upstream resolves the URI it is sent its own way (`fileURLToPath(new URL(uri))`, a path join,
 * an HTTP fetch), and a glob written for one spelling must not be dodged by another that the
 * upstream reads as the same resource.
 *
 * - {@link canonicalUri}: RFC 3986 §6.2.2 case and scheme-based normalisation, as the WHATWG URL
 *   parser does it: the scheme and the host in lower case, a default port dropped, `file` URIs
 *   as `file:///path` (`file://localhost/…` and `file:/…` are the same file). Judged beside the
 *   URI as sent, against globs normalised the same way.
 * - {@link ambiguity}: spellings no normalisation settles, because upstreams differ on them:
 *   refused while any rule judges resources, as `.` and `..` segments are.
 * - {@link withoutQueryOrFragment}: the resource an upstream that ignores them reads
 *   (`fileURLToPath` drops both): `file:///srv/key.txt?x` and `…/key.txt#x` are `…/key.txt` to a
 *   file server, so what a rule says of that file (by its name, or a glob ending in `*.pem`)
 *   holds for them too (`policy.ts`).
 */

/** A URI's scheme (RFC 3986 §3.1) and the `:` after it. */
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):/;

/** Ports a WHATWG URL parser drops as its scheme's default (so `https://h:443/x` is `https://h/x`). */
const DEFAULT_PORTS: Readonly<Record<string, string>> = { http: '80', https: '443', ws: '80', wss: '443', ftp: '21' };

interface Parts {
  scheme: string;
  /** The authority after `//`, or undefined when the URI has none. */
  authority?: string;
  /** The path, query and fragment, as written. */
  rest: string;
}

function split(uri: string): Parts | undefined {
  const m = SCHEME.exec(uri);
  if (!m) return undefined;
  const afterScheme = uri.slice(m[0].length);
  if (!afterScheme.startsWith('//')) return { scheme: m[1]!, rest: afterScheme };
  const end = afterScheme.slice(2).search(/[/?#]/);
  if (end === -1) return { scheme: m[1]!, authority: afterScheme.slice(2), rest: '' };
  return { scheme: m[1]!, authority: afterScheme.slice(2, 2 + end), rest: afterScheme.slice(2 + end) };
}

/**
 * `uri` with its scheme and host in lower case, a default port dropped, and a `file` URI as
 * `file:///path`; anything that is no `scheme:` URI as it is. Also applied to the globs of
 * `policy.rules[].resources` (glob characters pass through unchanged).
 */
export function canonicalUri(uri: string): string {
  const parts = split(uri);
  if (!parts) return uri;
  const scheme = parts.scheme.toLowerCase();
  if (parts.authority === undefined) return scheme === 'file' ? `file://${parts.rest.startsWith('/') ? '' : '/'}${parts.rest}` : `${scheme}:${parts.rest}`;
  let authority = parts.authority.toLowerCase();
  const port = DEFAULT_PORTS[scheme];
  if (port !== undefined && authority.endsWith(`:${port}`)) authority = authority.slice(0, -(port.length + 1));
  if (scheme === 'file' && authority === 'localhost') authority = '';
  return `${scheme}://${authority}${parts.rest}`;
}

/** `uri` up to its first `?` or `#` (RFC 3986 §3.4, §3.5: neither can appear before the path ends); `uri` itself when it has neither. */
export function withoutQueryOrFragment(uri: string): string {
  const end = uri.search(/[?#]/);
  return end === -1 ? uri : uri.slice(0, end);
}

/**
 * Why `uri` (its unreserved characters decoded) has no one reading, or undefined when it has:
 * a `.` or `..` path segment, an empty one (`//` in the path: `/a//b` is `/a/b` to a file
 * system), a backslash (a separator to the WHATWG parser of `file` and `http` URIs), whitespace
 * or a control character (stripped or ignored by that parser), an encoded slash or backslash in
 * the path (`%2F`, `%5C`: a separator to an upstream that decodes before it splits), or user
 * information in the authority (`http://user@host/…` is `host`).
 */
export function ambiguity(uri: string): string | undefined {
  if (/[\u0000-\u0020\u007f\\]/.test(uri)) return 'whitespace, a control character or a backslash';
  const parts = split(uri);
  const rest = parts ? parts.rest : uri;
  if (parts?.authority?.includes('@')) return 'user information in the authority';
  const end = rest.search(/[?#]/);
  const path = end === -1 ? rest : rest.slice(0, end);
  if (/(^|\/)\.\.?(\/|$)/.test(path)) return '"." or ".." path segments';
  if (/\/\//.test(path)) return 'an empty path segment ("//")';
  if (/%(2f|5c)/i.test(path)) return 'an encoded slash or backslash';
  return undefined;
}
