/**
 * Shared end-to-end helpers: spawn the built CLI (`node dist/cli.cjs --config <tmp servers.json>`)
 * with a temp config and records file, and connect to it either with an SDK `Client`
 * ({@link startBroker}) or with raw pipes ({@link spawnRawBroker}).
 *
 * Build first (`npm run build`: tsc, then the CLI bundles); every helper here uses `dist/`, never `src/`.
 * Temp folders live in `os.tmpdir()` and are removed by `close()`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Client } from '@modelcontextprotocol/client';
import type { ClientCapabilities } from '@modelcontextprotocol/client';

/** The repository root. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** The built CLI. */
export const CLI = join(ROOT, 'dist/cli.cjs');

/** Absolute path of `test/fixtures/<name>`. */
export function fixture(name: string): string {
  return join(ROOT, 'test/fixtures', name);
}

/** Absolute path of an installed package file, e.g. `npmServer('server-memory')`. */
export function npmServer(pkg: 'server-everything' | 'server-filesystem' | 'server-memory'): string {
  return join(ROOT, 'node_modules/@modelcontextprotocol', pkg, 'dist/index.js');
}

/** A stdio server entry running `node <fixture>`. */
export function nodeServer(file: string, more: Record<string, unknown> = {}): Record<string, unknown> {
  return { command: 'node', args: [file], ...more };
}

/** One line of the records file (see `CallRecord` in src/broker/types.ts). */
export interface RecordLine {
  ts: string;
  callId: string;
  sessionId: string;
  principal: string;
  unit: string;
  subject: string;
  name: string;
  outcome: string;
  status: number;
  durationMs: number;
  attempts: number;
  bytesOut: number;
  reason?: string;
  args: unknown;
  [k: string]: unknown;
}

export interface BrokerOptions {
  /** The `mcpServers` object. */
  servers: Record<string, unknown>;
  /** Other top-level config sections, e.g. `{broker: {timeoutMs: 5000}}`; `broker.records.path` is set for you. */
  extra?: Record<string, unknown>;
  /** Extra environment of the CLI process (on top of `process.env`). */
  env?: Record<string, string>;
  /** Extra CLI arguments after `--config <file>`. */
  args?: string[];
  /** Capabilities the test client declares. */
  capabilities?: ClientCapabilities;
  /** Connect timeout, in ms; default 20000. */
  connectTimeoutMs?: number;
}

/** A notification the client received (everything without its own handler). */
export interface SeenNotification {
  method: string;
  params?: Record<string, unknown>;
}

export interface StartedBroker {
  client: Client;
  transport: StdioClientTransport;
  /** pid of the CLI process. */
  pid: number | null;
  /** Temp folder holding `servers.json` and `calls.ndjson`. */
  dir: string;
  /** Path of the records file. */
  recordsPath: string;
  /** Notifications received by the client, in order (progress ones only through `onprogress`). */
  notifications: SeenNotification[];
  /** Parsed records file (empty when it does not exist yet). */
  records(): Promise<RecordLine[]>;
  /** Everything the CLI wrote to stderr so far. */
  stderr(): string;
  /** Closes the client (stdin EOF, then signals) and removes the temp folder. Idempotent. */
  close(): Promise<void>;
}

/** Writes a temp config for `servers` + `extra`; returns the folder and paths. */
export function writeConfig(servers: Record<string, unknown>, extra: Record<string, unknown> = {}): {
  dir: string;
  configPath: string;
  recordsPath: string;
} {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-e2e-'));
  const recordsPath = join(dir, 'calls.ndjson');
  const broker = { ...((extra.broker as Record<string, unknown> | undefined) ?? {}) };
  broker.records = { path: recordsPath, ...((broker.records as Record<string, unknown> | undefined) ?? {}) };
  broker.dataDir ??= join(dir, 'data');
  const config = { ...extra, mcpServers: servers, broker };
  const configPath = join(dir, 'servers.json');
  writeFileSync(configPath, JSON.stringify(config, null, 2));
  return { dir, configPath, recordsPath };
}

/**
 * Parses an ndjson file's complete lines; missing file → []. A last line without its newline is
 * one being written while a test polls the file (a reader can see part of a write): left for the
 * next look.
 */
export function readNdjson<T = RecordLine>(path: string): T[] {
  if (!existsSync(path)) return [];
  const lines = readFileSync(path, 'utf8').split('\n');
  lines.pop();
  return lines.filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as T);
}

/** Spawns the CLI with a temp config and connects an SDK client over its stdio. */
export async function startBroker(options: BrokerOptions): Promise<StartedBroker> {
  const { dir, configPath, recordsPath } = writeConfig(options.servers, options.extra);
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, '--config', configPath, ...(options.args ?? [])],
    env: { ...(process.env as Record<string, string>), ...(options.env ?? {}) },
    cwd: dir,
    stderr: 'pipe',
  });
  let err = '';
  transport.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  const client = new Client({ name: 'e2e', version: '1.0.0' }, { capabilities: options.capabilities ?? {} });
  const notifications: SeenNotification[] = [];
  client.fallbackNotificationHandler = async (n) => {
    notifications.push({ method: n.method, params: n.params as Record<string, unknown> | undefined });
  };
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await client.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await client.connect(transport, { timeout: options.connectTimeoutMs ?? 20_000 });
  } catch (e) {
    await close();
    throw new Error(`broker did not start: ${(e as Error).message}\n--- stderr ---\n${err}`);
  }
  return {
    client,
    transport,
    pid: transport.pid,
    dir,
    recordsPath,
    notifications,
    records: async () => readNdjson(recordsPath),
    stderr: () => err,
    close,
  };
}

