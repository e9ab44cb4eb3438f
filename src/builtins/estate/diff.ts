/**
 * A unified diff applied to one file's text, for `estate__propose_change {unifiedDiff}` and
 * `estate__apply_proposal` (issue 4). One file per diff; `---`/`+++`/`diff`/`index` header lines
 * are skipped. Each hunk's old lines must match exactly; a hunk is looked for at its stated line
 * first, then at the nearest line where it matches (hunks apply in order, never overlapping).
 * `\ No newline at end of file` is honoured for both sides.
 */

/** Thrown when a diff does not parse or does not apply; the tool's own failure (`tool_error`). */
export class DiffError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DiffError';
  }
}

interface Hunk {
  oldStart: number;
  oldCount: number;
  newCount: number;
  lines: { op: ' ' | '-' | '+'; text: string }[];
  /** The old side's last line had no newline. */
  oldNoEol: boolean;
  /** The new side's last line has no newline. */
  newNoEol: boolean;
}

const HUNK_HEADER = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

/** Parses a unified diff into hunks. Throws {@link DiffError}. */
export function parseUnifiedDiff(diff: string): Hunk[] {
  const lines = diff.replace(/\r\n/g, '\n').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const hunks: Hunk[] = [];
  let current: Hunk | undefined;
  let oldSeen = 0;
  let newSeen = 0;
  let last: ' ' | '-' | '+' | undefined;
  for (const [index, line] of lines.entries()) {
    const header = HUNK_HEADER.exec(line);
    if (header) {
      if (current) finish(current, oldSeen, newSeen);
      current = {
        oldStart: Number(header[1]),
        oldCount: header[2] === undefined ? 1 : Number(header[2]),
        newCount: header[4] === undefined ? 1 : Number(header[4]),
        lines: [],
        oldNoEol: false,
        newNoEol: false,
      };
      hunks.push(current);
      oldSeen = newSeen = 0;
      last = undefined;
      continue;
    }
    if (!current || (oldSeen >= current.oldCount && newSeen >= current.newCount && !line.startsWith('\\'))) {
      if (/^(---|\+\+\+|diff |index |new file|deleted file|similarity|rename |old mode|new mode)/.test(line) || line === '') {
        if (current) {
          finish(current, oldSeen, newSeen);
          current = undefined;
        }
        continue;
      }
      throw new DiffError(`line ${index + 1} of the diff is outside any hunk`);
    }
    const op = line[0];
    if (op === '\\') {
      if (last === '-') current.oldNoEol = true;
      else if (last === '+') current.newNoEol = true;
      else if (last === ' ') current.oldNoEol = current.newNoEol = true;
      continue;
    }
    if (op !== ' ' && op !== '-' && op !== '+') {
      // Some tools drop the space of an empty context line.
      if (line === '') {
        current.lines.push({ op: ' ', text: '' });
        oldSeen++;
        newSeen++;
        last = ' ';
        continue;
      }
      throw new DiffError(`line ${index + 1} of the diff is not a context, removal or addition line`);
    }
    current.lines.push({ op, text: line.slice(1) });
    if (op !== '+') oldSeen++;
    if (op !== '-') newSeen++;
    last = op;
  }
  if (current) finish(current, oldSeen, newSeen);
  if (hunks.length === 0) throw new DiffError('the diff has no hunk (no "@@ -a,b +c,d @@" line)');
  return hunks;
}

/**
 * Most line comparisons the hunk search may make for one diff, for each line of the file and of
 * the diff (plus {@link SEARCH_BUDGET_BASE}): hunks stated where they match cost one comparison a
 * line; hunks stated far from where they match are refused past it ("too far from").
 */
export const SEARCH_BUDGET_PER_LINE = 16;
/** Line comparisons every diff may make besides {@link SEARCH_BUDGET_PER_LINE}'s. */
export const SEARCH_BUDGET_BASE = 1_000_000;

/**
 * `original` with `diff` applied. Throws {@link DiffError} when a hunk does not match. A place
 * where a hunk's old lines would cover a line `held` names (0-based lines of `original`: one
 * holding a secret) is never a match: the search goes on past it as past any line that differs,
 * so neither the answer nor where the hunk goes tells whether the diff guessed that line right.
 * `joined` names the lines whose newline lies inside a secret that goes on past it: no hunk goes
 * right after one of them (between two lines of that secret). `moved`, when given, is filled with
 * each line of `original`'s index in the result (-1 for a line removed).
 */
