/**
 * `x-mcp-header` (MCP 2026-07-28, Streamable HTTP "Schema Extension"): a tool's input schema may
 * mark primitive parameters to be mirrored into `Mcp-Param-<Name>` request headers. A client must
 * leave out a tool whose marks break the rules, and send the headers for the others.
 *
 * The SDK client applies both only inside `Client.listTools()` / `callTool()`, which the broker
 * does not use (its lists and calls pass results through untouched), and does not export them; this
 * is the same rule set, checked against the spec text and the SDK 2.4.0 implementation.
 */

/** One parameter to mirror: its path through `properties` and the header name (without prefix). */
export interface McpHeaderDeclaration {
  readonly path: readonly string[];
  readonly headerName: string;
  /** The marked property's JSON Schema type. */
  readonly type: 'string' | 'integer' | 'boolean';
}

export type McpHeaderScan = { valid: true; declarations: McpHeaderDeclaration[] } | { valid: false; reason: string };

/** RFC 9110 `token` (`1*tchar`). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const PERMITTED_TYPES = new Set(['string', 'integer', 'boolean']);
/** Keywords whose subschemas are not reached through a chain of `properties`: a mark under them is invalid. */
const UNREACHABLE = [
  'items', 'prefixItems', 'contains', 'additionalProperties', 'unevaluatedProperties', 'unevaluatedItems', 'propertyNames',
  'patternProperties', 'dependentSchemas', 'oneOf', 'anyOf', 'allOf', 'not', 'if', 'then', 'else', '$defs', 'definitions',
] as const;
/** Of those, the ones whose value maps names to subschemas. */
const NAME_MAPS = new Set(['patternProperties', 'dependentSchemas', '$defs', 'definitions']);

/**
 * Every `x-mcp-header` mark of `inputSchema`, or the first rule one breaks: a mark only on a
 * property reached through `properties` alone, a non-empty RFC 9110 token, on a `string`,
 * `integer` or `boolean` property, names unique ignoring case.
 */
export function scanMcpHeaders(inputSchema: unknown): McpHeaderScan {
  const declarations: McpHeaderDeclaration[] = [];
  const seen = new Map<string, string>();
  const visit = (node: unknown, path: string[], reachable: boolean): string | undefined => {
    if (node === null || typeof node !== 'object') return undefined;
    const schema = node as Record<string, unknown>;
    if ('x-mcp-header' in schema) {
      const at = path.length ? path.join('.') : '<root>';
      if (!reachable || path.length === 0) return `${at}: x-mcp-header is only allowed on a property reached through "properties"`;
      const raw = schema['x-mcp-header'];
      if (typeof raw !== 'string' || !TOKEN.test(raw)) return `${at}: x-mcp-header must be a non-empty RFC 9110 token`;
      const type = typeof schema.type === 'string' ? schema.type : undefined;
      if (!type || !PERMITTED_TYPES.has(type)) return `${at}: x-mcp-header is only allowed on a string, integer or boolean property (got ${type ?? 'no type'})`;
      const prior = seen.get(raw.toLowerCase());
      if (prior !== undefined) return `x-mcp-header "${raw}" is declared twice (also as "${prior}")`;
      seen.set(raw.toLowerCase(), raw);
      declarations.push({ path, headerName: raw, type: type as McpHeaderDeclaration['type'] });
    }
    const properties = schema.properties;
    if (properties && typeof properties === 'object') {
      for (const [key, child] of Object.entries(properties)) {
        const fault = visit(child, [...path, key], reachable);
        if (fault) return fault;
      }
    }
    for (const keyword of UNREACHABLE) {
      const sub = schema[keyword];
      if (sub === undefined) continue;
      const branches = Array.isArray(sub) ? sub : NAME_MAPS.has(keyword) && sub && typeof sub === 'object' ? Object.values(sub) : [sub];
      for (const branch of branches) {
        const fault = visit(branch, [...path, `<${keyword}>`], false);
        if (fault) return fault;
      }
    }
    return undefined;
  };
  const fault = visit(inputSchema, [], true);
  return fault ? { valid: false, reason: fault } : { valid: true, declarations };
}

