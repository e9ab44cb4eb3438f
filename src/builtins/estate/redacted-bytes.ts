/**
 * Secrets in estate files read in pieces (issue 4's estate relay; the scrub step of seed
 * 002_7bce204a86c1c7ba.txt). `estate__read_file` serves any byte range a caller names, and
 * `estate__search` scans the start of each file: the broker's scrub stage sees only the piece,
 * so a secret running across its edge, or a piece shorter than any secret (three bytes at a
 * time), would pass it. Each piece is therefore masked from a window read around it, before the
 * scrub stage sees it again.
 */
import { mergedRanges, REDACTED, type Scrubber } from '../../shared/scrub.js';

/**
 * Bytes read on each side of a piece, at least, for the secrets found around it: a secret that
 * reaches into a piece is redacted when it lies whole in the piece and this margin (an exact one
 * always, the margin being at least three times its longest spelling; a pattern such as a PEM
 * key or a JWT when shorter than the margin).
 */
export const SCRUB_MARGIN_BYTES = 4096;

/** The margin for `scrubber`: {@link SCRUB_MARGIN_BYTES}, or more for a long exact secret (3 UTF-8 bytes a UTF-16 unit). */
export function scrubMargin(scrubber: Scrubber): number {
  return Math.max(SCRUB_MARGIN_BYTES, 3 * scrubber.longestSecret);
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });
const isContinuation = (byte: number | undefined) => byte !== undefined && (byte & 0xc0) === 0x80;

/**
 * The byte ranges of `window` that hold something the scrubber redacts: sorted, disjoint
 * `[start, end)` offsets of `window`. Found twice: in the bytes read one to a character
 * (Latin-1, so any file, binary or not, and every ASCII secret and pattern), and, when the
 * window holds UTF-8 text, in that text (secrets spelled with other characters). In text, a
 * range is widened to whole UTF-8 characters.
 */
export function redactedBytes(scrubber: Scrubber, window: Buffer): Array<[number, number]> {
  const ranges = scrubber.redactions(window.toString('latin1'));
  if (window.some((byte) => byte >= 0x80)) ranges.push(...utf8Redactions(scrubber, window));
  for (const range of ranges) {
    while (range[0] > 0 && isContinuation(window[range[0]])) range[0]--;
    while (range[1] < window.length && isContinuation(window[range[1]])) range[1]++;
  }
  return mergedRanges(ranges);
}

/**
 * {@link Scrubber.redactions} of `window` read as UTF-8 (its cut characters at either end left
 * out), as byte ranges. A window that is not valid UTF-8 (a stray Latin-1 byte, no NUL) is read as
 * a reader is shown it, each bad sequence one U+FFFD ({@link lossyUtf8}): its other characters are
 * still text, and a secret spelled with them (`pässwort`, or `password=àbc…`, whose `à` holds the
 * byte 0xA0 that the Latin-1 reading takes for a space) is still found.
 */
function utf8Redactions(scrubber: Scrubber, window: Buffer): Array<[number, number]> {
  let start = 0;
  while (start < 3 && isContinuation(window[start])) start++;
  const end = start + utf8Boundary(window.subarray(start));
  const bytes = window.subarray(start, end);
  let text: string;
  try {
    text = STRICT_UTF8.decode(bytes);
  } catch {
    const lossy = lossyUtf8(bytes);
    const { starts } = lossy;
    // A range never ends between the two halves of a pair (they share a start) but for safety past both.
    const endOf = (to: number) => starts[to < lossy.text.length && starts[to] === starts[to - 1] ? to + 1 : to]!;
    return scrubber.redactions(lossy.text).map(([from, to]) => [start + starts[from]!, start + endOf(to)]);
  }
  const out: Array<[number, number]> = [];
  // Code units to bytes, walked forward once: the ranges come sorted.
  let unit = 0;
  let byte = start;
  const toByte = (at: number) => {
    byte += Buffer.byteLength(text.slice(unit, at));
    unit = at;
    return byte;
  };
  for (const [from, to] of scrubber.redactions(text)) out.push([toByte(from), toByte(to)]);
  return out;
}

/**
 * `bytes` decoded as UTF-8 with each bad sequence one U+FFFD, as the WHATWG decoder (and
 * `Buffer.toString`) does it, with the byte offset `starts[i]` each code unit came from (both
 * halves of a surrogate pair the same; `starts[text.length]` is the end).
 */
export function lossyUtf8(bytes: Uint8Array): { text: string; starts: Uint32Array } {
  const units = new Uint16Array(bytes.length);
  const starts = new Uint32Array(bytes.length + 1);
  let n = 0;
  const emit = (code: number, from: number) => {
    if (code > 0xffff) {
      code -= 0x10000;
      starts[n] = from;
      units[n++] = 0xd800 + (code >> 10);
      code = 0xdc00 + (code & 0x3ff);
    }
    starts[n] = from;
    units[n++] = code;
  };
  let need = 0;
  let seen = 0;
  let code = 0;
  let lower = 0x80;
  let upper = 0xbf;
  let lead = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (need === 0) {
      lead = i;
      if (b <= 0x7f) emit(b, i);
      else if (b >= 0xc2 && b <= 0xdf) [need, code] = [1, b & 0x1f];
      else if (b >= 0xe0 && b <= 0xef) {
        if (b === 0xe0) lower = 0xa0;
        if (b === 0xed) upper = 0x9f;
        [need, code] = [2, b & 0x0f];
      } else if (b >= 0xf0 && b <= 0xf4) {
        if (b === 0xf0) lower = 0x90;
        if (b === 0xf4) upper = 0x8f;
        [need, code] = [3, b & 0x07];
      } else emit(0xfffd, i);
      continue;
    }
    if (b < lower || b > upper) {
      emit(0xfffd, lead);
      need = seen = code = 0;
      lower = 0x80;
      upper = 0xbf;
      i--; // the byte starts afresh
      continue;
    }
    lower = 0x80;
    upper = 0xbf;
    code = (code << 6) | (b & 0x3f);
    if (++seen === need) {
      emit(code, lead);
      need = seen = code = 0;
    }
  }
  if (need !== 0) emit(0xfffd, lead);
  starts[n] = bytes.length;
  let text = '';
  for (let at = 0; at < n; at += 8192) text += String.fromCharCode(...units.subarray(at, Math.min(n, at + 8192)));
  return { text, starts: starts.subarray(0, n + 1) };
}

