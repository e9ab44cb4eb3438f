/**
 * The one line of a stdio upstream's stderr that says why it failed, picked out of a crash's
 * stack trace (`Error: Cannot find module '…'`, `SyntaxError: …`, `fatal: …`), never the Node
 * version trailer or a stack frame; and a way to show such a line without host paths.
 */
import { cut } from '../shared/cut.js';

/** Longest stderr line shown ({@link shownStderrLine}), in characters. */
export const STDERR_LINE_MAX_CHARS = 300;

/**
 * Longest line {@link meaningfulStderrLine} returns, in characters (`…` ending a longer one):
 * scrubbed whole as kept, then cut to {@link STDERR_LINE_MAX_CHARS} ({@link shownStderrLine}).
 */
export const STDERR_LINE_KEPT_CHARS = 2048;

/**
 * Characters at the end of a kept line that was cut which are never shown, in characters: the
 * first characters of a secret that ran across the cut stand there, unrecognised by the scrub
 * ({@link shownStderrLine}). A secret up to this long is covered.
 */
export const STDERR_LINE_CUT_MARGIN = STDERR_LINE_KEPT_CHARS - STDERR_LINE_MAX_CHARS;

/**
 * Lines that state an error: `Error: …`, `TypeError: …`, `Error [ERR_X]: …`, Python's
 * `ModuleNotFoundError: …`, `error: …` / `error[E0433]: …`, `fatal: …`, `FATAL ERROR: …`,
 * `panic: …`, `npm ERR! …`, `Uncaught …`.
 */
const ERROR_LINE =
  /^(?:[A-Z][A-Za-z0-9_.]*)?(?:Error|Exception)(?:\s*\[[^\]]*\])?:\s*\S|^(?:error|fatal|panic)(?:\[[^\]]*\])?\b[\s:!]|^fatal error\b|^npm (?:ERR!|error) |^Uncaught /i;

/** Lines that never explain anything: stack frames, caret markers, Node's trailers, object dumps. */
const NOISE_LINE = /^\s+at\s|^\s*\^+\s*$|^Node\.js v\d|^\(Use `node |^\s*[{}\]]|^\s/;

/** Whether one stderr line states an error (see {@link meaningfulStderrLine}). */
export function isErrorLine(line: string): boolean {
  return ERROR_LINE.test(line.trim()) && !/^\s+at\s/.test(line);
}

/**
 * The line of `stderr` (a child's output, any size) that best says why it failed: the first
 * line that states an error ({@link isErrorLine}); else the last non-empty line that is not a
 * stack frame, caret marker, object dump or Node's version trailer; undefined when there is
 * none. Trimmed, at most {@link STDERR_LINE_KEPT_CHARS} (a longer one cut there, ending in `…`);
 * not yet cut to be shown: a cut through a secret leaves its first characters unrecognised, so it
 * is shown through {@link shownStderrLine}, which scrubs it whole and never shows what a cut
 * left at its end.
 */
export function meaningfulStderrLine(stderr: string): string | undefined {
  const lines = stderr.split(/\r?\n/);
  const error = lines.find(isErrorLine);
  if (error !== undefined) return cut(error.trim(), STDERR_LINE_KEPT_CHARS);
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!;
    if (line.trim() && !NOISE_LINE.test(line)) return cut(line.trim(), STDERR_LINE_KEPT_CHARS);
  }
  return undefined;
}

/** Absolute paths: POSIX (`/a/b/c.js`, `file:///a/b/c.js`) and Windows (`C:\a\c.js`), kept to their last segment. */
const HOST_PATH = /(?<![\w.~/-])(?:file:\/\/)?\/(?:[^\s'"`()/:]+\/)+(?=[^\s'"`()/:]+)|(?<![\w])[A-Za-z]:\\(?:[^\s'"`()\\]+\\)+(?=[^\s'"`()\\]+)/g;

/**
 * `text` with every absolute host path cut to its last segment (`/home/me/x/y.js` → `…/y.js`),
 * for what reaches a downstream client: the operator sees the whole line on stderr, in the
 * banner and in `mcp-broker check`.
 */
export function withoutHostPaths(text: string): string {
  return text.replace(HOST_PATH, '…/');
}

/**
 * A line of {@link meaningfulStderrLine} as it is shown (in an upstream's status): scrubbed whole,
 * then cut at {@link STDERR_LINE_MAX_CHARS}. Of a line that was cut when it was kept, the end the
 * scrub left as it was (at most {@link STDERR_LINE_CUT_MARGIN} characters) is never shown: the
 * first characters of a secret across that cut stand there unrecognised, and a scrub that
 * redacted much before them (a secret learned since the line was kept, a config reload) would
 * otherwise bring them within the shown characters.
 */
export function shownStderrLine(line: string, scrub: (text: string) => string): string {
  let clean = scrub(line);
  if (line.length === STDERR_LINE_KEPT_CHARS && line.endsWith('…')) {
    const raw = line.slice(0, -1);
    const scrubbed = clean.endsWith('…') ? clean.slice(0, -1) : clean;
    let same = 0;
    while (same < STDERR_LINE_CUT_MARGIN && same < scrubbed.length && raw[raw.length - 1 - same] === scrubbed[scrubbed.length - 1 - same]) same++;
    clean = `${scrubbed.slice(0, scrubbed.length - same)}…`;
  }
  return cut(clean, STDERR_LINE_MAX_CHARS);
}
