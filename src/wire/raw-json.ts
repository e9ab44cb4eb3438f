/**
 * Raw JSON pass-through for large results (issue 6 §3: no re-serialising of results that need
 * no change).
 *
 * When a response line from an upstream is at least {@link RAW_MIN_BYTES}, the framer splits it
 * into its small envelope (`jsonrpc`, `id`) and the bytes of `result`, parses only those bytes,
 * and remembers them against the parsed object ({@link parseResponseLine}). If that very object
 * (or {@link withMeta} of it) is later sent to the downstream client, {@link encodeMessage}
 * writes the remembered bytes instead of serialising it again. Anything that changed the
 * result (scrubbing, a refusal) produced a new object, which has no bytes and is serialised.
 *
 * Remembered results are deep-frozen: a stage that edited one in place would otherwise have its
 * edit silently dropped on the wire. Stages copy on write (see `broker/scrub.ts`).
 *
 * A string value of {@link LAZY_STRING_MIN_BYTES} or more in such a result (an 8 MiB text block)
 * is left in its bytes: the result is parsed with the string's place held, and the member reads
 * it (decoded and parsed once) only when something asks for it. The scrubber tells such a text
 * clean from its bytes ({@link rawJsonString}; `broker/scrub.ts`), and a result written as its
 * bytes never needs it decoded at all (issue 19: decode and parse were ~14 ms of an 8 MiB
 * result's ~45 ms in the broker on Node 20, and the two 8 MiB strings ~4,000 fresh pages).
 */
import { randomUUID } from 'node:crypto';
import type { JSONRPCMessage } from '@modelcontextprotocol/server';
import { extend } from '../shared/extend.js';

/** Smallest response line whose result bytes are remembered, in bytes: 16 KiB. Below it serialising is cheaper than the bookkeeping. */
export const RAW_MIN_BYTES = 16 * 1024;

/** Smallest string value of a large result, in bytes between its quotes, left in its bytes until read: 64 KiB. */
export const LAZY_STRING_MIN_BYTES = 64 * 1024;

/** A string member of a large result parsed by its bytes ({@link parseResponseLine}). */
export interface RawJsonString {
  /**
   * The string's bytes between its quotes, escapes as written: no control byte and only JSON's
   * escapes (checked when parsed); UTF-8 as the ordinary parse takes it (an invalid sequence reads
   * as U+FFFD, and is written on as it came).
   */
  readonly bytes: Buffer;
  /** Per ASCII character code: 1 when an escape in {@link bytes} stands for it (`\n`, `\"`, `\u0041`, …). Shared: read only. */
  readonly escaped: Uint8Array;
  /** Whether the member has been read (its text decoded) yet. */
  readonly read: boolean;
}

/** A {@link RawJsonString} as {@link parseResponseLine} keeps it: with its quotes, and marked when read. */
interface HeldString extends RawJsonString {
  readonly literal: Buffer;
  read: boolean;
}

/** Holder object → member name → the string it reads from its bytes. */
const lazyMembers = new WeakMap<object, Map<string, HeldString>>();

/**
 * The bytes of `holder[key]` when it is a string member {@link parseResponseLine} left in its
 * bytes (read or not: reading it decodes the same bytes); undefined for any other member.
 */
export function rawJsonString(holder: unknown, key: string): RawJsonString | undefined {
  return typeof holder === 'object' && holder !== null ? lazyMembers.get(holder)?.get(key) : undefined;
}

/** Result object → the exact JSON bytes it was parsed from. */
const rawBytes = new WeakMap<object, Buffer>();
/**
 * Object made by {@link withMeta} (or {@link withTail}) → the remembered result it extends, the
 * `_meta` it carries and the members it adds after the result's own.
 */
const extensions = new WeakMap<object, { base: Record<string, unknown>; meta: Record<string, unknown>; tail?: Record<string, unknown> }>();

const SPACE = 0x20;
const TAB = 0x09;
const CR = 0x0d;
const LF = 0x0a;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN = 0x7b;
const CLOSE = 0x7d;

const isSpace = (b: number | undefined) => b === SPACE || b === TAB || b === CR || b === LF;

/** The exact JSON size of a value parsed by {@link parseResponseLine}, in bytes; undefined for any other value. */
export function knownJsonBytes(value: unknown): number | undefined {
  return typeof value === 'object' && value !== null ? rawBytes.get(value)?.length : undefined;
}