/** Length of `bytes` without a UTF-8 sequence cut off at its end. */
export function utf8Boundary(bytes: Buffer): number {
  let i = bytes.length - 1;
  let continuation = 0;
  while (i >= 0 && continuation < 3 && (bytes[i]! & 0xc0) === 0x80) {
    i--;
    continuation++;
  }
  if (i < 0) return bytes.length;
  const lead = bytes[i]!;
  const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  return bytes.length - i < need ? i : bytes.length;
}

/**
 * `window`'s bytes `[from, to)` as UTF-8 text with every part of `ranges` ({@link redactedBytes})
 * inside them shown as `[REDACTED]`, once a range. With `keepLines`, each is followed by as many
 * line breaks as the part it stands for held, so lines keep their numbers (a PEM key's).
 */
export function maskedText(window: Buffer, from: number, to: number, ranges: ReadonlyArray<readonly [number, number]>, keepLines = false): string {
  let text = '';
  let at = from;
  for (const [start, end] of ranges) {
    if (end <= from || start >= to) continue;
    if (start > at) text += window.toString('utf8', at, start);
    const stop = Math.min(end, to);
    text += REDACTED;
    if (keepLines) for (let i = Math.max(start, from); i < stop; i++) if (window[i] === 0x0a) text += '\n';
    at = stop;
  }
  return at < to ? text + window.toString('utf8', at, to) : text;
}

/**
 * A copy of `window`'s bytes `[from, to)` with every part of `ranges` inside them overwritten by
 * the bytes of `[REDACTED]`, repeated and cut to fit: a binary piece keeps its length and offsets.
 */
export function maskedBytes(window: Buffer, from: number, to: number, ranges: ReadonlyArray<readonly [number, number]>): Buffer {
  const piece = Buffer.from(window.subarray(from, to));
  for (const [start, end] of ranges) {
    for (let at = Math.max(start, from); at < Math.min(end, to); at++) piece[at - from] = REDACTED.charCodeAt((at - start) % REDACTED.length);
  }
  return piece;
}

/**
 * The lines of `text` (0-based, split at `\n` as `applyUnifiedDiff` splits them) that hold any
 * part of something `scrubber` redacts (`held`: the lines a proposed diff may not match), and
 * those whose ending newline is inside such a part that goes on past it (`joined`: a diff may not
 * insert a line after them, inside a secret of several lines), with the parts themselves
 * (`ranges`: {@link Scrubber.redactions} of `text`, for {@link keepsSecretsMasked}).
 */
export function secretLines(scrubber: Scrubber, text: string | undefined): Set<number> & { joined: Set<number>; ranges: Array<[number, number]> } {
  const ranges = text === undefined ? [] : scrubber.redactions(text);
  const held = Object.assign(new Set<number>(), { joined: new Set<number>(), ranges });
  if (text === undefined) return held;
  let line = 0;
  let at = 0;
  for (const [from, to] of ranges) {
    for (; at < from; at++) if (text.charCodeAt(at) === 0x0a) line++;
    held.add(line);
    for (; at < to - 1; at++) {
      if (text.charCodeAt(at) !== 0x0a) continue;
      held.joined.add(line);
      held.add(++line);
    }
  }
  return held;
}

/**
 * Whether every part of `before` that `scrubber` redacts is redacted still in `after`, at the
 * place its lines were moved to (`moved`: each line of `before`'s index in `after`, -1 when
 * removed; `applyUnifiedDiff` fills it). A diff keeps the lines holding a secret ({@link secretLines})
 * but can change what made it one: the field name on the line before a value on a line of its
 * own, or a line put before that name whose value the name becomes (`token=` over `"password"`).
 * `redacted`: {@link Scrubber.redactions} of `before`, when already found (`secretLines`' `ranges`).
 */
export function keepsSecretsMasked(scrubber: Scrubber, before: string, after: string, moved: readonly number[], redacted = scrubber.redactions(before)): boolean {
  const kept = scrubber.redactions(after);
  const afterStarts = lineStarts(after);
  let line = 0;
  let lineStart = 0;
  let k = 0;
  for (const [from, to] of redacted) {
    for (let at = before.indexOf('\n', lineStart); at >= 0 && at < from; at = before.indexOf('\n', lineStart)) {
      line++;
      lineStart = at + 1;
    }
    const target = moved[line];
    if (target === undefined || target < 0) return false;
    const start = afterStarts[target]! + (from - lineStart);
    const end = start + (to - from);
    if (after.slice(start, end) !== before.slice(from, to)) return false;
    while (k < kept.length && kept[k]![1] < end) k++;
    if (k === kept.length || kept[k]![0] > start) return false;
  }
  return true;
}

/** Where each line of `text` starts (split at `\n`). */
function lineStarts(text: string): number[] {
  const starts = [0];
  for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n', at + 1)) starts.push(at + 1);
  return starts;
}
