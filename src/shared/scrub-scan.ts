/**
 * One pass over a text to find where the scrubber's patterns can match (issue 6 §3: scrubbing
 * scans each byte once; `scrub.ts`).
 *
 * Every alternative of the scrubber's combined pattern contains a literal anchor (a credential
 * name such as `password`, or a shape's prefix such as `AKIA` or `-----BEGIN `). An
 * Aho-Corasick automaton over case-folded characters finds every anchor occurrence (one pass says
 * whether there is any, a second where they are);
 * the pattern is then tried (sticky) only at the few positions where a match containing that
 * occurrence can start. A text with no anchor is returned untouched after the first pass, which
 * is what almost every large result is. The replacement equals `text.replace(pattern, …)`
 * exactly: the pattern is tried at every position where the global scan could find a match, in
 * the same order, against the same original text.
 */

/** Where a match can start relative to an anchor occurrence at `p`; `flag` only notes that it occurs. */
export type AnchorLead =
  | 'flag'
  /** at `p` itself (a shape's fixed prefix) */
  | 'none'
  /** in the run of `[A-Za-z0-9_-]` ending at `p`: the `"` before it, or its first word boundary (a credential name with any prefix) */
  | 'name'
  /** just after the `:` that ends the user part of `scheme://user:` (a URL's password) */
  | 'url';

export interface Anchor {
  /** The literal; matched case-insensitively unless {@link caseSensitive}. */
  readonly text: string;
  readonly lead: AnchorLead;
  /** The pattern matches this literal only as written (shapes); checked at each hit. */
  readonly caseSensitive?: boolean;
}

const ALPHABET = 128;
/** ASCII folded to lower case; every other character is one symbol (127), so anchors stay a superset. */
const FOLD = new Uint8Array(ALPHABET);
for (let c = 0; c < ALPHABET; c++) FOLD[c] = c >= 0x41 && c <= 0x5a ? c | 0x20 : c;

