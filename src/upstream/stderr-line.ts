/**
 * The one line of a stdio upstream's stderr that says why it failed, picked out of a crash's
 * stack trace (`Error: Cannot find module '…'`, `SyntaxError: …`, `fatal: …`), never the Node
 * version trailer or a stack frame; and a way to show such a line without host paths.
 */
import { cut } from '../shared/cut.js';

/** Longest stderr line shown ({@link shownStderrLine}), in characters. */
export const STDERR_LINE_MAX_CHARS = 300;

/** Longest line {@link meaningfulStderrLine} returns, in characters: kept whole for the scrubber, cut to {@link STDERR_LINE_MAX_CHARS} after it. */
export const STDERR_LINE_KEPT_CHARS = 2048;

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
 * none. Trimmed, at most {@link STDERR_LINE_KEPT_CHARS}; not yet cut to be shown: a cut through a
 * secret would leave its first characters unrecognised, so it is cut once scrubbed
 * ({@link shownStderrLine}).
 */
export function meaningfulStderrLine(stderr: string): string | undefined {
  const lines = stderr.split(/\r?\n/);
  const error = lines.find(isErrorLine);
  if (error !== undefined) return error.trim().slice(0, STDERR_LINE_KEPT_CHARS);
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!;
    if (line.trim() && !NOISE_LINE.test(line)) return line.trim().slice(0, STDERR_LINE_KEPT_CHARS);
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

/** A line of {@link meaningfulStderrLine} as it is shown (in an upstream's status): scrubbed whole, then cut at {@link STDERR_LINE_MAX_CHARS}. */
export function shownStderrLine(line: string, scrub: (text: string) => string): string {
  return cut(scrub(line), STDERR_LINE_MAX_CHARS);
}
