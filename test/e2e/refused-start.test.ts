/**
 * A start that is refused or cut short leaves the operator's files as they were (DESIGN.md
 * "Contract": bad input loses nothing), through the real CLI: no records lock naming a dead pid
 * (the next broker would be refused "in use by another mcp-broker" once that pid is reused), no
 * store switched to WAL mode or left with `-wal`/`-shm` files beside it. Build first (`npm run build`).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/index.js';
import { CLI, fixture, nodeServer } from './helpers.js';

const shared = mkdtempSync(join(tmpdir(), 'mcp-broker-e2e-refused-'));
afterAll(() => rmSync(shared, { recursive: true, force: true }));

/** Every file and folder under `dir` (but `servers.json`), with each file's sha256: what a start may not change. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (at: string) => {
    for (const name of readdirSync(at)) {
      const path = join(at, name);
      const key = relative(dir, path);
      if (statSync(path).isDirectory()) {
        out[key] = 'folder';
        walk(path);
      } else if (key !== 'servers.json') out[key] = createHash('sha256').update(readFileSync(path)).digest('hex');
    }
  };
  walk(dir);
  return out;
}

/**
 * A folder with `servers.json` for `servers` and `more`: records in `rec/calls.ndjson`, the store
 * in `data/`; both folders exist, and with `store` a store used before is in `data/broker.sqlite`
 * (in WAL mode, closed cleanly: nothing beside it).
 */
function brokerDir(servers: Record<string, unknown>, more: Record<string, unknown> = {}, options: { store?: boolean } = {}): string {
  const dir = mkdtempSync(join(shared, 'start-'));
  mkdirSync(join(dir, 'rec'));
  mkdirSync(join(dir, 'data'));
  if (options.store) void SqliteStore.open(join(dir, 'data')).close();
  const config = { mcpServers: servers, ...more, broker: { dataDir: join(dir, 'data'), records: { path: join(dir, 'rec', 'calls.ndjson') } } };
  writeFileSync(join(dir, 'servers.json'), JSON.stringify(config));
  return dir;
}

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/**
 * Runs `serve` in `dir` until it exits. `onStderr` is called with all of stderr so far on each
 * chunk (to send a signal once the start has reached a point).
 */
function serve(
  dir: string,
  options: { args?: string[]; env?: Record<string, string>; input?: object[]; onStderr?: (text: string, pid: number) => void } = {},
): Promise<Run> {
  const child = spawn(process.execPath, [CLI, '--config', join(dir, 'servers.json'), ...(options.args ?? [])], {
    cwd: dir,
    env: { ...process.env, ...options.env },
    stdio: [options.input ? 'pipe' : 'ignore', 'ignore', 'pipe'],
  });
  // Without input stdin is /dev/null, closed from the start: a start that fails within
  // broker.drainTimeoutMs of the close is still reported (exit 2), as with stdin open. With input,
  // a stdio client's messages, its stdin then left open.
  if (options.input) {
    child.stdin!.on('error', () => undefined);
    for (const message of options.input) child.stdin!.write(JSON.stringify(message) + '\n');
  }
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => {
    stderr += c.toString();
    options.onStderr?.(stderr, child.pid!);
  });
  return new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal, stderr })));
}

/** The last line of stderr that is not a JSON log line. */
const lastLine = (run: Run) => run.stderr.trim().split('\n').filter((l) => !l.startsWith('{')).at(-1);

const echo = { echo: nodeServer(fixture('echo.mjs')) };

