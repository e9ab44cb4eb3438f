/**
 * A stored task row as a reader is shown it (`tasks/get`, `tasks/result`, `tasks/list`,
 * `GET /api/v1/tasks`, a 2026-07-28 `tasks/get`): its arguments, result and reason scrubbed
 * again with the scrubber's secrets of now. A row was scrubbed when it was stored, with the
 * secrets known then; a reload (or a restart) that adds a secret must not leave it readable in
 * results kept for a task's TTL. Returns the row itself when nothing changes.
 */
import type { CallToolResult } from '@modelcontextprotocol/server';
import { scrubResult } from '../broker/scrub.js';
import type { Scrubber } from '../shared/scrub.js';
import type { TaskRow } from '../store/store.js';

export function scrubbedTaskRow(scrubber: Scrubber, row: TaskRow): TaskRow {
  const args = scrubber.value(row.args);
  const result = isResult(row.result) ? scrubResult(scrubber, row.result).result : scrubber.value(row.result);
  const reason = row.reason === null ? null : scrubber.text(row.reason);
  if (args === row.args && result === row.result && reason === row.reason) return row;
  return { ...row, args, result, reason };
}

function isResult(value: unknown): value is CallToolResult {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