const fold = (c: number) => (c < ALPHABET ? FOLD[c]! : 127);
const isNameChar = (c: number) =>
  (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x5f || c === 0x2d;
/** `\w` without the `u` flag. */
const isWordChar = (c: number) => (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x5f;
/** The user part of `scheme://user:`, exactly as the URL-password shape reads it. */
const USER_PART = /[^\s/:@]+/y;

/** Bit set in a {@link AnchorScanner} table entry whose target state ends an anchor. */
const ACCEPTS = 1 << 30;

/**
 * Most automaton states for which a scanner also keeps its byte table (a row of 256 two-byte
 * entries per state: 2 MiB at this many). The built-in patterns make some 300 states; each exact
 * secret adds up to its length times its spellings. Past it, long texts are walked through the
 * folded table as before.
 */
export const BYTE_TABLE_MAX_STATES = 4096;
/** Bit set in a byte-table entry whose target state ends an anchor; the low 15 bits are the state. */
const BYTE_ACCEPTS = 0x8000;

const FOUND = () => {};

/** {@link AnchorScanner.starts} for a text where nothing can match (frozen: shared by every caller). */
const NOTHING = Object.freeze({ starts: Object.freeze([] as number[]), flagged: false });

/** Texts this long or longer are scanned as bytes ({@link AnchorScanner}); shorter ones character by character. */
export const BYTE_SCAN_MIN_CHARS = 4096;

/** Characters converted to bytes per step of a long scan: the size of the scratch buffer. */
export const BYTE_SCAN_STEP = 64 * 1024;

/**
 * The scratch buffer every scanner shares (a scanner is made per set of secrets; one scan runs at
 * a time on the thread, and a scan inside another's `hit` takes a fresh one). Allocated when the
 * module loads; its pages are touched by the first long scan.
 */
let scratch: Buffer | undefined = Buffer.allocUnsafeSlow(BYTE_SCAN_STEP);

/** A byte to the automaton's symbol: ASCII folded to lower case, every byte from 0x80 one symbol (127). */
const FOLD_BYTE = new Uint8Array(256);
for (let b = 0; b < 256; b++) FOLD_BYTE[b] = b < ALPHABET ? FOLD[b]! : 127;

/** The shared scratch buffer, taken (a fresh one while a scan is using it); give it back with `scratch = bytes`. */
function takeScratch(): Buffer {
  const bytes = scratch ?? Buffer.allocUnsafe(BYTE_SCAN_STEP);
  scratch = undefined;
  return bytes;
}

/** `text[from, from + bytes.length)` (or to its end) into `bytes` as Latin-1; returns the count. */
function fill(bytes: Buffer, text: string, from: number): number {
  const end = Math.min(text.length, from + bytes.length);
  return bytes.write(from === 0 && end === text.length ? text : text.substring(from, end), 0, 'latin1');
}

/** Whether `text[from, to)` is all ASCII. */
function isAscii(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (text.charCodeAt(i) >= ALPHABET) return false;
  return true;
}

/** Finds every anchor occurrence of a fixed set in one pass (Aho-Corasick over folded characters). */
export class AnchorScanner {
  /** Per (state, symbol): the next state times the alphabet size, plus {@link ACCEPTS} when it ends an anchor. */
  private readonly table: Int32Array;
  /**
   * Whether a long text may be scanned as bytes: every anchor is ASCII below U+007F and at most a
   * quarter of {@link BYTE_SCAN_STEP} long. A text's characters are then taken one byte each
   * (Latin-1, a character past U+00FF as its low byte), which keeps every occurrence (an ASCII
   * character is its own byte) and can add false ones, checked at each hit.
   */
  private readonly asBytes: boolean;
  /** The longest anchor, in characters. */
  private readonly longest: number;
  /** Per state: indices of the anchors that end there (its own and via fail links), or undefined. */
  private readonly outputs: Array<number[] | undefined>;
  /** Whether long texts are told clean through {@link byteTable}: with {@link asBytes} and at most {@link BYTE_TABLE_MAX_STATES} states. */
  private readonly wide: boolean;
  /**
   * Per (state, byte): the next state, plus {@link BYTE_ACCEPTS} when it ends an anchor; the fold
   * to lower case done in the table, so a step is one load. Built for the first long text
   * {@link occursIn} is asked about, not with the scanner (some 3 ms at start-up for the built-in
   * patterns, and a scanner is made again at each new secret).
   */
  private byteTable: Uint16Array | undefined;
  /** {@link anchorCharacters}, made on first use. */
  private anchorCharacterSet: Uint8Array | undefined;

  constructor(readonly anchors: readonly Anchor[]) {
    // The trie: per state, its own transitions, and the anchors that end there.
    const gotos: Array<Array<[symbol: number, next: number]>> = [[]];
    const own: number[][] = [[]];
    anchors.forEach((anchor, index) => {
      if (anchor.text.length === 0) throw new Error('an anchor cannot be empty');
      let state = 0;
      for (let i = 0; i < anchor.text.length; i++) {
        const c = fold(anchor.text.charCodeAt(i));
        let next = gotos[state]!.find(([symbol]) => symbol === c)?.[1];
        if (next === undefined) {
          next = gotos.length;
          gotos.push([]);
          own.push([]);
          gotos[state]!.push([c, next]);
        }
        state = next;
      }
      own[state]!.push(index);
    });
    // Breadth first, so a state's fail state (shallower) is complete before it: its row starts as
    // a copy of its fail state's row (every symbol it has no transition of its own for), then
    // takes its own transitions. A state's outputs are its own anchors and its fail state's,
    // known when it is first reached.
    const table = new Int32Array(gotos.length * ALPHABET);
    const outputs: Array<number[] | undefined> = new Array(gotos.length).fill(undefined);
    const fail = new Int32Array(gotos.length);
    const queue = [0];
    for (let q = 0; q < queue.length; q++) {
      const state = queue[q]!;
      const row = state * ALPHABET;
      const failRow = fail[state]! * ALPHABET;
      if (state !== 0) table.copyWithin(row, failRow, failRow + ALPHABET);
      for (const [c, next] of gotos[state]!) {
        fail[next] = state === 0 ? 0 : (table[failRow + c]! & (ACCEPTS - 1)) / ALPHABET;
        const inherited = outputs[fail[next]!];
        outputs[next] = own[next]!.length ? [...own[next]!, ...(inherited ?? [])] : inherited;
        // One load per character: the next row's offset and whether it accepts, in one entry.
        table[row + c] = (next * ALPHABET) | (outputs[next] ? ACCEPTS : 0);
        queue.push(next);
      }
    }
    this.table = table;
    this.outputs = outputs;
    // A loop, not Math.max(...): a spread of some 125,000 anchors overflows the stack.
    let longest = 0;
    for (const anchor of anchors) longest = Math.max(longest, anchor.text.length);
    this.longest = longest;
    // An anchor must fit a step with room to move on (occursIn's steps overlap by its length less
    // one). U+007F is left out with the rest of non-ASCII: the character walk reads it as the
    // symbol every non-ASCII character folds to, so an anchor holding it matches them too there.
    this.asBytes = longest <= BYTE_SCAN_STEP / 4 && anchors.every((a) => /^[\x00-\x7e]+$/.test(a.text));
    this.wide = this.asBytes && gotos.length <= BYTE_TABLE_MAX_STATES;
  }

  /** {@link byteTable}, built from the folded table on first use. */
  private builtByteTable(): Uint16Array {
    if (this.byteTable) return this.byteTable;
    const { table } = this;
    const states = table.length / ALPHABET;
    const byteTable = new Uint16Array(states * 256);
    for (let state = 0; state < states; state++) {
      for (let b = 0; b < 256; b++) {
        const next = table[state * ALPHABET + FOLD_BYTE[b]!]!;
        byteTable[state * 256 + b] = ((next & (ACCEPTS - 1)) / ALPHABET) | (next >= ACCEPTS ? BYTE_ACCEPTS : 0);
      }
    }
    return (this.byteTable = byteTable);
  }

  /**
   * Calls `hit(anchorIndex, position)` for every occurrence, in order of where it ends
   * (case-sensitive anchors only where they occur as written). `hit` may scan again (a scan
   * inside another takes its own buffer).
   *
   * A text of {@link BYTE_SCAN_MIN_CHARS} or more, when the anchors allow it ({@link asBytes}), is
   * copied {@link BYTE_SCAN_STEP} characters at a time into a byte buffer and walked there (issue
   * 19: a typed-array load per byte instead of `charCodeAt` and a fold). The automaton's state is
   * carried from one step to the next and every hit is checked against the text, so the hits are
   * those of the character walk.
   */
  scan(text: string, hit: (anchor: number, at: number) => void): void {
    if (!this.asBytes || text.length < BYTE_SCAN_MIN_CHARS) {
      this.walk(text, 0, text.length, hit);
      return;
    }
    const bytes = takeScratch();
    try {
      let row = 0;
      for (let from = 0; from < text.length; from += BYTE_SCAN_STEP) {
        const n = fill(bytes, text, from);
        row = this.walkBytes(bytes, n, from, row, text, hit);
      }
    } finally {
      scratch = bytes;
    }
  }

  /**
   * Runs the automaton over `text[from, to)` from its root, character by character, reporting
   * hits; with `firstOnly`, stops at the first and returns true.
   */
  private walk(text: string, from: number, to: number, hit: (anchor: number, at: number) => void, firstOnly = false): boolean {
    const { table } = this;
    let row = 0;
    for (let i = from; i < to; i++) {
      const c = text.charCodeAt(i);
      const next = table[row + (c < ALPHABET ? FOLD[c]! : 127)]!;
      row = next & (ACCEPTS - 1);
      if (next >= ACCEPTS && this.report(row, i, text, hit, firstOnly, false)) return true;
    }
    return false;
  }

  /**
   * Whether any anchor occurs in `text` (as written, for case-sensitive ones).
   *
   * A long text (see {@link scan}) is walked as bytes by several automata at once, each from its
   * part of every step, every part but the first starting {@link longest} − 1 bytes early, as
   * each step starts that far before the last one's end: every occurrence lies whole in one walk.
   * The walks do not wait on each other's table loads: four through the byte table when the
   * scanner has one ({@link anyInBytesWide}), else two through the folded table (a third less
   * time than one walk, issue 19).
   */
  occursIn(text: string): boolean {
    if (text.length === 0) return false;
    if (!this.asBytes || text.length < BYTE_SCAN_MIN_CHARS) return this.walk(text, 0, text.length, FOUND, true);
    const byteTable = this.wide ? this.builtByteTable() : undefined;
    const bytes = takeScratch();
    try {
      const overlap = this.longest - 1;
      // Steps of BYTE_SCAN_STEP bytes, each from `overlap` characters before the last one's end,
      // so an occurrence across a step's start is whole in it.
      const advance = BYTE_SCAN_STEP - overlap;
      for (let start = 0; ; start += advance) {
        const n = fill(bytes, text, start);
        if (byteTable ? this.anyInBytesWide(byteTable, bytes, n, start, overlap, text) : this.anyInBytes(bytes, n, start, overlap, text)) return true;
        if (start + n >= text.length) return false;
      }
    } finally {
      scratch = bytes;
    }
  }

  /**
   * Runs the automaton from `row` over `bytes[0, n)`, the characters of `text` from `base`,
   * reporting real hits; returns the row it ends in.
   */
  private walkBytes(bytes: Buffer, n: number, base: number, row: number, text: string, hit: (anchor: number, at: number) => void): number {
    const { table } = this;
    // As in anyInBytes: the inner loop stops at a byte that ends an anchor, reported outside it.
    for (let i = 0; ; i++) {
      for (; i < n; i++) {
        row = table[row + FOLD_BYTE[bytes[i]!]!]!;
        if (row >= ACCEPTS) break;
      }
      if (i >= n) return row;
      this.report((row &= ACCEPTS - 1), base + i, text, hit, false, true);
    }
  }

  /**
   * {@link anyInBytes} through the byte table, by four walks at once: the first from the start,
   * each other one {@link longest} − 1 bytes before its quarter, so every occurrence lies whole in
   * one walk. A step is one table load per walk, with no fold (issue 19: over 8 MiB with no
   * anchor, a fifth to a quarter less time than two walks through the folded table for prose or
   * base64, about the same for JSON text; one process per variant, three each).
   */
  private anyInBytesWide(table: Uint16Array, bytes: Uint8Array, n: number, base: number, overlap: number, text: string | undefined): boolean {
    const quarter = n >>> 2;
    // Too short to split: one walk.
    if (quarter <= overlap) return this.walkBytesWide(table, bytes, 0, n, 0, base, text);
    // The walks read bytes [0, length), [s1, s1 + length), [s2, …) and [s3, s3 + length), the last
    // ending at 4 × quarter ≤ n; the last walk then goes on to n.
    const length = quarter + overlap;
    const s1 = quarter - overlap;
    const s2 = s1 + quarter;
    const s3 = s2 + quarter;
    let a = 0;
    let b = 0;
    let c = 0;
    let d = 0;
    let k = 0;
    // As in anyInBytes, the inner loop calls nothing and masks nothing: a byte that ends an
    // anchor in any walk stops it, and is checked outside.
    for (;;) {
      for (; k < length; k++) {
        a = table[(a << 8) | bytes[k]!]!;
        b = table[(b << 8) | bytes[s1 + k]!]!;
        c = table[(c << 8) | bytes[s2 + k]!]!;
        d = table[(d << 8) | bytes[s3 + k]!]!;
        if ((a | b | c | d) >= BYTE_ACCEPTS) break;
      }
      if (k >= length) break;
      // Without a text to check against, any anchor's bytes count.
      if ((a | b | c | d) >= BYTE_ACCEPTS && text === undefined) return true;
      if (a >= BYTE_ACCEPTS && this.report((a &= BYTE_ACCEPTS - 1) * ALPHABET, base + k, text!, FOUND, true, true)) return true;
      if (b >= BYTE_ACCEPTS && this.report((b &= BYTE_ACCEPTS - 1) * ALPHABET, base + s1 + k, text!, FOUND, true, true)) return true;
      if (c >= BYTE_ACCEPTS && this.report((c &= BYTE_ACCEPTS - 1) * ALPHABET, base + s2 + k, text!, FOUND, true, true)) return true;
      if (d >= BYTE_ACCEPTS && this.report((d &= BYTE_ACCEPTS - 1) * ALPHABET, base + s3 + k, text!, FOUND, true, true)) return true;
      k++;
    }
    // The last walk's rest, past 4 × quarter.
    return this.walkBytesWide(table, bytes, s3 + length, n, d, base, text);
  }

  /**
   * One walk through the byte table over `bytes[from, to)` from `state`: whether a real occurrence
   * ends there (without `text`, whether any anchor's bytes do).
   */
  private walkBytesWide(table: Uint16Array, bytes: Uint8Array, from: number, to: number, state: number, base: number, text: string | undefined): boolean {
    let s = state;
    for (let i = from; i < to; i++) {
      s = table[(s << 8) | bytes[i]!]!;
      if (s >= BYTE_ACCEPTS && (text === undefined || this.report((s &= BYTE_ACCEPTS - 1) * ALPHABET, base + i, text, FOUND, true, true))) return true;
    }
    return false;
  }

  /**
   * Whether the text of a JSON string may hold an anchor occurrence, told from the string's bytes
   * as written (between its quotes, escapes and all, valid JSON; `escaped` marks the ASCII
   * characters its escapes stand for, wire/raw-json.ts `RawJsonString`) without decoding it:
   * false only when the text certainly holds none, so {@link starts} would find nothing in it.
   *
   * Every character of an occurrence is one some anchor holds (folded); unless an escape stands
   * for such a character, each is its own byte in `bytes` (a character past U+007F is bytes from
   * 0x80, which no anchor holds: {@link asBytes}), so the occurrence's bytes lie together there
   * and the walk finds them. True (undecided) when an escape stands for a character some anchor
   * holds, when the scanner keeps no byte table ({@link wide}), and wherever an anchor's bytes
   * occur, whether or not the text holds it there (the caller then reads the text).
   */
  mayOccurInJsonString(bytes: Uint8Array, escaped: Uint8Array): boolean {
    if (!this.wide) return true;
    const inAnchors = this.anchorCharacters();
    for (let c = 0; c < ALPHABET; c++) if (escaped[c] && inAnchors[FOLD[c]!]) return true;
    return bytes.length > 0 && this.anyInBytesWide(this.builtByteTable(), bytes, bytes.length, 0, this.longest - 1, undefined);
  }

  /** Per folded ASCII character: 1 when some anchor holds it. */
  private anchorCharacters(): Uint8Array {
    if (this.anchorCharacterSet) return this.anchorCharacterSet;
    const set = new Uint8Array(ALPHABET);
    for (const anchor of this.anchors) for (let i = 0; i < anchor.text.length; i++) set[fold(anchor.text.charCodeAt(i))] = 1;
    return (this.anchorCharacterSet = set);
  }

  /** Whether a real occurrence lies in `bytes[0, n)`, the characters of `text` from `base` (see {@link occursIn}). */
  private anyInBytes(bytes: Buffer, n: number, base: number, overlap: number, text: string): boolean {
    const { table } = this;
    const half = n >>> 1;
    // Too short to split: one walk.
    const second = half > overlap ? half - overlap : 0;
    const firstEnd = second === 0 ? 0 : half;
    let a = 0;
    let b = 0;
    let i = 0;
    let j = second;
    // The inner loops call nothing and mask nothing (measured: a call site or an AND in them costs
    // a quarter more time); they stop at a byte that ends an anchor, checked outside.
    for (;;) {
      for (; i < firstEnd; i++, j++) {
        a = table[a + FOLD_BYTE[bytes[i]!]!]!;
        b = table[b + FOLD_BYTE[bytes[j]!]!]!;
        if ((a | b) >= ACCEPTS) break;
      }
      if (i >= firstEnd) break;
      if (a >= ACCEPTS && this.report((a &= ACCEPTS - 1), base + i, text, FOUND, true, true)) return true;
      if (b >= ACCEPTS && this.report((b &= ACCEPTS - 1), base + j, text, FOUND, true, true)) return true;
      i++;
      j++;
    }
    // The second walk's rest.
    for (;;) {
      for (; j < n; j++) {
        b = table[b + FOLD_BYTE[bytes[j]!]!]!;
        if (b >= ACCEPTS) break;
      }
      if (j >= n) return false;
      if (this.report((b &= ACCEPTS - 1), base + j, text, FOUND, true, true)) return true;
      j++;
    }
  }

  /**
   * The anchors that end in `row` at character `end` of `text`: each one that is really there
   * (a case-sensitive anchor as written; found in bytes, every character ASCII, as bytes also
   * match where a character past U+00FF has an ASCII low byte) goes to `hit`. With `firstOnly`,
   * stops at the first and returns true.
   */
  private report(row: number, end: number, text: string, hit: (anchor: number, at: number) => void, firstOnly: boolean, fromBytes: boolean): boolean {
    for (const index of this.outputs[row / ALPHABET]!) {
      const anchor = this.anchors[index]!;
      const at = end + 1 - anchor.text.length;
      if (anchor.caseSensitive ? !text.startsWith(anchor.text, at) : fromBytes && !isAscii(text, at, end + 1)) continue;
      if (firstOnly) return true;
      hit(index, at);
    }
    return false;
  }

  /**
   * Sorted positions where a match can start (see {@link AnchorLead}), empty when no anchor
   * occurs (no match anywhere); `flagged` when a `flag` anchor occurs.
   */
  starts(text: string): { readonly starts: readonly number[]; readonly flagged: boolean } {
    // Almost every text holds no anchor: told by one pass that keeps nothing, and answered with
    // one shared result (nothing allocated per text).
    if (!this.occursIn(text)) return NOTHING;
    const starts: number[] = [];
    let flagged = false;
    let sorted = true;
    // The run of name characters around the last `name` hit, and how far its boundaries were listed.
    let runStart = -1;
    let lastHit = -1;
    let listedTo = -1;
    this.scan(text, (index, p) => {
      const lead = this.anchors[index]!.lead;
      if (lead === 'flag') {
        flagged = true;
      } else if (lead === 'none') {
        push(p);
      } else if (lead === 'url') {
        USER_PART.lastIndex = p + 3;
        const user = USER_PART.exec(text);
        const u = p + 3 + (user ? user[0].length : 0);
        if (user && text.charCodeAt(u) === 0x3a) push(u + 1);
      } else {
        // The run of [A-Za-z0-9_-] that ends just before p; the last hit's run when p is in it.
        let r = p;
        while (r > 0 && isNameChar(text.charCodeAt(r - 1))) {
          if (r - 1 === lastHit) {
            r = runStart; // everything from the last hit to p is name characters: the same run
            break;
          }
          r--;
        }
        if (r !== runStart) {
          runStart = r;
          listedTo = r;
          if (r > 0 && text.charCodeAt(r - 1) === 0x22) push(r - 1);
        }
        lastHit = p;
        // Every word boundary in [r, p] can start a credential-name match (`\b` + name prefix).
        for (let x = Math.max(listedTo, r); x <= p; x++) {
          if (isWordChar(text.charCodeAt(x)) !== (x > 0 && isWordChar(text.charCodeAt(x - 1)))) push(x);
        }
        listedTo = Math.max(listedTo, p + 1);
      }
    });
    if (!sorted) starts.sort((a, b) => a - b);
    return { starts, flagged };

    function push(at: number): void {
      const last = starts[starts.length - 1];
      if (last === at) return;
      if (last !== undefined && at < last) sorted = false;
      starts.push(at);
    }
  }
}

/**
 * `text.replace(global, replacer)` where `sticky` is the same pattern with the `y` flag and
 * `starts` every position a match can start ({@link AnchorScanner.starts}).
 */
export function replaceAtStarts(
  text: string,
  sticky: RegExp,
  starts: readonly number[],
  replacer: (match: string, groups: Record<string, string | undefined>) => string,
): string {
  let out = '';
  let copied = 0;
  let end = 0;
  for (const at of starts) {
    if (at < end) continue;
    sticky.lastIndex = at;
    const m = sticky.exec(text);
    if (!m) continue;
    out += text.slice(copied, at) + replacer(m[0], m.groups ?? {});
    copied = end = at + m[0].length;
  }
  return copied === 0 ? text : out + text.slice(copied);
}
