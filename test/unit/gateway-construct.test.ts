/**
 * A Gateway whose constructor throws after opening its records sink and store closes them again.
 * It left both open: an in-process caller (a library user, a test) kept an open SQLite handle
 * (another connection could not take the store alone; `-wal`/`-shm` stayed beside it) and the
 * records lock `calls.ndjson.lock`, so a second Gateway on the same records path was refused
 * until the process exited. Real config, real store and records; the later step that fails is a
 * bad `MCP_BROKER_CALL_BUDGET`, read once both are open.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway.js';
import { ConfigError } from '../../src/shared/errors.js';
import { silentLogger } from '../../src/shared/logger.js';
import { SqliteStore, STORE_FILE } from '../../src/store/index.js';

describe('Gateway construction that throws', () => {
  let dir: string;
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('closes the records lock and the store it opened before rethrowing', async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-construct-'));
    const config = parseConfig({ broker: { dataDir: 'data', records: { path: 'rec/calls.ndjson' } } }, { baseDir: dir });
    let thrown: unknown;
    try {
      new Gateway(config, { logger: silentLogger(), env: { MCP_BROKER_CALL_BUDGET: 'lots' } });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).message).toContain('MCP_BROKER_CALL_BUDGET');
    // Both were opened (the folders and the store exist) and are closed again.
    expect(existsSync(join(dir, 'rec', 'calls.ndjson.lock'))).toBe(false);
    expect(readdirSync(join(dir, 'data'))).toEqual([STORE_FILE]);

    // Another connection takes the store alone: leaving WAL mode needs every other connection closed.
    const other = new Database(join(dir, 'data', STORE_FILE), { timeout: 0 });
    try {
      expect(other.pragma('journal_mode = DELETE', { simple: true })).toBe('delete');
      other.prepare("INSERT INTO approvals (tool, principal, decision, at, by) VALUES ('fx__echo', '*', 'approved', 'now', 'test')").run();
    } finally {
      other.close();
    }

    // The records path is free for the next gateway, which reads what the other connection wrote.
    const gateway = new Gateway(config, { logger: silentLogger(), env: {} });
    try {
      expect((await gateway.store.getApproval('fx__echo', 'local'))?.decision).toBe('approved');
    } finally {
      await gateway.stop();
    }
  });

  it('leaves a store and records sink the caller gave open: they stay the caller\'s', async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-construct-'));
    const config = parseConfig({ broker: { dataDir: 'data', records: { path: 'rec/calls.ndjson' } } }, { baseDir: dir });
    const store = SqliteStore.open(join(dir, 'data'));
    let closed = 0;
    const records = { append: async () => undefined, close: async () => void closed++ };
    expect(() => new Gateway(config, { logger: silentLogger(), store, records, env: { MCP_BROKER_CALL_BUDGET: 'lots' } })).toThrow(ConfigError);
    expect(closed).toBe(0);
    await store.setApproval({ tool: 'fx__echo', principal: '*', decision: 'approved', at: 'now', by: 'test' });
    expect((await store.getApproval('fx__echo', 'local'))?.decision).toBe('approved');
    await store.close();
  });
});