describe('a refused start leaves no records lock behind', () => {
  it('a store that is not a database: exit 2 naming broker.dataDir, and every file as it was (no calls.ndjson.lock)', async () => {
    const dir = brokerDir(echo);
    writeFileSync(join(dir, 'data', 'broker.sqlite'), 'not a database '.repeat(20));
    const before = tree(dir);
    const run = await serve(dir);
    expect(run.code).toBe(2);
    expect(lastLine(run)).toContain('mcp-broker: bad config: broker.dataDir: cannot be used:');
    expect(tree(dir)).toEqual(before);
  });

  it('a function module that fails to load: exit 2 naming functions[0], no lock and no -wal/-shm beside the store', async () => {
    const dir = brokerDir({}, { functions: [fixture('functions/throws-on-load.mjs')] }, { store: true });
    const run = await serve(dir);
    expect(run.code).toBe(2);
    expect(lastLine(run)).toContain('mcp-broker: bad config: functions[0]: cannot load function module');
    expect(Object.keys(tree(dir)).sort()).toEqual(['data', 'data/broker.sqlite', 'rec']);
  });

  it('an OpenAPI document that does not load: exit 2 naming its openapi, no lock and no -wal/-shm beside the store', async () => {
    const dir = brokerDir({ pets: { type: 'rest', openapi: './missing.json', operations: ['getPet'] } }, {}, { store: true });
    const run = await serve(dir);
    expect(run.code).toBe(2);
    expect(lastLine(run)).toContain('mcp-broker: bad config: mcpServers.pets.openapi: cannot load');
    expect(Object.keys(tree(dir)).sort()).toEqual(['data', 'data/broker.sqlite', 'rec']);
  });

  it('two tools with one advertised name (HTTP): exit 2 naming the upstream, no lock and no -wal/-shm beside the store', async () => {
    const dir = brokerDir({
      names: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: '["x.y"]' }, prefix: false }),
      other: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: '["x_y"]' }, prefix: false }),
    }, {}, { store: true });
    const run = await serve(dir, { args: ['--transport', 'http', '--port', '0'] });
    expect(run.code).toBe(2);
    expect(lastLine(run)).toContain('would both be advertised as');
    expect(Object.keys(tree(dir)).sort()).toEqual(['data', 'data/broker.sqlite', 'rec']);
  });

  it('two tools with one advertised name (stdio, refused once the client initializes): exit 2, no lock and no -wal/-shm beside the store', async () => {
    const dir = brokerDir({
      names: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: '["x.y"]' }, prefix: false }),
      other: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: '["x_y"]' }, prefix: false }),
    }, {}, { store: true });
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } };
    const run = await serve(dir, { input: [initialize] });
    expect(run.code).toBe(2);
    expect(lastLine(run)).toContain('would both be advertised as');
    expect(Object.keys(tree(dir)).sort()).toEqual(['data', 'data/broker.sqlite', 'rec']);
  });

  it('a bad MCP_BROKER_CALL_BUDGET (refused once the store is open): exit 2 naming it, no lock and no -wal/-shm beside the store', async () => {
    const dir = brokerDir(echo, {}, { store: true });
    const run = await serve(dir, { env: { MCP_BROKER_CALL_BUDGET: 'lots' } });
    expect(run.code).toBe(2);
    expect(lastLine(run)).toContain('mcp-broker: bad config: MCP_BROKER_CALL_BUDGET: must be a non-negative integer');
    expect(Object.keys(tree(dir)).sort()).toEqual(['data', 'data/broker.sqlite', 'rec']);
  });

  it('an uncaught exception while the broker starts: exit 1, no lock and no -wal/-shm beside the store', async () => {
    const dir = brokerDir({}, { functions: [fixture('functions/hangs-on-load.mjs')] }, { store: true });
    const run = await serve(dir, { env: { FIXTURE_THROW_LATER: '1' } });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('thrown while the broker starts');
    expect(Object.keys(tree(dir)).sort()).toEqual(['data', 'data/broker.sqlite', 'rec']);
  });

  for (const [what, servers] of [
    ['without stdio upstreams', {}],
    ['with a stdio upstream starting', echo],
  ] as const) {
    it(`SIGTERM while the broker starts (${what}): exit 0, no lock and no -wal/-shm beside the store`, async () => {
      const dir = brokerDir(servers, { functions: [fixture('functions/hangs-on-load.mjs')] }, { store: true });
      let sent = false;
      const run = await serve(dir, {
        onStderr: (text, pid) => {
          if (!sent && text.includes('hangs-on-load: loading')) {
            sent = true;
            process.kill(pid, 'SIGTERM');
          }
        },
      });
      expect(sent).toBe(true);
      expect({ code: run.code, signal: run.signal }).toEqual({ code: 0, signal: null });
      expect(Object.keys(tree(dir)).sort()).toEqual(['data', 'data/broker.sqlite', 'rec']);
    });
  }
});

describe('a store refused at start is left byte for byte as it was', () => {
  for (const journal of ['delete', 'wal'] as const) {
    it(`a store of a newer schema (journal mode ${journal}): exit 2 naming broker.dataDir and the versions; no new files, the store unchanged`, async () => {
      const dir = brokerDir(echo);
      const db = new Database(join(dir, 'data', 'broker.sqlite'));
      db.pragma(`journal_mode = ${journal}`);
      db.exec('CREATE TABLE later (x)');
      db.pragma('user_version = 9');
      db.close();
      const before = tree(dir);
      const run = await serve(dir);
      expect(run.code).toBe(2);
      expect(lastLine(run)).toContain('broker.dataDir: cannot be used:');
      expect(lastLine(run)).toContain('store schema version 9 is newer than this build understands (2)');
      expect(tree(dir)).toEqual(before);
    });
  }
});