/**
 * Parses a response line `{"jsonrpc":"2.0","id":…,"result":{…}}` (members in any order) by its
 * parts, remembering the result's bytes. Returns undefined when the line is not such a response
 * (a request, an error, other members, escapes in the envelope, a result that is not one JSON
 * object): the caller then parses the whole line as usual. Throws nothing.
 */
export function parseResponseLine(line: Buffer): JSONRPCMessage | undefined {
  const span = resultSpan(line);
  if (!span) return undefined;
  const strings = scanStrings(line, span.start, span.end);
  if (!strings) return undefined;
  let result: unknown;
  let lazy: HeldString[] | undefined;
  try {
    // Parsing the result's bytes on their own proves they are exactly one JSON value (its large
    // strings checked as JSON strings instead, their places held by markers).
    if (strings.large.length === 0) result = JSON.parse(line.toString('utf8', span.start, span.end));
    else {
      const held = parseHoldingStrings(line, span, strings.large);
      if (!held) return undefined;
      ({ result, lazy } = held);
    }
  } catch {
    return undefined;
  }
  if (typeof result !== 'object' || result === null || Array.isArray(result)) return undefined;
  // A duplicated key survives in the bytes but not in the parsed object (the last one wins), so
  // the bytes would carry what scrubbing and output evaluation never saw: parse as usual then.
  if (strings.keys !== keysInValue(result, 0)) return undefined;
  if (lazy) {
    try {
      if (placeStrings(result, lazy, 0) !== lazy.length) return undefined;
    } catch {
      // An array element read at once that no string can hold (past V8's longest): the ordinary parse refuses it too.
      return undefined;
    }
  }
  rawBytes.set(result, line.subarray(span.start, span.end));
  deepFreeze(result, 0);
  return { jsonrpc: '2.0', id: span.id, result } as JSONRPCMessage;
}

/** What a held string's place is marked with: this prefix (unguessable, per process) and its index. */
const MARKER = `\u0000mcp-broker-held:${randomUUID()}:`;

/**
 * The result in `line[span)` parsed with each of its `large` strings (quote to quote) held by a
 * marker string; undefined when one of them is not a valid JSON string (the full parse then
 * refuses the line, as it would have).
 */
function parseHoldingStrings(line: Buffer, span: Span, large: readonly StringSpan[]): { result: unknown; lazy: HeldString[] } | undefined {
  const lazy: HeldString[] = [];
  let text = '';
  let at = span.start;
  for (const { open, close } of large) {
    const escaped = checkJsonString(line, open + 1, close);
    if (!escaped) return undefined;
    text += line.toString('utf8', at, open) + JSON.stringify(MARKER + lazy.length);
    at = close + 1;
    const literal = line.subarray(open, close + 1);
    lazy.push({ literal, bytes: literal.subarray(1, literal.length - 1), escaped, read: false });
  }
  text += line.toString('utf8', at, span.end);
  return { result: JSON.parse(text), lazy };
}

/**
 * Puts each held string in its place: a member of an object reads its bytes when first read
 * (an accessor, noted in {@link lazyMembers}), an array element is read at once. Returns how many
 * markers it found (each must be found once).
 */
function placeStrings(value: object, lazy: readonly HeldString[], depth: number): number {
  if (depth > 256) return 0;
  let placed = 0;
  const take = (v: unknown) => (typeof v === 'string' && v.startsWith(MARKER) ? lazy[Number(v.slice(MARKER.length))] : undefined);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      const held = take(v);
      if (held) {
        value[i] = readHeld(held);
        placed++;
      } else if (typeof v === 'object' && v !== null) placed += placeStrings(v, lazy, depth + 1);
    }
    return placed;
  }
  for (const key of Object.keys(value)) {
    const v = (value as Record<string, unknown>)[key];
    const held = take(v);
    if (held) {
      let text: string | undefined;
      Object.defineProperty(value, key, { enumerable: true, configurable: true, get: () => (text ??= readHeld(held)) });
      let members = lazyMembers.get(value);
      if (!members) lazyMembers.set(value, (members = new Map()));
      members.set(key, held);
      placed++;
    } else if (typeof v === 'object' && v !== null) placed += placeStrings(v, lazy, depth + 1);
  }
  return placed;
}

