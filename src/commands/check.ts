/**
 * `mcp-broker check [--config servers.json] [--json]`: starts every upstream of the config the
 * way `serve` does ({@link Gateway.start}: the same dial, with each server's `connectTimeoutMs`),
 * serving nothing, waits until each first dial has settled (ready or failed), prints one row per
 * server (server, state, tools, the error if any), closes them all, and answers with the exit code.
 *
 * Exit codes: 0 when every server that counts is `ready`, 1 otherwise, 2 for a bad config (a
 * function module, an OpenAPI document, two tools with one advertised name, a records path or
 * store `serve` could not use). The servers that
 * count are those marked `required: true`; when none is, every server not `disabled` counts.
 * Nothing durable is touched: no call is served, so no record is written, and pins go to a
 * throwaway in-memory store.
 *
 * Before dialling, what `serve` would refuse at start outside the config file is looked for
 * ({@link startProblems}): each is exit 2 with the line `serve` exits with (`bad config: <JSON
 * path>: cannot be used: …`), every one at once, and nothing is dialled.
 */
import { alignedTable, cut, printable } from './table.js';
import type { LoadedConfig } from '../config/load.js';
import { probeRecordsPath } from '../audit/records.js';
import { Gateway, atPath } from '../gateway.js';
import { ConfigError, joinLines, problemLine, type ConfigProblem } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import { SqliteStore } from '../store/index.js';
import type { UpstreamState, UpstreamStatus } from '../upstream/types.js';
import { EXIT_OK, EXIT_USAGE, type CommandIo } from './io.js';
import { STATUS_MESSAGE_MAX_CHARS } from './shown-status-message.js';

export interface CheckOptions {
  /** Print one JSON document (`{ready, servers: [...]}`) instead of the table. */
  json?: boolean;
}

/** Exit code of a check that found a server that counts not ready. */
export const EXIT_NOT_READY = 1;

/** One server's row: `state` is the upstream's (`failed` for one waiting to restart). */
export interface CheckRow {
  server: string;
  state: Exclude<UpstreamState, 'backoff'>;
  /** Whether it counts for the exit code (see the module comment). */
  required: boolean;
  /** Tools it advertises (after `tools.<name>.disabled`), 0 unless ready. */
  tools: number;
  /** `spawn_failed`, `exited`, `connect_failed`, `http_status`, … when not ready. */
  errorCode?: string;
  /** Why it is not ready, one line, scrubbed of secrets (the stderr line that states a crash's error). */
  error?: string;
}


/**
 * Runs the check (see the module comment); writes the table or JSON to `io.stdout`, a bad config
 * to `io.stderr`. Returns the exit code. Owns the gateway it builds and stops it before returning.
 */
export async function checkCommand(config: LoadedConfig, options: CheckOptions, io: CommandIo, deps: { logger: Logger }): Promise<number> {
  const problems = startProblems(config);
  if (problems.length > 0) return badConfig(problems, io);
  const store = SqliteStore.open(':memory:');
  let gateway: Gateway;
  try {
    gateway = new Gateway(config, { logger: deps.logger, store, records: { append: async () => undefined, close: async () => undefined } });
  } catch (err) {
    // What the constructor reads besides the config (MCP_BROKER_CALL_BUDGET) is refused as serve refuses it.
    await store.close();
    if (!(err instanceof ConfigError)) throw err;
    return badConfig(err.problems, io);
  }
  // The verdict of each first dial, before an automatic restart of a failed one changes the state.
  const settled = new Map<string, UpstreamStatus>();
  for (const u of gateway.registry.upstreams) {
    const onState = (status: UpstreamStatus) => {
      if (!SETTLED.has(status.state)) return;
      settled.set(u.name, status);
      u.off('state', onState);
    };
    u.on('state', onState);
  }
  let rows: CheckRow[];
  try {
    await gateway.start();
    rows = checkRows(gateway, settled);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return badConfig(err.problems, io);
  } finally {
    await gateway.stop();
  }
  const counted = rows.filter((r) => r.required);
  const ready = counted.every((r) => r.state === 'ready');
  if (options.json) io.stdout.write(`${JSON.stringify({ ready, servers: rows })}\n`);
  else io.stdout.write(formatCheckTable(rows, ready));
  return ready ? EXIT_OK : EXIT_NOT_READY;
}

