/**
 * Call records as readers are shown them: scrubbed again, with the secrets of now, each time one
 * is shown (the records file keeps them as written).
 */
import type { Scrubber } from '../shared/scrub.js';

/** The fields written cut, and the mark of their cut (shared/cut.ts `cut`, broker/failure.ts `cutReason`). */
const CUT_MARKS: ReadonlyMap<string, string> = new Map([
  ['name', '…'],
  ['subject', '…'],
  ['reason', '...'],
]);

/**
 * A call record as a reader is shown it (`GET /api/v1/calls`, `GET /api/v1/events`, the status
 * page's recent calls, `mcp-broker calls`): every field scrubbed again with the scrubber's secrets
 * of now. The records file keeps each record as it was written, scrubbed with the secrets known
 * then (an audit file is never rewritten); a reload (or the next start) that adds a secret must
 * not leave it readable there.
 *
 * Each field as the record stage scrubs it: by its name too, and its keys (a credential-named
 * field of `args` is redacted whole), but for `sessionId`, an id the broker made whose name alone
 * would redact it, which is scrubbed as text. `name` and `subject` were cut at
 * `RECORD_NAME_MAX_CHARS` (marked `…`) and `reason` at `MAX_REASON_CHARS` (marked `...`) after
 * the scrub of their day: the start of a newer secret that ran across the cut is dropped too
 * (`Scrubber.cutText`). Returns the record itself when nothing changes; never modifies it.
 */
export function scrubbedCallRecord<T extends object>(scrubber: Scrubber, record: T): T {
  return scrubbedRecordFields(scrubber, record, Object.keys(record));
}

/**
 * `record` with only `fields` scrubbed as {@link scrubbedCallRecord} scrubs them; the other
 * fields as written. For the filters of a query, which must match a record as its reader is shown
 * it (else a `tool` pattern matched against a name as written would tell, one character at a time,
 * a secret the name shown hides) without scrubbing the whole of every line read: a filter reads a
 * few short fields, a record's `args` may be large. Absent fields are skipped. The same record
 * when nothing changes.
 */
export function scrubbedRecordFields<T extends object>(scrubber: Scrubber, record: T, fields: Iterable<string>): T {
  const source = record as Record<string, unknown>;
  let out: Record<string, unknown> | undefined;
  for (const key of fields) {
    if (!Object.hasOwn(source, key)) continue;
    const value = source[key];
    const mark = CUT_MARKS.get(key);
    if (typeof value === 'string' && (mark !== undefined || key === 'sessionId')) {
      const next = mark === undefined ? scrubber.text(value) : scrubber.cutText(value, mark);
      if (next !== value) (out ??= { ...source })[key] = next;
      continue;
    }
    // Scrubbed as a field of an object, so its name counts as it does inside `args`.
    const entry = Object.entries(scrubber.value({ [key]: value }))[0]!;
    if (entry[0] !== key) {
      out ??= { ...source };
      delete out[key];
      out[entry[0]] = entry[1];
    } else if (entry[1] !== value) {
      (out ??= { ...source })[key] = entry[1];
    }
  }
  return (out ?? record) as T;
}