/** A held string's text: its bytes decoded and parsed, the string marked read. */
function readHeld(held: HeldString): string {
  held.read = true;
  return JSON.parse(held.literal.toString('utf8')) as string;
}

/** Per byte after a backslash: the ASCII character that escape stands for; 0 where it is no JSON escape (`u` is read apart). */
const ESCAPE_STANDS = new Uint8Array(256);
for (const [kind, stands] of [[0x22, 0x22], [0x5c, 0x5c], [0x2f, 0x2f], [0x62, 0x08], [0x66, 0x0c], [0x6e, 0x0a], [0x72, 0x0d], [0x74, 0x09]] as const) ESCAPE_STANDS[kind] = stands;

/**
 * Whether `bytes[from, to)` is the inside of a valid JSON string (no control byte, every escape
 * one of JSON's): the ASCII characters its escapes stand for ({@link RawJsonString.escaped}), or
 * undefined when it is not. One pass: four bytes at a time (a word with no byte below 0x20 and no
 * backslash is passed at once), byte by byte from a word that has one.
 */
function checkJsonString(bytes: Buffer, from: number, to: number): Uint8Array | undefined {
  const escaped = new Uint8Array(128);
  const base = bytes.byteOffset;
  const words = new Uint32Array(bytes.buffer, 0, bytes.buffer.byteLength >>> 2);
  let i = from;
  while (i < to) {
    if (((base + i) & 3) === 0) {
      // Whole words inside [i, to): stop at one with a byte below 0x20 or a backslash (SWAR tests
      // "some byte less than 0x20" and "some byte equal to 0x5C").
      const last = (base + to) >>> 2;
      let w = (base + i) >>> 2;
      for (; w < last; w++) {
        const v = words[w]!;
        const x = v ^ 0x5c5c5c5c;
        if ((((v - 0x20202020) & ~v) | ((x - 0x01010101) & ~x)) & 0x80808080) break;
      }
      i = w * 4 - base;
      if (i >= to) break;
    }
    const b = bytes[i]!;
    if (b < 0x20) return undefined;
    if (b !== BACKSLASH) {
      i++;
      continue;
    }
    const kind = bytes[i + 1]!;
    if (kind === 0x75) {
      if (i + 6 > to) return undefined;
      let unit = 0;
      for (let k = i + 2; k < i + 6; k++) {
        const h = bytes[k]!;
        const letter = h | 0x20;
        const digit = h >= 0x30 && h <= 0x39 ? h - 0x30 : letter >= 0x61 && letter <= 0x66 ? letter - 0x57 : -1;
        if (digit < 0) return undefined;
        unit = unit * 16 + digit;
      }
      if (unit < 128) escaped[unit] = 1;
      i += 6;
    } else {
      const stands = ESCAPE_STANDS[kind]!;
      if (stands === 0 || i + 2 > to) return undefined;
      escaped[stands] = 1;
      i += 2;
    }
  }
  return escaped;
}

/**
 * `{...result, _meta: {...result._meta, ...meta}}`; when `result` has remembered bytes and no
 * `_meta` of its own, the new object is written as those bytes with `_meta` put in front.
 */
export function withMeta<T extends { _meta?: Record<string, unknown> }>(result: T, meta: Record<string, unknown>): T {
  const out = extend(result, { _meta: extend(result._meta, meta) }) as T;
  if (result._meta === undefined && rawBytes.has(result)) extensions.set(out, { base: result as Record<string, unknown>, meta });
  return out;
}

/**
 * Marks `out`, a copy of the {@link withMeta} result `source` whose `_meta` was replaced and to
 * which the members of `tail` (scalars) were added, to be written as `source`'s remembered bytes
 * too: `{"_meta":…, <the bytes' members>, <tail members>}`. Returns `out`. Nothing is marked when
 * `source` has no remembered bytes or `out` lists the bytes' members in another order; {@link encodeMessage} checks the members again when it writes,
 * and serialises `out` when they are not exactly those.
 *
 * The 2026-07-28 lane (direct-modern-call.ts) stamps `resultType` and the server's identity on a
 * result, which the SDK writes after the result's own members.
 */
