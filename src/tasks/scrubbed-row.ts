/**
 * A stored task row as a reader is shown it (`tasks/get`, `tasks/result`, `tasks/list`,
 * `GET /api/v1/tasks`, a 2026-07-28 `tasks/get`, `mcp-broker approvals`, the status page): its
 * caller- and upstream-given text scrubbed again with the scrubber's secrets of now, as
 * `shownRecord` (broker/record.ts) shows the matching record fields: `args`, `result`, `name`,
 * `subject`, `unit`, `principal`, and `reason` (kept cut as its call's record's is, at
 * `MAX_REASON_CHARS` with `...`: with any exact secret known, the characters before the mark are
 * dropped as `Scrubber.cutEndText` drops them). Ids, times, states, `owner` and `approvedBy` are
 * as stored. A row was scrubbed when it was stored, with the secrets known then (its `name`,
 * `subject`, `unit` and `principal` not at all); a reload (or a restart) that adds a secret must
 * not leave it readable in rows kept for a task's TTL.
 *
 * For showing only: whoever matches a row by its principal (a principal's own rows), or runs or
 * records it, uses the row as stored. Returns the row itself when nothing changes.
 */
import type { CallToolResult } from '@modelcontextprotocol/server';
import { shownReason } from '../broker/record.js';
import { scrubResult } from '../broker/scrub.js';
import type { Scrubber } from '../shared/scrub.js';
import type { TaskRow } from '../store/store.js';

export function scrubbedTaskRow(scrubber: Scrubber, row: TaskRow): TaskRow {
  let out: { -readonly [K in keyof TaskRow]: TaskRow[K] } | undefined;
  const set = <K extends keyof TaskRow>(key: K, next: TaskRow[K]) => {
    if (next !== row[key]) (out ??= { ...row })[key] = next;
  };
  set('args', scrubber.value(row.args));
  set('result', isResult(row.result) ? scrubResult(scrubber, row.result).result : scrubber.value(row.result));
  set('reason', row.reason === null ? null : shownReason(scrubber, row.reason));
  // Never cut when stored: scrubbed whole.
  set('name', scrubber.text(row.name));
  set('subject', scrubber.text(row.subject));
  set('unit', scrubber.text(row.unit));
  set('principal', scrubber.text(row.principal));
  return out ?? row;
}

function isResult(value: unknown): value is CallToolResult {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