/** An argument's value at `path`, or undefined. */
function valueAt(args: unknown, path: readonly string[]): unknown {
  let value = args;
  for (const key of path) value = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
  return value;
}

/** A primitive argument as its header text; undefined for one no header mirrors (absent, null, another kind). */
function headerText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return String(value);
  if (typeof value === 'number' && Number.isFinite(value) && (!Number.isInteger(value) || Number.isSafeInteger(value))) return String(value);
  return undefined;
}

/**
 * The `Mcp-Param-<Name>` headers of one `tools/call`: for each declaration whose argument is a
 * string, finite number or boolean (absent and null: no header), its text (`true`/`false` for
 * booleans), sent as is when it is a plain printable ASCII field value and as
 * `=?base64?<base64 of its UTF-8>?=` otherwise.
 */
export function mcpParamHeaders(declarations: readonly McpHeaderDeclaration[], args: Record<string, unknown> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { path, headerName } of declarations) {
    const text = headerText(valueAt(args, path));
    if (text !== undefined) out[`Mcp-Param-${headerName}`] = encodeFieldValue(text);
  }
  return out;
}

const SENTINEL_PREFIX = '=?base64?';
const SENTINEL_SUFFIX = '?=';
const CANONICAL_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const CANONICAL_DECIMAL = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A header value as the text it carries: the Base64 sentinel decoded; undefined when it is malformed or holds characters a plain value may not. */
function decodeFieldValue(value: string): string | undefined {
  if (value.startsWith(SENTINEL_PREFIX) && value.endsWith(SENTINEL_SUFFIX) && value.length >= SENTINEL_PREFIX.length + SENTINEL_SUFFIX.length) {
    const payload = value.slice(SENTINEL_PREFIX.length, value.length - SENTINEL_SUFFIX.length);
    if (!CANONICAL_BASE64.test(payload)) return undefined;
    try {
      return utf8.decode(Buffer.from(payload, 'base64'));
    } catch {
      return undefined;
    }
  }
  return /^[\t\x20-\x7e]*$/.test(value) ? value : undefined;
}

/** Why a request's `Mcp-Param-*` headers and its body disagree: the header and what is wrong. */
export interface ParamHeaderMismatch {
  readonly header: string;
  readonly problem: string;
}

/**
 * Checks a 2026-07-28 `tools/call`'s `Mcp-Param-<Name>` headers against its body (spec
 * `basic/transports/streamable-http.mdx` "Server Behavior for Custom Headers"): for each
 * declaration whose argument has a value, the header must be present and carry that value
 * (after Base64 decoding; integers compared as numbers, `42.0` is `42`); a null or absent
 * argument expects no header, and a header of it is ignored. Undefined when they agree.
 *
 * @param header a request header's value by its lower-case name (Node's `req.headers`)
 */
export function paramHeaderMismatch(
  declarations: readonly McpHeaderDeclaration[],
  args: unknown,
  header: (lowerName: string) => string | undefined,
): ParamHeaderMismatch | undefined {
  for (const decl of declarations) {
    const value = valueAt(args, decl.path);
    const text = headerText(value);
    if (text === undefined) continue;
    const name = `Mcp-Param-${decl.headerName}`;
    const raw = header(name.toLowerCase());
    const at = decl.path.join('.');
    if (raw === undefined) return { header: name, problem: `the body carries ${at}=${JSON.stringify(value)} but the ${name} header is absent` };
    const decoded = decodeFieldValue(raw);
    if (decoded === undefined) return { header: name, problem: `the ${name} header carries invalid characters or a malformed Base64 value` };
    const same = decl.type === 'integer' && typeof value === 'number' && CANONICAL_DECIMAL.test(decoded) ? Number(decoded) === value : decoded === text;
    if (!same) return { header: name, problem: `the ${name} header carries ${JSON.stringify(decoded)} but the body carries ${at}=${JSON.stringify(value)}` };
  }
  return undefined;
}

function encodeFieldValue(text: string): string {
  const plain = text.length > 0 && text === text.trim() && /^[\t\x20-\x7e]*$/.test(text) && !(text.startsWith('=?base64?') && text.endsWith('?='));
  return plain ? text : `=?base64?${Buffer.from(text, 'utf8').toString('base64')}?=`;
}
