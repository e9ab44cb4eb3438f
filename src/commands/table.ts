/**
 * Plain-text tables for the CLI's human output (`check`, `calls`, `approvals`): columns two
 * spaces apart, each as wide as its widest cell, no trailing spaces, one `\n` per row.
 */
import { printable } from '../shared/printable.js';

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
export { printable } from '../shared/printable.js';
