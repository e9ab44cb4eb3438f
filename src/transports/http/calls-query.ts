/**
 * `GET /api/v1/calls`: reads the records file (`broker.records.path`, and its rotated
 * `.1` … `.N` files, oldest first) line by line and keeps the newest `limit` records that match
 * by the time their calls started (`ts`; the files are in the order calls settled), answered
 * oldest first, each scrubbed with the secrets of now (audit/scrubbed-record.ts). Memory is
 * bounded by `limit`, whatever the size of the files.
 */
import { NewestRecords, parseSince, readRecords, recordFiles } from '../../audit/query.js';
import { scrubbedCallRecord, scrubbedRecordFields } from '../../audit/scrubbed-record.js';
import type { Scrubber } from '../../shared/scrub.js';
import { isWildcardPattern, wildcardMatcher } from '../../shared/glob.js';
import { OUTCOMES } from '../../broker/outcomes.js';
import type { CallRecord } from '../../broker/types.js';

/** Most records one query returns. */
export const MAX_CALLS_LIMIT = 1000;
/** Records returned when `limit` is absent. */
export const DEFAULT_CALLS_LIMIT = 100;

export interface CallsQuery {
  /** Outcomes to keep (any of them); empty = all. */
  outcomes: readonly string[];
  /** Keep records whose advertised `name` or `subject` (`server/tool`) matches this glob (as `calls --tool`). */
  tool?: string;
  /** Keep records at or after this time, in ms since the epoch. */
  since?: number;
  /** Keep only this principal's records (non-operators). */
  principal?: string;
  /** At most this many, the newest; 1 … {@link MAX_CALLS_LIMIT}. */
  limit: number;
}

/**
 * Parses the query string: `outcome` (comma-separated or repeated; each one of the Contract's
 * outcomes), `tool` (a glob, as `mcp-broker calls --tool`), `since` (ISO-8601, a duration back such as `15m`, or ms since the epoch),
 * `limit`. Returns an error message for a bad value.
 */
export function parseCallsQuery(query: Record<string, unknown>, now = Date.now()): CallsQuery | { error: string } {
  const list = (v: unknown): string[] =>
    (Array.isArray(v) ? v : v === undefined ? [] : [v]).flatMap((x) => String(x).split(',')).map((x) => x.trim()).filter(Boolean);
  const outcomes = list(query.outcome);
  const unknown = outcomes.filter((o) => !(OUTCOMES as readonly string[]).includes(o));
  if (unknown.length) return { error: `unknown outcome ${unknown.map((o) => JSON.stringify(o)).join(', ')}; expected one of ${OUTCOMES.join(', ')}` };
  // One pattern: a repeated `tool` was taken as none (every record, the opposite of a filter).
  for (const single of ['tool', 'since', 'limit'] as const) {
    if (Array.isArray(query[single])) return { error: `${single} may be given once` };
  }
  const tool = typeof query.tool === 'string' && query.tool ? query.tool : undefined;
  // A caller's pattern is matched in linear time, never by a backtracking regular expression (a ReDoS would stall every caller).
  if (tool !== undefined && !isWildcardPattern(tool)) return { error: 'tool may hold only literal characters and the wildcards * and ? (no other glob syntax)' };
  let since: number | undefined;
  if (query.since !== undefined) {
    const raw = String(query.since);
    since = /^\d+$/.test(raw) ? Number(raw) : parseSince(raw, now);
    if (since === undefined || !Number.isFinite(since)) return { error: 'since must be an ISO-8601 time, a duration back (90s, 15m, 2h, 7d) or ms since the epoch' };
  }
  let limit = DEFAULT_CALLS_LIMIT;
  if (query.limit !== undefined) {
    limit = Number(query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_CALLS_LIMIT) return { error: `limit must be an integer from 1 to ${MAX_CALLS_LIMIT}` };
  }
  return { outcomes, tool, since, limit };
}

/**
 * Whether the reader may see `record` at all (`principal`: a non-operator sees only its own
 * records). Read from the record as written: it says whose the record is, and the reader names
 * only itself, so it tells nothing the record shown hides.
 */
export function visibleInCallsQuery(record: CallRecord, q: CallsQuery): boolean {
  return q.principal === undefined || record.principal === q.principal;
}

/**
 * Whether `record` passes the reader's filters (`outcomes`, `tool`, `since`; not `limit`, not
 * the visibility rule: {@link visibleInCallsQuery}). Give it the record as the reader is shown it
 * ({@link scrubbedCallRecord}, or at least its {@link callsQueryFields} scrubbed): matched
 * against a name as written, a `tool` pattern would tell a secret the name shown hides, one
 * character at a time, by which records it kept.
 */
export function matchesCallsQuery(record: CallRecord, q: CallsQuery): boolean {
  if (q.outcomes.length && !q.outcomes.includes(record.outcome)) return false;
  if (q.tool !== undefined) {
    const matches = matcherFor(q.tool);
    if (!matches(record.name) && !matches(record.subject)) return false;
  }
  if (q.since !== undefined && !(Date.parse(record.ts) >= q.since)) return false;
  return true;
}

/** Matchers by pattern: a query is matched against many records, and the events stream keeps one query. */
const compiled = new Map<string, (text: string) => boolean>();
const MAX_COMPILED = 64;

function matcherFor(glob: string): (text: string) => boolean {
  let matcher = compiled.get(glob);
  if (!matcher) {
    if (compiled.size >= MAX_COMPILED) compiled.clear();
    compiled.set(glob, (matcher = wildcardMatcher(glob)));
  }
  return matcher;
}

/** The fields of a record {@link matchesCallsQuery} reads for the filters `q` sets. */
export function callsQueryFields(q: CallsQuery): string[] {
  return [...(q.outcomes.length ? ['outcome'] : []), ...(q.tool !== undefined ? ['name', 'subject'] : []), ...(q.since !== undefined ? ['ts'] : [])];
}

/**
 * The newest `limit` records of `path` and its rotated files (by `ts`) that `q` lets the reader
 * see and that match its filters, oldest first, each as the reader is shown it: scrubbed with
 * `scrubber` ({@link scrubbedCallRecord}), the filters matched against the record so scrubbed.
 * Every line read has only the short fields the filters read scrubbed ({@link callsQueryFields}:
 * none without a filter); a whole record, its `args` included, only once kept. Those are matched
 * again once scrubbed whole: a reload may add a secret while the files are read.
 */
export async function queryCalls(path: string, maxFiles: number, q: CallsQuery, scrubber: Scrubber): Promise<CallRecord[]> {
  const files = recordFiles(path, maxFiles);
  const fields = callsQueryFields(q);
  const newest = new NewestRecords<CallRecord>(q.limit);
  for await (const record of readRecords<CallRecord>(files)) {
    if (visibleInCallsQuery(record, q) && matchesCallsQuery(fields.length ? scrubbedRecordFields(scrubber, record, fields) : record, q)) newest.add(record);
  }
  return newest
    .records()
    .map((record) => scrubbedCallRecord(scrubber, record))
    .filter((record) => matchesCallsQuery(record, q));
}
