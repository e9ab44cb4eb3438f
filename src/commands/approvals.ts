/**
 * `mcp-broker approvals list|approve ID|reject ID`: the approval inbox (calls parked on an
 * `ask`, `policy.askMode: "park"` or any call made as a task), read and decided in the store in
 * `broker.dataDir`. Works with or without a broker serving: a serving broker takes an approval
 * up within a second and the call resumes through the rest of the path; with none serving, the
 * next broker started on this store does. A rejected call fails at once with the reason.
 * Without a store file yet (no broker has used `broker.dataDir`), `list` shows no parked calls and
 * a decision is refused as for an unknown id; neither creates the store or its folder.
 * Every row printed is scrubbed again with the secrets of `config` as loaded now
 * (`LoadedConfig.secrets`; tasks/scrubbed-row.ts, as `GET /api/v1/tasks` shows rows): a row was
 * scrubbed when stored, with the secrets known then.
 *
 * Returns the exit code: 0, or 2 for an id that is not a parked call waiting for a decision.
 */
import { alignedTable, cut } from './table.js';
import type { LoadedConfig } from '../config/load.js';
import { decodeListCursor, SqliteStore, type Store, type TaskRow } from '../store/index.js';
import { Scrubber } from '../shared/scrub.js';
import { decideParked, listParked, rejectionReasonProblem, scrubbedTaskRow } from '../tasks/index.js';
import { EXIT_OK, EXIT_USAGE, type CommandIo } from './io.js';

export interface ApprovalsOptions {
  /** Print rows as ndjson instead of a table (`list`). */
  json?: boolean;
  /** The next cursor a `list` printed: read the page after it (`list`); absent: the first page. */
  cursor?: string;
  /** Most rows `list` prints at once; default `TASK_LIST_LIMIT` (500). */
  pageSize?: number;
  /** Why, for `reject` (one line, shown to the caller; at most `MAX_REJECTION_REASON_CHARS`, 300, characters, else exit 2). */
  reason?: string;
  /** The store; default the SQLite store in `broker.dataDir`. */
  store?: Store;
  now?: number;
}

/**
 * `approvals list [--cursor C]`: one page of the parked calls waiting for a decision, newest
 * first. When more follow, the page ends with its next cursor, on stdout like the rows: the
 * table's last line says `next page: --cursor C`; with `--json`, a last line `{"nextCursor": C}`
 * (the only line without an `id`). A cursor no page printed is exit 2.
 */
export async function approvalsListCommand(config: LoadedConfig, options: ApprovalsOptions, io: CommandIo): Promise<number> {
  if (options.cursor !== undefined && !decodeListCursor(options.cursor)) {
    io.stderr.write('mcp-broker: --cursor is not a cursor approvals list printed (pass back its next cursor as it came)\n');
    return EXIT_USAGE;
  }
  // No store yet: no call was ever parked; nothing is created to say so.
  const empty = () => printPage([], undefined, options, io);
  return withStore(config, options, empty, async (store, now) => {
    const { items: rows, nextCursor } = await listParked(store, now, { cursor: options.cursor, limit: options.pageSize });
    const scrubber = new Scrubber(config.secrets);
    return printPage(rows.map((row) => scrubbedTaskRow(scrubber, row)), nextCursor, options, io);
  });
}

/** Writes one page of the inbox (the table, or ndjson with `--json`) and its next cursor; returns {@link EXIT_OK}. */
function printPage(rows: readonly TaskRow[], nextCursor: string | undefined, options: ApprovalsOptions, io: CommandIo): number {
  if (options.json) {
    for (const r of rows) io.stdout.write(`${JSON.stringify(inboxRow(r))}\n`);
    if (nextCursor !== undefined) io.stdout.write(`${JSON.stringify({ nextCursor })}\n`);
    return EXIT_OK;
  }
  io.stdout.write(formatInbox(rows));
  const count = `${rows.length} parked call${rows.length === 1 ? '' : 's'}`;
  io.stdout.write(nextCursor === undefined ? `${count}\n` : `${count} on this page; next page: --cursor ${nextCursor}\n`);
  return EXIT_OK;
}

/** `approvals approve ID` / `approvals reject ID`; a `--reason` over 300 characters is exit 2, as an id not waiting for a decision is. */
export async function approvalsDecideCommand(config: LoadedConfig, id: string, approve: boolean, options: ApprovalsOptions, io: CommandIo): Promise<number> {
  const tooLong = options.reason !== undefined ? rejectionReasonProblem(options.reason) : undefined;
  if (tooLong) {
    io.stderr.write(`mcp-broker approvals: --reason ${tooLong}\n`);
    return EXIT_USAGE;
  }
  const unknown = () => {
    io.stderr.write(`mcp-broker: no parked call ${JSON.stringify(id)} waits for a decision (see mcp-broker approvals list)\n`);
    return EXIT_USAGE;
  };
  // No store yet: no call was ever parked, so `id` is unknown; refused without creating one.
  return withStore(config, options, unknown, async (store, now) => {
    const decided = await decideParked(store, id, { approve, by: 'cli', reason: options.reason }, now);
    if (!decided) return unknown();
    const row = scrubbedTaskRow(new Scrubber(config.secrets), decided);
    io.stdout.write(
      approve
        ? `approved ${row.id} (${row.name} for ${row.principal}): it runs when a broker serving this store takes it up\n`
        : `rejected ${row.id} (${row.name} for ${row.principal}): ${row.reason}\n`,
    );
    return EXIT_OK;
  });
}

/** What the inbox shows of a row (one scrubbed as shown: `scrubbedTaskRow`): no result. */
export function inboxRow(r: TaskRow): Record<string, unknown> {
  return { id: r.id, tool: r.name, subject: r.subject, principal: r.principal, createdAt: r.createdAt, reason: r.reason, args: r.args };
}

function formatInbox(rows: readonly TaskRow[]): string {
  const header = ['ID', 'CREATED', 'TOOL', 'PRINCIPAL', 'ARGS', 'WHY'];
  const body = rows.map((r) => [r.id, r.createdAt.replace('T', ' '), r.name, r.principal, cut(JSON.stringify(r.args), 60), cut(r.reason ?? '', 80)]);
  return alignedTable(header, body);
}


/**
 * Runs `act` on the store (`options.store`, else the SQLite store in `broker.dataDir`, opened
 * only when its file exists: these commands read, or decide a row that must already be there),
 * or `none` when there is no store file: then no folder or file is created.
 */
async function withStore(
  config: LoadedConfig,
  options: ApprovalsOptions,
  none: () => number,
  act: (store: Store, now: number) => Promise<number>,
): Promise<number> {
  const store = options.store ?? SqliteStore.openIfPresent(config.broker.dataDir);
  if (!store) return none();
  try {
    return await act(store, options.now ?? Date.now());
  } finally {
    if (!options.store) await store.close();
  }
}