export function withTail<T extends Record<string, unknown>>(out: T, source: unknown, tail: Record<string, string | number | boolean>): T {
  const ext = typeof source === 'object' && source !== null ? extensions.get(source) : undefined;
  if (!ext || ext.tail || Object.keys(tail).length === 0 || typeof out._meta !== 'object' || out._meta === null) return out;
  // The bytes keep their members' order: only an `out` in that same order is written as them.
  const own = Object.keys(out).filter((key) => key !== '_meta' && !Object.hasOwn(tail, key));
  const bytesOrder = Object.keys(ext.base).filter((key) => key !== '_meta');
  if (own.length === bytesOrder.length && own.every((key, i) => key === bytesOrder[i])) extensions.set(out, { base: ext.base, meta: out._meta as Record<string, unknown>, tail });
  return out;
}

/**
 * One message as a line of JSON: a string, or Buffers to be written in order when the message
 * is a response whose result still has its remembered bytes.
 */
export function encodeMessage(message: JSONRPCMessage): string | Buffer[] {
  return encodeRawMessage(message) ?? JSON.stringify(message) + '\n';
}

/**
 * The Buffers {@link encodeMessage} writes for a response whose result still has its remembered
 * bytes (ending in the line's newline); undefined for any other message, at the cost of a few
 * property reads (nothing is serialised).
 */
export function encodeRawMessage(message: JSONRPCMessage): Buffer[] | undefined {
  const result = (message as { result?: unknown }).result;
  return typeof result === 'object' && result !== null ? rawResponse(message as { id: unknown; result: object }, result) : undefined;
}

function rawResponse(message: { id: unknown; result: object }, result: object): Buffer[] | undefined {
  const keys = Object.keys(message);
  if (keys.length !== 3 || !('jsonrpc' in message) || !('id' in message)) return undefined;
  // The envelope's tail is built only for a result that has bytes: most have none.
  const own = rawBytes.get(result);
  if (own) return [Buffer.from('{"result":'), own, tailOf(message.id)];
  const ext = extensions.get(result);
  if (!ext || !sameMembers(result as Record<string, unknown>, ext.base, ext.tail)) return undefined;
  const tail = tailOf(message.id);
  const base = rawBytes.get(ext.base)!;
  let at = 1;
  while (isSpace(base[at])) at++;
  const head = `{"result":{"_meta":${JSON.stringify((result as { _meta: unknown })._meta)}${base[at] === CLOSE ? '' : ','}`;
  if (!ext.tail) return [Buffer.from(head), base.subarray(at), tail];
  // The members after the bytes' own go before their closing brace.
  let end = base.length - 1;
  while (isSpace(base[end])) end--;
  const added = Object.keys(ext.tail)
    .map((key) => `${JSON.stringify(key)}:${JSON.stringify(ext.tail![key])}`)
    .join(',');
  return [Buffer.from(head), base.subarray(at, end), Buffer.from(`,${added}}`), tail];
}

/** The end of a raw response line: the envelope's members after `result`, and the newline. */
function tailOf(id: unknown): Buffer {
  return Buffer.from(`,"jsonrpc":"2.0","id":${JSON.stringify(id)}}\n`);
}

/** Whether `out` holds exactly `base`'s members (same values), `_meta`, and the members of `tail` (same values). */
function sameMembers(out: Record<string, unknown>, base: Record<string, unknown>, tail: Record<string, unknown> = {}): boolean {
  const keys = Object.keys(out);
  if (keys.length !== Object.keys(base).length + 1 + Object.keys(tail).length) return false;
  for (const key of keys) {
    if (key === '_meta') continue;
    if (Object.hasOwn(tail, key) ? out[key] !== tail[key] || Object.hasOwn(base, key) : out[key] !== base[key] || !Object.hasOwn(base, key)) return false;
  }
  return true;
}

function deepFreeze(value: object, depth: number): void {
  Object.freeze(value);
  if (depth > 256) return;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      if (typeof v === 'object' && v !== null) deepFreeze(v, depth + 1);
    }
    return;
  }
  // A held string (a string, nothing to freeze) is not read here.
  const held = lazyMembers.get(value);
  for (const key in value) {
    if (held?.has(key)) continue;
    const v = (value as Record<string, unknown>)[key];
    if (typeof v === 'object' && v !== null) deepFreeze(v, depth + 1);
  }
}

/** What the two ends of a message show: its id, and whether it is a response or a request. */
export interface MessageEnds {
  readonly id: string | number;
  /** `response`: a `result` or `error` member was seen; `request`: a `method` member was. */
  readonly kind: 'response' | 'request' | 'unknown';
}

