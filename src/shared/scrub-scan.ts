/**
 * One pass over a text to find where the scrubber's patterns can match (issue 6 §3: scrubbing
 * scans each byte once; `scrub.ts`).
 *
 * Every alternative of the scrubber's combined pattern contains a literal anchor (a credential
 * name such as `password`, or a shape's prefix such as `AKIA` or `-----BEGIN `). An
 * Aho-Corasick automaton over case-folded characters finds every anchor occurrence in one pass;
 * the pattern is then tried (sticky) only at the few positions where a match containing that
 * occurrence can start. A text with no anchor is returned untouched after that one pass, which
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

/** Finds every anchor occurrence of a fixed set in one pass (Aho-Corasick over folded characters). */
/** Bit set in a {@link AnchorScanner} table entry whose target state ends an anchor. */
const ACCEPTS = 1 << 30;

const FOUND = () => {};

/** {@link AnchorScanner.starts} for a text where nothing can match (frozen: shared by every caller). */
const NOTHING = Object.freeze({ starts: Object.freeze([] as number[]), flagged: false });

/** Texts this long or longer are scanned with {@link AnchorScanner}'s skip expression; shorter ones character by character. */
export const SKIP_MIN_CHARS = 4096;

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

export class AnchorScanner {
  /** Per (state, symbol): the next state times the alphabet size, plus {@link ACCEPTS} when it ends an anchor. */
  private readonly table: Int32Array;
  /** Finds the leftmost place any anchor occurs (ignoring case); undefined when an anchor is not ASCII. */
  private readonly skip?: RegExp;
  /** Per state: indices of the anchors that end there (its own and via fail links), or undefined. */
  private readonly outputs: Array<number[] | undefined>;

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
    // The expression must find every place an anchor can occur as the automaton folds text: only
    // ASCII anchors (every other character is one symbol to the automaton), matched ignoring case.
    if (anchors.every((a) => /^[\x00-\x7f]+$/.test(a.text))) {
      const alternatives = [...new Set(anchors.map((a) => a.text.toLowerCase()))].sort((a, b) => b.length - a.length);
      this.skip = new RegExp(alternatives.map(escapeRegExp).join('|'), 'gi');
    }
  }

  /**
   * Calls `hit(anchorIndex, position)` for every occurrence, in order of where it ends
   * (case-sensitive anchors only where they occur as written).
   *
   * A text of {@link SKIP_MIN_CHARS} or more is not walked character by character where no anchor
   * can start: the automaton runs from the leftmost place any anchor occurs (one case-insensitive
   * regular expression over every anchor, which V8 compiles to native code: about twice as fast
   * over text with no anchor, issue 19), until it is back at its root with nothing half matched,
   * and the expression looks for the next such place from there. The hits are the same: no
   * occurrence starts before the place the expression finds, nor inside a stretch the automaton
   * left at its root.
   */
  scan(text: string, hit: (anchor: number, at: number) => void): void {
    const skip = this.skip;
    if (!skip || text.length < SKIP_MIN_CHARS) {
      this.walk(text, 0, text.length, hit);
      return;
    }
    let from = 0;
    while (from < text.length) {
      skip.lastIndex = from;
      const found = skip.exec(text);
      if (!found) return;
      from = this.walk(text, found.index, text.length, hit, true);
    }
  }

  /**
   * Runs the automaton over `text[from, to)` from its root, reporting hits; with `untilRoot`,
   * stops after the first character that leaves it at its root past `from` (nothing half
   * matched). Returns where it stopped (the next character to look at).
   */
  private walk(text: string, from: number, to: number, hit: (anchor: number, at: number) => void, untilRoot = false, firstOnly = false): number {
    const { table, outputs, anchors } = this;
    let row = 0;
    for (let i = from; i < to; i++) {
      const c = text.charCodeAt(i);
      const next = table[row + (c < ALPHABET ? FOLD[c]! : 127)]!;
      row = next & (ACCEPTS - 1);
      if (next < ACCEPTS) {
        if (untilRoot && row === 0) return i + 1;
        continue;
      }
      for (const index of outputs[row / ALPHABET]!) {
        const anchor = anchors[index]!;
        const at = i + 1 - anchor.text.length;
        if (anchor.caseSensitive && !text.startsWith(anchor.text, at)) continue;
        // Asked only whether one occurs: stop at the first (-1).
        if (firstOnly) return -1;
        hit(index, at);
      }
    }
    return to;
  }

  /** Whether any anchor occurs in `text` (as written, for case-sensitive ones). */
  occursIn(text: string): boolean {
    if (text.length === 0) return false;
    const skip = this.skip;
    if (!skip || text.length < SKIP_MIN_CHARS) return this.walk(text, 0, text.length, FOUND, false, true) < 0;
    let from = 0;
    while (from < text.length) {
      skip.lastIndex = from;
      const found = skip.exec(text);
      if (!found) return false;
      from = this.walk(text, found.index, text.length, FOUND, true, true);
      if (from < 0) return true;
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
