/**
 * `mcp-broker calls`: prints call records (`broker.records.path`, rotated files included) as a
 * readable table, oldest first by the time each call started (`ts`; a record is written when its
 * call settles, so the files are not in that order). Filters: `--outcome` (comma-separated outcomes),
 * `--tool` (a glob over advertised names), `--since` (an ISO-8601 time, or a duration back from
 * now: `90s`, `15m`, `2h`, `7d`, `500ms`); `--limit` keeps the N newest matching rows (default
 * {@link DEFAULT_CALLS_LIMIT}, 0 = all); `--id` keeps the call with that `callId`; `--json`
 * prints the matching records as ndjson. `--follow` then keeps printing matching records as
 * they are appended (rotation followed) until `signal` aborts (the CLI: Ctrl-C).
 *
 * Every record printed (table, `--json`, `--follow`) is shown as `shownRecord` shows it, with the
 * secrets of `config` as loaded now (`LoadedConfig.secrets`): the file keeps each record as it was
 * written, scrubbed with the secrets known then, and a value made a secret since must not show.
 * `--tool` matches the name as printed (`shownName`), so that a glob cannot tell a value the
 * name printed hides; the other filters read the broker's own fields, printed as written. Only
 * records printed are scrubbed whole (their `args`).
 * Returns the exit code: 0, or 2 for a bad option (a `--tool` glob that does not compile included).
 */
import { alignedTable, cut } from './table.js';
import { statSync } from 'node:fs';
import { globMatcher, globProblem } from '../shared/glob.js';
import { followRecords } from '../audit/follow.js';
import { NewestRecords, parseSince, readRecords, recordFiles } from '../audit/query.js';
import { shownName, shownRecord } from '../broker/record.js';
import { Scrubber } from '../shared/scrub.js';
import { OUTCOMES, type Outcome } from '../broker/outcomes.js';
import type { CallRecord } from '../broker/types.js';
import type { LoadedConfig } from '../config/load.js';
import { EXIT_OK, EXIT_USAGE, type CommandIo } from './io.js';

/** Rows shown when `--limit` is not given. */
export const DEFAULT_CALLS_LIMIT = 100;
/** Longest reason shown in the table, in characters. */
const REASON_WIDTH = 80;
const TOOL_WIDTH = 40;

export interface CallsOptions {
  /** Comma-separated outcomes. */
  outcome?: string;
  /** Glob over advertised names. */
  tool?: string;
  /** ISO-8601 time or duration (`15m`). */
  since?: string;
  limit?: number;
  /** Only the call with this `callId`. */
  id?: string;
  json?: boolean;
  /** Keep printing records as they are appended. */
  follow?: boolean;
}

export { parseSince, recordFiles };

export async function callsCommand(
  config: LoadedConfig,
  options: CallsOptions,
  io: CommandIo,
  now = Date.now(),
  signal: AbortSignal = new AbortController().signal,
): Promise<number> {
  let outcomes: Set<string> | undefined;
  if (options.outcome) {
    outcomes = new Set(options.outcome.split(',').map((o) => o.trim()).filter(Boolean));
    const unknown = [...outcomes].filter((o) => !(OUTCOMES as readonly string[]).includes(o));
    if (unknown.length) {
      io.stderr.write(`mcp-broker calls: unknown outcome ${unknown.map((o) => JSON.stringify(o)).join(', ')}; expected one of ${OUTCOMES.join(', ')}\n`);
      return EXIT_USAGE;
    }
  }
  let since: number | undefined;
  if (options.since !== undefined) {
    since = parseSince(options.since, now);
    if (since === undefined) {
      io.stderr.write(`mcp-broker calls: --since ${JSON.stringify(options.since)} is neither an ISO-8601 time nor a duration like 15m, 2h, 7d\n`);
      return EXIT_USAGE;
    }
  }
  const limit = options.limit ?? DEFAULT_CALLS_LIMIT;
  if (!Number.isInteger(limit) || limit < 0) {
    io.stderr.write('mcp-broker calls: --limit must be a non-negative integer\n');
    return EXIT_USAGE;
  }
  if (options.tool) {
    const problem = globProblem(options.tool);
    if (problem) {
      io.stderr.write(`mcp-broker calls: --tool ${JSON.stringify(options.tool)} is not a glob: ${problem}\n`);
      return EXIT_USAGE;
    }
  }
  const toolMatches = options.tool ? globMatcher(options.tool) : undefined;

  const scrubber = new Scrubber(config.secrets);
  const matches = (record: CallRecord) =>
    isCallRecord(record) &&
    (!outcomes || outcomes.has(record.outcome)) &&
    (!toolMatches || toolMatches(shownName(scrubber, record.name))) &&
    (options.id === undefined || record.callId === options.id) &&
    (since === undefined || Date.parse(record.ts) >= since);

  const { path, maxFiles } = config.broker.records;
  const files = recordFiles(path, maxFiles);
  // Where the follow starts: the end of what was read now (lines appended meanwhile are read twice at worst, never lost).
  const followFrom = files.includes(path) ? fileSize(path) : 0;
  const newest = new NewestRecords<CallRecord>(limit);
  let matched = 0;
  for await (const record of readRecords<CallRecord>(files)) {
    if (!matches(record)) continue;
    matched++;
    newest.add(record);
  }
  const rows = newest.records().map((record) => shownRecord(scrubber, record));
  if (options.json) {
    for (const r of rows) io.stdout.write(`${JSON.stringify(r)}\n`);
  } else if (!files.length) {
    io.stdout.write(`no records yet at ${path}\n`);
  } else if (!rows.length) {
    io.stdout.write('no calls match\n');
  } else {
    io.stdout.write(formatTable(rows));
    io.stdout.write(rows.length < matched ? `${rows.length} of ${matched} matching calls (the newest ${rows.length}; --limit 0 shows all)\n` : `${matched} call${matched === 1 ? '' : 's'}\n`);
  }
  if (options.follow) {
    await followRecords<CallRecord>(
      path,
      (written) => {
        if (!matches(written)) return;
        const record = shownRecord(scrubber, written);
        io.stdout.write(options.json ? `${JSON.stringify(record)}\n` : formatTable([record]).split('\n')[1]! + '\n');
      },
      { offset: followFrom, signal },
    );
  }
  return EXIT_OK;
}

function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** The records as an aligned text table with a header line. */
export function formatTable(records: readonly CallRecord[]): string {
  const header = ['TIME', 'OUTCOME', 'STATUS', 'TOOL', 'PRINCIPAL', 'ATTEMPTS', 'MS', 'REASON'];
  const body = records.map((r) => [
    r.ts.replace('T', ' '),
    r.outcome as Outcome,
    String(r.status),
    cut(r.name, TOOL_WIDTH),
    r.principal,
    String(r.attempts),
    String(r.durationMs),
    cut((r.reason ?? '').replace(/\s+/g, ' '), REASON_WIDTH),
  ]);
  return alignedTable(header, body);
}


/** Whether a JSON line of the records file is a call record (a foreign object line is skipped, never printed). */
function isCallRecord(record: unknown): record is CallRecord {
  const r = record as Partial<CallRecord> | null;
  return typeof r === 'object' && r !== null && typeof r.ts === 'string' && typeof r.outcome === 'string' && typeof r.name === 'string';
}
