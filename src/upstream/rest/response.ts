/**
 * Turns an HTTP response of a rest upstream into a tool result (issue 7):
 * - 2xx (and a 3xx that is not followed, such as 304) → a result; a JSON object body becomes
 *   `structuredContent` plus the same JSON as a text block; other JSON and text bodies become
 *   text; a binary body is described, not shown. Bodies are read up to `maxResponseBytes`
 *   (schema `restServerSchema`); a longer one is cut and the text says so, scrubbed before it is
 *   cut ({@link CUT_MARGIN_BYTES}).
 * - 4xx other than 429 → a result with `isError: true` naming the status, then the body
 *   (`tool_error`: the API's own verdict).
 * - 429 and 5xx are not results: the upstream throws `upstream_http` (see `rest-upstream.ts`).
 * The exact header values injected into the request are masked in everything returned.
 */
import { StringDecoder } from 'node:string_decoder';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { REDACTED, secretSpellings } from '../../shared/scrub.js';

/**
 * Bytes read past `maxResponseBytes` of a body that goes on, for the scrub only: a secret running
 * across the cut is scrubbed whole, then what the scrub left as it was past the cut is dropped
 * ({@link responseResult}). A secret up to this long is covered.
 */
export const CUT_MARGIN_BYTES = 4096;

/** A response body read up to a bound. */
export interface BoundedBody {
  /** The body; when {@link truncated}, its first `maxBytes` and up to {@link CUT_MARGIN_BYTES} more, read for the scrub. */
  bytes: Buffer;
  /** Whether the body went on past the bound (the rest was not read). */
  truncated: boolean;
}

/**
 * Reads at most `maxBytes` of a body, then cancels the rest; of a longer one, up to `marginBytes`
 * more (default none), which are not part of the body shown (see {@link CUT_MARGIN_BYTES}).
 */
export async function readBounded(res: Response, maxBytes: number, marginBytes = 0): Promise<BoundedBody> {
  if (!res.body) return { bytes: Buffer.alloc(0), truncated: false };
  const reader = res.body.getReader();
  const chunks: Buffer[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) {
      const bytes = Buffer.concat(chunks);
      return { bytes, truncated: bytes.length > maxBytes };
    }
    chunks.push(Buffer.from(value));
    size += value.byteLength;
    if (size > maxBytes + marginBytes) {
      await reader.cancel().catch(() => undefined);
      return { bytes: Buffer.concat(chunks).subarray(0, maxBytes + marginBytes), truncated: true };
    }
  }
}

/**
 * The text of a body cut at `maxBytes` (`bytes` holding a margin past it), scrubbed with `scrub`:
 * the first `maxBytes` scrubbed on their own (a character the cut split left out), kept as far as
 * they agree with the whole text scrubbed; where they part, a `[REDACTED]` of the whole text
 * there is kept whole and nothing after it. So a secret across the cut shows as its `[REDACTED]`,
 * never its first characters, and nothing from past the cut is shown: at most the first
 * `maxBytes` scrubbed, plus the rest of one marker.
 */
function cutScrubbed(bytes: Buffer, maxBytes: number, scrub: (text: string) => string): string {
  const whole = scrub(bytes.toString('utf8'));
  const head = scrub(new StringDecoder('utf8').write(bytes.subarray(0, maxBytes)));
  const most = Math.min(head.length, whole.length);
  let same = 0;
  while (same < most && head.charCodeAt(same) === whole.charCodeAt(same)) same++;
  if (same === head.length) return head;
  // They part where the whole text redacted what the head could not recognise (a secret the cut ran through).
  const marker = whole.lastIndexOf(REDACTED, same);
  return marker >= 0 && marker + REDACTED.length > same ? whole.slice(0, marker + REDACTED.length) : head.slice(0, same);
}

/** Replaces exact secret values in text and in every string (and key) of a JSON value. */
export interface SecretMask {
  text(s: string): string;
  value<T>(v: T): T;
}

/** A mask for `secrets` (values shorter than 4 characters are ignored, as the scrubber does). */
export function secretMask(secrets: readonly string[]): SecretMask {
  const forms = [...new Set(secrets.filter((s) => s.length >= 4).flatMap((s) => secretSpellings(s).filter((f) => f.length >= 4)))].sort(
    (a, b) => b.length - a.length,
  );
  const text = (s: string) => (forms.length === 0 ? s : forms.reduce((acc, f) => acc.split(f).join(REDACTED), s));
  const value = <T>(v: T): T => {
    if (forms.length === 0) return v;
    if (typeof v === 'string') return text(v) as T;
    if (Array.isArray(v)) return v.map(value) as T;
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) out[text(k)] = value(x);
      return out as T;
    }
    return v;
  };
  return { text, value };
}

/** What the result is built from. */
export interface ResponseParts {
  status: number;
  statusText: string;
  contentType: string;
  body: BoundedBody;
  maxBytes: number;
}

/**
 * The result for a response that is not a 429/5xx (module doc). `scrub` (default `mask.text`)
 * scrubs a cut body whole before it is cut; the whole result is scrubbed again on its way out.
 */
export function responseResult(parts: ResponseParts, mask: SecretMask, scrub: (text: string) => string = mask.text): CallToolResult {
  const { status, body } = parts;
  const isError = status >= 400;
  const head = `HTTP ${status}${parts.statusText ? ` ${parts.statusText}` : ''}`;
  const type = parts.contentType.split(';')[0]!.trim().toLowerCase();
  if (body.bytes.length === 0) return { content: [{ type: 'text', text: head }], ...(isError ? { isError } : {}) };
  if (!isTextual(type)) {
    const text = `${head}: ${body.truncated ? `more than ${parts.maxBytes}` : body.bytes.length} bytes of ${type || 'unknown type'} (binary body not shown)`;
    return { content: [{ type: 'text', text }], ...(isError ? { isError } : {}) };
  }
  const raw = body.truncated ? cutScrubbed(body.bytes, parts.maxBytes, (t) => scrub(mask.text(t))) : mask.text(body.bytes.toString('utf8'));
  const cut = body.truncated ? `\n[body cut at maxResponseBytes = ${parts.maxBytes} bytes]` : '';
  if (isError) return { isError: true, content: [{ type: 'text', text: `${head}\n${raw}${cut}` }] };
  if (isJson(type) && !body.truncated) {
    const parsed = parseJson(raw);
    if (parsed !== undefined && typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
      return { content: [{ type: 'text', text: raw }], structuredContent: mask.value(parsed as Record<string, unknown>) };
    }
  }
  return { content: [{ type: 'text', text: raw + cut }] };
}

/** `Retry-After` (delta-seconds or an HTTP date) in ms from `nowMs`; undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, nowMs: number): number | undefined {
  if (!header) return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

function isJson(type: string): boolean {
  return type === 'application/json' || type.endsWith('+json');
}

function isTextual(type: string): boolean {
  return (
    type === '' ||
    type.startsWith('text/') ||
    isJson(type) ||
    type.endsWith('+xml') ||
    ['application/xml', 'application/javascript', 'application/x-www-form-urlencoded', 'application/yaml', 'application/x-yaml', 'application/problem+json'].includes(type)
  );
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