/**
 * Writes each problem on a line of its own, as `serve` does (`mcp-broker: bad config: <JSON path>: …`,
 * escaped with {@link printable}: a roster collision names upstreams' tools); returns {@link EXIT_USAGE}.
 */
function badConfig(problems: readonly ConfigProblem[], io: CommandIo): number {
  for (const problem of problems) io.stderr.write(`mcp-broker: bad config: ${printable(problemLine(problem))}\n`);
  return EXIT_USAGE;
}

/**
 * What `serve` would refuse at start besides the config itself, found without writing a record,
 * changing the store or leaving a file or folder behind: `broker.records.path`
 * ({@link probeRecordsPath}: a folder that cannot be made, a lock file that cannot be created
 * there; also a path no record could be appended to, which `serve` starts with and then refuses
 * every call `guard_error`) and `broker.dataDir` ({@link SqliteStore.probe}: a folder that cannot
 * be made or written, a store file that is not a database, of a newer schema, or not writable).
 * A lock held by a running broker is no problem: check runs beside the broker it checks. Each
 * problem names its JSON path, with the message `serve` gives; every one, in `serve`'s order
 * (`serve` stops at the first); empty when there is none.
 */
export function startProblems(config: LoadedConfig): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const probes: [path: string, probe: () => void][] = [
    ['broker.records.path', () => probeRecordsPath(config.broker.records.path)],
    ['broker.dataDir', () => SqliteStore.probe(config.broker.dataDir)],
  ];
  for (const [path, probe] of probes) {
    try {
      atPath(path, probe);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems.push(...err.problems);
    }
  }
  return problems;
}

/** States that end a first dial. */
const SETTLED: ReadonlySet<UpstreamState> = new Set(['ready', 'failed', 'disabled', 'closed']);

/**
 * The rows of a started gateway's upstreams, in config order: each with the status its first
 * dial settled on (`settled`, by server), else its current one.
 */
export function checkRows(gateway: Gateway, settled: ReadonlyMap<string, UpstreamStatus> = new Map()): CheckRow[] {
  const servers = gateway.config.mcpServers;
  const marked = Object.values(servers).some((s) => s.required && !s.disabled);
  const tools = new Map<string, number>();
  for (const t of gateway.registry.roster.tools.values()) tools.set(t.server, (tools.get(t.server) ?? 0) + 1);
  return gateway.registry.upstreams.map((u) => {
    const server = servers[u.name];
    const { state, errorCode, message } = settled.get(u.name) ?? u.status;
    const row: CheckRow = {
      server: u.name,
      state: state === 'backoff' ? 'failed' : state,
      required: !server?.disabled && (marked ? server?.required === true : true),
      tools: state === 'ready' && u.status.state === 'ready' ? (tools.get(u.name) ?? 0) : 0,
    };
    if (state !== 'ready' && state !== 'disabled') {
      if (errorCode) row.errorCode = errorCode;
      if (message) row.error = joinLines(gateway.scrubber.text(message));
    }
    return row;
  });
}

/**
 * The rows as an aligned table (SERVER, STATE, TOOLS, ERROR; `*` marks a server that counts), then a
 * summary line; an error is cut at {@link STATUS_MESSAGE_MAX_CHARS} (`--json` has it whole).
 */
export function formatCheckTable(rows: readonly CheckRow[], ready: boolean): string {
  const header = ['SERVER', 'STATE', 'TOOLS', 'ERROR'];
  const body = rows.map((r) => [`${r.server}${r.required ? '' : ' (optional)'}`, r.state, String(r.tools), cut(r.error ?? '', STATUS_MESSAGE_MAX_CHARS)]);
  const up = rows.filter((r) => r.state === 'ready').length;
  const down = rows.filter((r) => r.required && r.state !== 'ready').map((r) => r.server);
  const summary = ready ? `${up} of ${rows.length} servers ready` : `${up} of ${rows.length} servers ready; not ready: ${down.join(', ')}`;
  return alignedTable(header, body) + summary + '\n';
}

