/**
 * Secrets in estate files read in pieces (issue 4's estate relay; the scrub step of seed
 * 002_7bce204a86c1c7ba.txt). `estate__read_file` serves any byte range a caller names, and
 * `estate__search` scans the start of each file: the broker's scrub stage sees only the piece,
 * so a secret running across its edge, or a piece shorter than any secret (three bytes at a
 * time), would pass it. Each piece is therefore masked from a window read around it, before the
 * scrub stage sees it again.
 */
import { REDACTED, type Scrubber } from '../../shared/scrub.js';

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
  ranges.sort((a, b) => a[0] - b[0]);
  const merged: Array<[number, number]> = [];
  for (const [from, to] of ranges) {
    const last = merged[merged.length - 1];
    if (last && from <= last[1]) last[1] = Math.max(last[1], to);
    else merged.push([from, to]);
  }
  return merged;
}

/** {@link Scrubber.redactions} of `window` read as UTF-8 (its cut characters at either end left out), as byte ranges; none when it is not UTF-8. */
function utf8Redactions(scrubber: Scrubber, window: Buffer): Array<[number, number]> {
  let start = 0;
  while (start < 3 && isContinuation(window[start])) start++;
  const end = start + utf8Boundary(window.subarray(start));
  let text: string;
  try {
    text = STRICT_UTF8.decode(window.subarray(start, end));
  } catch {
    return [];
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
 * part of something `scrubber` redacts: the lines a proposed diff may not match.
 */
export function secretLines(scrubber: Scrubber, text: string | undefined): Set<number> {
  const held = new Set<number>();
  if (text === undefined) return held;
  let line = 0;
  let at = 0;
  for (const [from, to] of scrubber.redactions(text)) {
    for (; at < from; at++) if (text.charCodeAt(at) === 0x0a) line++;
    held.add(line);
    for (; at < to - 1; at++) if (text.charCodeAt(at) === 0x0a) held.add(++line);
  }
  return held;
}