/**
 * The `id` of a message known only by its first and last bytes (a line dropped for its size),
 * read from the plain members before its first object value and after its last one. Undefined
 * when neither end shows it (a number or a string without escapes).
 */
export function messageIdFromEnds(head: Buffer, tail: Buffer): MessageEnds | undefined {
  let id: string | number | undefined;
  let kind: MessageEnds['kind'] = 'unknown';
  const note = (key: string, value: unknown) => {
    if (key === 'id' && (typeof value === 'string' || typeof value === 'number')) id ??= value;
    if (key === 'method') kind = 'request';
  };
  let i = skipSpace(head, 0);
  if (head[i] === OPEN) {
    i++;
    for (;;) {
      const key = readString(head, skipSpace(head, i));
      if (!key) break;
      i = skipSpace(head, key.end);
      if (head[i] !== COLON) break;
      if (key.text === 'result' || key.text === 'error') {
        if (kind === 'unknown') kind = 'response';
        break;
      }
      const value = readScalar(head, skipSpace(head, i + 1));
      if (!value) break;
      note(key.text, value.value);
      i = skipSpace(head, value.end);
      if (head[i] !== COMMA) break;
      i++;
    }
  }
  let j = tail.length - 1;
  while (j >= 0 && isSpace(tail[j])) j--;
  if (tail[j] === CLOSE) {
    j--;
    for (;;) {
      while (j >= 0 && isSpace(tail[j])) j--;
      const value = readScalarBackwards(tail, j, -1);
      if (!value) break;
      let k = value.start - 1;
      while (k >= 0 && isSpace(tail[k])) k--;
      if (tail[k] !== COLON) break;
      k--;
      while (k >= 0 && isSpace(tail[k])) k--;
      const key = readStringBackwards(tail, k, -1);
      if (!key) break;
      note(key.text, value.value);
      k = key.start - 1;
      while (k >= 0 && isSpace(tail[k])) k--;
      if (tail[k] !== COMMA) break;
      j = k - 1;
    }
  }
  return id === undefined ? undefined : { id, kind };
}

interface Span {
  id: string | number;
  start: number;
  end: number;
}

/**
 * Where the value of `result` lies in a response line, read from both ends: the members before
 * it and after it must be exactly `jsonrpc` ("2.0") and `id` (a number or a string without
 * escapes), each once. Linear in the envelope only, never in the result.
 */
function resultSpan(line: Buffer): Span | undefined {
  let i = skipSpace(line, 0);
  if (line[i] !== OPEN) return undefined;
  i++;
  const seen: Record<string, unknown> = {};
  let start = -1;
  for (;;) {
    i = skipSpace(line, i);
    const key = readString(line, i);
    if (!key) return undefined;
    i = skipSpace(line, key.end);
    if (line[i] !== COLON) return undefined;
    i = skipSpace(line, i + 1);
    if (key.text === 'result') {
      start = i;
      break;
    }
    const value = readScalar(line, i);
    if (!value || !takeMember(seen, key.text, value.value)) return undefined;
    i = skipSpace(line, value.end);
    if (line[i] !== COMMA) return undefined;
    i++;
  }
  let j = line.length - 1;
  while (j > start && isSpace(line[j])) j--;
  if (line[j] !== CLOSE) return undefined;
  j--;
  for (;;) {
    while (j > start && isSpace(line[j])) j--;
    const value = readScalarBackwards(line, j, start);
    if (!value) break;
    let k = value.start - 1;
    while (k > start && isSpace(line[k])) k--;
    if (line[k] !== COLON) break;
    k--;
    while (k > start && isSpace(line[k])) k--;
    const key = readStringBackwards(line, k, start);
    if (!key) break;
    k = key.start - 1;
    while (k > start && isSpace(line[k])) k--;
    if (line[k] !== COMMA || !takeMember(seen, key.text, value.value)) return undefined;
    j = k - 1;
  }
  while (j > start && isSpace(line[j])) j--;
  if (seen.jsonrpc !== '2.0' || !('id' in seen) || line[start] !== OPEN || line[j] !== CLOSE) return undefined;
  return { id: seen.id as string | number, start, end: j + 1 };
}

function takeMember(seen: Record<string, unknown>, key: string, value: unknown): boolean {
  if ((key !== 'jsonrpc' && key !== 'id') || key in seen) return false;
  if (key === 'id' && typeof value !== 'string' && typeof value !== 'number') return false;
  seen[key] = value;
  return true;
}

