/**
 * Plain-text tables for the CLI's human output (`check`, `calls`, `approvals`): columns two
 * spaces apart, each as wide as its widest cell, no trailing spaces, one `\n` per row.
 */

/**
 * C0 and C1 control characters and DEL, and the Unicode bidi controls (embeddings and overrides
 * U+202A–U+202E, isolates U+2066–U+2069, the marks U+200E, U+200F and U+061C): none may reach
 * the terminal from a cell.
 */
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/g;

/**
 * `text` with every control character written as an escape (`\x1b`, `\n`, `\u202e`, …): a cell
 * holds text a remote caller or an upstream chose (a tool name nobody serves, an error line),
 * which must neither send escape sequences to the terminal nor start a row of its own, nor
 * reorder what the terminal shows of its row (a right-to-left override, Trojan-source style).
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (c) => {
    const code = c.charCodeAt(0);
    if (code > 0xff) return `\\u${code.toString(16).padStart(4, '0')}`;
    return c === '\n' ? '\\n' : c === '\r' ? '\\r' : c === '\t' ? '\\t' : `\\x${code.toString(16).padStart(2, '0')}`;
  });
}

/** `header` then `body` as aligned rows, each cell {@link printable}; the last column is not padded. */
export function alignedTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const body = rows.map((row) => row.map(printable));
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd() + '\n';
  return [header, ...body].map(line).join('');
}

export { cut } from '../shared/cut.js';
