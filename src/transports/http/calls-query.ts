/**
 * `GET /api/v1/calls`: reads the records file (`broker.records.path`, and its rotated
 * `.1` … `.N` files, oldest first) line by line and keeps the newest `limit` records that match
 * by the time their calls started (`ts`; the files are in the order calls settled), answered
 * oldest first, each as its reader is shown it (broker/record.ts `shownRecord`: scrubbed again with
 * the secrets of now). Memory is bounded by `limit`, whatever the size of the files.
 */
import { NewestRecords, parseSince, readRecords, recordFiles } from '../../audit/query.js';
import { isWildcardPattern, wildcardMatcher } from '../../shared/glob.js';
import { OUTCOMES } from '../../broker/outcomes.js';
import type { CallRecord } from '../../broker/types.js';
import { shownName, shownRecord } from '../../broker/record.js';
import type { Scrubber } from '../../shared/scrub.js';

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
 * Whether one record passes the filters (all but `limit`). With `scrubber` (a record read from
 * the file), a `tool` pattern is matched against the `name` and `subject` the reader is shown
 * ({@link shownName}): matched against them as written, which records it kept would tell a
 * secret a reload added since. Without (a record published as shown: broker/record.ts), as it
 * is. The other fields it reads are the broker's own, shown as written.
 */
export function matchesCallsQuery(record: CallRecord, q: CallsQuery, scrubber?: Scrubber): boolean {
  if (q.principal !== undefined && record.principal !== q.principal) return false;
  if (q.outcomes.length && !q.outcomes.includes(record.outcome)) return false;
  if (q.tool !== undefined) {
    const matches = matcherFor(q.tool);
    const shown = (name: string) => (scrubber ? shownName(scrubber, name) : name);
    if (!matches(shown(record.name)) && !matches(shown(record.subject))) return false;
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

/**
 * The newest `limit` matching records of `path` and its rotated files (by `ts`), oldest first,
 * each as shown with `scrubber` (`shownRecord`; only the records kept are scrubbed whole).
 */
export async function queryCalls(path: string, maxFiles: number, q: CallsQuery, scrubber: Scrubber): Promise<CallRecord[]> {
  const files = recordFiles(path, maxFiles);
  const newest = new NewestRecords<CallRecord>(q.limit);
  for await (const record of readRecords<CallRecord>(files)) {
    if (matchesCallsQuery(record, q, scrubber)) newest.add(record);
  }
  return newest.records().map((record) => shownRecord(scrubber, record));
}