export function applyUnifiedDiff(original: string, diff: string, held?: ReadonlySet<number>, joined?: ReadonlySet<number>, moved?: number[]): string {
  const hunks = parseUnifiedDiff(diff);
  const lines = original === '' ? [] : original.split('\n');
  let eol = original === '' || original.endsWith('\n');
  if (original.endsWith('\n')) lines.pop();
  const out: string[] = [];
  const budget = { left: SEARCH_BUDGET_BASE + SEARCH_BUDGET_PER_LINE * (lines.length + hunks.reduce((n, h) => n + h.lines.length, 0)) };
  if (moved) moved.length = 0;
  let cursor = 0;
  const keep = (from: number, to: number) => {
    for (let i = from; i < to; i++) {
      moved?.push(out.length);
      out.push(lines[i]!);
    }
  };
  for (const [n, hunk] of hunks.entries()) {
    const oldLines = hunk.lines.filter((l) => l.op !== '+').map((l) => l.text);
    const newLines = hunk.lines.filter((l) => l.op !== '-').map((l) => l.text);
    // A pure insertion's oldStart is the line after which it goes.
    const expected = hunk.oldCount === 0 ? hunk.oldStart : hunk.oldStart - 1;
    const at = findHunk(lines, oldLines, Math.max(cursor, expected), cursor, held, budget);
    if (at === TOO_FAR) throw new DiffError(`hunk ${n + 1} (at line ${hunk.oldStart}) and those before it are too far from where they match (more than ${SEARCH_BUDGET_PER_LINE} comparisons a line)`);
    // Nor may a hunk go between two lines of one secret (a pure insertion: an `-----END ... KEY-----`
    // line put inside a PEM key ended its match there, and the rest of the key read unmasked).
    if (at < 0 || joined?.has(at - 1)) throw new DiffError(`hunk ${n + 1} (at line ${hunk.oldStart}) does not match the file`);
    keep(cursor, at);
    for (let i = 0; i < oldLines.length; i++) moved?.push(-1);
    out.push(...newLines);
    cursor = at + oldLines.length;
    if (cursor === lines.length) {
      if (hunk.newNoEol) eol = false;
      else if (hunk.oldNoEol || newLines.length > 0) eol = true;
    }
  }
  keep(cursor, lines.length);
  if (out.length === 0) return '';
  return out.join('\n') + (eol ? '\n' : '');
}

/** Whether any of `count` lines from `at` is in `held`. */
function touches(held: ReadonlySet<number> | undefined, at: number, count: number): boolean {
  if (!held?.size) return false;
  for (let i = at; i < at + count; i++) if (held.has(i)) return true;
  return false;
}

function finish(hunk: Hunk, oldSeen: number, newSeen: number): void {
  if (oldSeen !== hunk.oldCount || newSeen !== hunk.newCount) {
    throw new DiffError(`a hunk at line ${hunk.oldStart} says -${hunk.oldCount} +${hunk.newCount} lines but has -${oldSeen} +${newSeen}`);
  }
}

/** {@link findHunk}'s answer when the search passed its budget. */
const TOO_FAR = -2;

/**
 * The index nearest `expected` (not before `min`) where `needle` matches `lines` and covers no
 * line of `held`; -1 when none, {@link TOO_FAR} when `budget.left` line comparisons (each place
 * tried costs the needle's length, whatever the lines hold) run out first.
 */
function findHunk(lines: readonly string[], needle: readonly string[], expected: number, min: number, held: ReadonlySet<number> | undefined, budget: { left: number }): number {
  const cost = Math.max(1, needle.length);
  const matches = (at: number) => {
    if (at < min || at + needle.length > lines.length) return false;
    if ((budget.left -= cost) < 0) throw TOO_FAR;
    // A held line is never compared: nothing here depends on what it holds.
    if (touches(held, at, needle.length)) return false;
    for (let i = 0; i < needle.length; i++) if (lines[at + i] !== needle[i]) return false;
    return true;
  };
  const max = lines.length - needle.length;
  if (max < min) return -1;
  // The start a diff claims is the caller's number: searched from inside the file, never from
  // beyond it (a hunk at line 10^12 spun the event loop through every line number between).
  expected = Math.min(Math.max(expected, min), max);
  try {
    for (let d = 0; expected - d >= min || expected + d <= max; d++) {
      if (matches(expected + d)) return expected + d;
      if (d > 0 && matches(expected - d)) return expected - d;
    }
  } catch (error) {
    if (error === TOO_FAR) return TOO_FAR;
    throw error;
  }
  return -1;
}

/** Lines a unified diff adds and removes (its `+` and `-` lines). Throws {@link DiffError}. */
export function diffLineCounts(diff: string): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const hunk of parseUnifiedDiff(diff)) {
    for (const line of hunk.lines) {
      if (line.op === '+') added++;
      else if (line.op === '-') removed++;
    }
  }
  return { added, removed };
}

/**
 * Lines a whole-content replacement adds and removes: the lines between the longest common
 * start and end of the two texts (one changed span; exact for a change in one place, an upper
 * bound otherwise). A line of `before` that `held` names (0-based: one holding a secret) never
 * counts as common: the counts, shown in the approval prompt to the client that proposed the
 * content, would otherwise tell whether a line of it guessed that line right (+0/-0 against +1/-1).
 */
export function replacementLineCounts(before: string, after: string, held?: ReadonlySet<number>): { added: number; removed: number } {
  const a = splitLines(before);
  const b = splitLines(after);
  const same = (i: number, j: number) => a[i] === b[j] && !held?.has(i);
  let start = 0;
  while (start < a.length && start < b.length && same(start, start)) start++;
  let end = 0;
  while (end < a.length - start && end < b.length - start && same(a.length - 1 - end, b.length - 1 - end)) end++;
  return { added: b.length - start - end, removed: a.length - start - end };
}

function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (text.endsWith('\n')) lines.pop();
  return lines;
}