/**
 * Polls `check` until it returns a truthy value or `timeoutMs` passes (then throws `what`). The
 * time is the monotonic clock's: this VM's wall clock has been seen to step forward by seconds,
 * which ended a wait of 20 s after 6.
 */
export async function waitFor<T>(check: () => T | Promise<T>, what: string, timeoutMs = 10_000, everyMs = 25): Promise<NonNullable<T>> {
  const until = performance.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (performance.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Whether a pid is alive (signal 0). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The CLI on raw pipes: for tests that need byte-level or id-level control of the wire. */
export interface RawBroker {
  child: ChildProcess;
  dir: string;
  recordsPath: string;
  /** Every parsed stdout message, in order. */
  messages: Array<Record<string, unknown>>;
  /** Raw stdout bytes so far. */
  stdout(): Buffer;
  stderr(): string;
  /** Writes one JSON-RPC message (one line). */
  send(message: object): void;
  /** Sends a request and waits for the response with that id (matched with `===`). */
  request(id: number | string, method: string, params?: object, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** initialize + notifications/initialized, with request id `"init"`. */
  initialize(capabilities?: ClientCapabilities): Promise<Record<string, unknown>>;
  /** Waits for a message matching `pred`. */
  waitForMessage(pred: (m: Record<string, unknown>) => boolean, what: string, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** Resolves with the exit code (or signal name) once the process has exited. */
  exited: Promise<number | string>;
  /** Ends stdin, waits for exit (SIGKILL after 10 s) and removes the temp folder. */
  close(): Promise<void>;
}

/**
 * Spawns the CLI with raw pipes. stdout lines that do not parse as JSON are kept in `stdout()`
 * and also pushed to `messages` as `{__unparsed: line}`, so a test can assert there are none.
 */
export function spawnRawBroker(
  options: Omit<BrokerOptions, 'capabilities' | 'connectTimeoutMs'> & {
    /** A config {@link writeConfig} wrote, run again as it is (`servers` and `extra` are then unused); the caller removes its folder. */
    written?: ReturnType<typeof writeConfig>;
  },
): RawBroker {
  const { dir, configPath, recordsPath } = options.written ?? writeConfig(options.servers, options.extra);
  const child = spawn(process.execPath, [CLI, '--config', configPath, ...(options.args ?? [])], {
    cwd: dir,
    env: { ...process.env, ...(options.env ?? {}) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const chunks: Buffer[] = [];
  let err = '';
  let pending = Buffer.alloc(0);
  const messages: Array<Record<string, unknown>> = [];
  child.stdout!.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    pending = Buffer.concat([pending, chunk]);
    let nl: number;
    while ((nl = pending.indexOf(0x0a)) >= 0) {
      const line = pending.subarray(0, nl).toString('utf8');
      pending = pending.subarray(nl + 1);
      try {
        messages.push(JSON.parse(line));
      } catch {
        messages.push({ __unparsed: line });
      }
    }
  });
  child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  child.stdin!.on('error', () => undefined);
  let exitCode: number | string | undefined;
  const exited = new Promise<number | string>((res) =>
    child.once('exit', (code, signal) => {
      exitCode = code ?? signal ?? -1;
      res(exitCode);
    }),
  );
  /** A waitFor check that gives up at once when the CLI has exited. */
  const unlessExited = <T>(find: () => T | undefined, what: string) => () => {
    const found = find();
    if (found === undefined && exitCode !== undefined) {
      throw new Error(`the CLI exited (${exitCode}) while waiting for ${what}\n--- stderr ---\n${err.slice(-4000)}`);
    }
    return found;
  };
  const waitForMessage = (pred: (m: Record<string, unknown>) => boolean, what: string, timeoutMs = 15_000) =>
    waitFor(unlessExited(() => messages.find(pred), what), `${what}\n--- stderr ---\n${err.slice(-4000)}`, timeoutMs, 10);
  const send = (message: object) => child.stdin!.write(JSON.stringify(message) + '\n');
  const request = (id: number | string, method: string, params?: object, timeoutMs?: number) => {
    const from = messages.length;
    send({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
    return waitFor(
      unlessExited(() => messages.slice(from).find((m) => m.id === id && ('result' in m || 'error' in m)), `response to ${method}`),
      `response to ${method} id ${JSON.stringify(id)}\n--- stderr ---\n${err.slice(-4000)}`,
      timeoutMs ?? 15_000,
      10,
    );
  };
  let closing: Promise<void> | undefined;
  return {
    child,
    dir,
    recordsPath,
    messages,
    stdout: () => Buffer.concat(chunks),
    stderr: () => err,
    send,
    request,
    async initialize(capabilities = {}) {
      const res = await request('init', 'initialize', {
        protocolVersion: '2025-06-18',
        capabilities,
        clientInfo: { name: 'raw-e2e', version: '1.0.0' },
      }, 20_000);
      send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      return res;
    },
    waitForMessage,
    exited,
    close() {
      closing ??= (async () => {
        child.stdin!.end();
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
        if (!options.written) rmSync(dir, { recursive: true, force: true });
      })();
      return closing;
    },
  };
}

/** The era each upstream reported in the broker's `upstream ready` log lines (JSON on piped stderr). */
export function readyEras(stderr: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of stderr.split('\n')) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as { msg?: string; upstream?: string; era?: string };
    if (entry.msg === 'upstream ready' && entry.upstream && entry.era) out[entry.upstream] = entry.era;
  }
  return out;
}