function skipSpace(line: Buffer, i: number): number {
  while (isSpace(line[i])) i++;
  return i;
}

/** A string without escapes starting at `i` (its opening quote); undefined otherwise. */
function readString(line: Buffer, i: number): { text: string; end: number } | undefined {
  if (line[i] !== QUOTE) return undefined;
  for (let k = i + 1; k < line.length && k < i + 256; k++) {
    const b = line[k];
    if (b === BACKSLASH) return undefined;
    if (b === QUOTE) return { text: line.toString('utf8', i + 1, k), end: k + 1 };
  }
  return undefined;
}

/** A number or a string without escapes starting at `i`. */
function readScalar(line: Buffer, i: number): { value: unknown; end: number } | undefined {
  if (line[i] === QUOTE) {
    const s = readString(line, i);
    return s && { value: s.text, end: s.end };
  }
  let k = i;
  while (k < line.length && k < i + 32 && isNumberByte(line[k]!)) k++;
  return k > i ? numberAt(line, i, k) : undefined;
}

/** A number or a string without escapes ending at `j` (inclusive), not reaching `floor`. */
function readScalarBackwards(line: Buffer, j: number, floor: number): { value: unknown; start: number } | undefined {
  if (line[j] === QUOTE) {
    const s = readStringBackwards(line, j, floor);
    return s && { value: s.text, start: s.start };
  }
  let k = j;
  while (k > floor && j - k < 32 && isNumberByte(line[k]!)) k--;
  if (k === j) return undefined;
  const n = numberAt(line, k + 1, j + 1);
  return n && { value: n.value, start: k + 1 };
}

/** A string without escapes whose closing quote is at `j`. */
function readStringBackwards(line: Buffer, j: number, floor: number): { text: string; start: number } | undefined {
  if (line[j] !== QUOTE) return undefined;
  for (let k = j - 1; k > floor && k > j - 256; k--) {
    const b = line[k];
    if (b === BACKSLASH) return undefined;
    if (b === QUOTE) return { text: line.toString('utf8', k + 1, j), start: k };
  }
  return undefined;
}

function isNumberByte(b: number): boolean {
  return (b >= 0x30 && b <= 0x39) || b === 0x2d || b === 0x2b || b === 0x2e || b === 0x65 || b === 0x45;
}

function numberAt(line: Buffer, from: number, to: number): { value: number; end: number } | undefined {
  const text = line.toString('latin1', from, to);
  if (!/^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/.test(text)) return undefined;
  return { value: Number(text), end: to };
}

/** A string token, by the indices of its quotes. */
interface StringSpan {
  open: number;
  close: number;
}

/**
 * The string tokens of the JSON text in `bytes[start, end)`: how many are object keys (followed
 * by `:`), and the values of {@link LAZY_STRING_MIN_BYTES} or more between their quotes. Jumps
 * from quote to quote (a quote outside a string always opens one), so a large string costs one
 * native search per quote in it. Undefined for an unterminated string.
 */
function scanStrings(bytes: Buffer, start: number, end: number): { keys: number; large: StringSpan[] } | undefined {
  let keys = 0;
  const large: StringSpan[] = [];
  let at = start;
  for (;;) {
    const open = bytes.indexOf(QUOTE, at);
    if (open === -1 || open >= end) return { keys, large };
    let close = open + 1;
    for (;;) {
      close = bytes.indexOf(QUOTE, close);
      if (close === -1 || close >= end) return undefined;
      let backslashes = 0;
      while (bytes[close - 1 - backslashes] === BACKSLASH) backslashes++;
      if (backslashes % 2 === 0) break;
      close++;
    }
    at = close + 1;
    while (isSpace(bytes[at])) at++;
    if (bytes[at] === COLON) keys++;
    else if (close - open - 1 >= LAZY_STRING_MIN_BYTES) large.push({ open, close });
  }
}

/** How many object keys a parsed JSON value holds, all levels. */
function keysInValue(value: unknown, depth: number): number {
  if (typeof value !== 'object' || value === null || depth > 512) return 0;
  let keys = 0;
  if (Array.isArray(value)) {
    for (const v of value) keys += keysInValue(v, depth + 1);
    return keys;
  }
  for (const k in value) {
    keys++;
    keys += keysInValue((value as Record<string, unknown>)[k], depth + 1);
  }
  return keys;
}

