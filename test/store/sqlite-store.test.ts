import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { EVERY_PRINCIPAL, SqliteStore, STORE_FILE } from '../../src/store/index.js';

const at = (n: number) => new Date(1_700_000_000_000 + n).toISOString();
/** A definition observed under the digest `hash` (its description names the hash). */
const seen = (hash: string) => ({ hash, definition: { name: 'fx__echo', description: `definition ${hash}`, inputSchema: { type: 'object' } } });
const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'mcp-broker-store-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('SqliteStore', () => {
  it('pins a tool on first sight for everyone, keeps the pin and its definition, and remembers the latest definition seen', async () => {
    const store = SqliteStore.open(':memory:');
    expect(await store.observePin('fx__echo', 'local', seen('h1'), at(0))).toBe('new');
    expect(await store.observePin('fx__echo', 'alice', seen('h1'), at(1))).toBe('same');
    expect(await store.observePin('fx__echo', 'local', seen('h2'), at(2))).toBe('changed');
    expect(await store.observePin('fx__echo', 'alice', seen('h2'), at(3))).toBe('changed');
    expect(await store.getPin('fx__echo', 'alice')).toEqual({ tool: 'fx__echo', principal: EVERY_PRINCIPAL, hash: 'h1', definition: seen('h1').definition, pinnedAt: at(0) });
    expect(await store.getSeen('fx__echo')).toEqual({ tool: 'fx__echo', hash: 'h2', definition: seen('h2').definition, seenAt: at(2) });
    // The definition going back to the pinned one is the latest seen again.
    expect(await store.observePin('fx__echo', 'local', seen('h1'), at(4))).toBe('same');
    expect((await store.getSeen('fx__echo'))?.hash).toBe('h1');
  });

  it('repin moves the pin to the latest definition seen; nothing new seen, nothing moved', async () => {
    const store = SqliteStore.open(':memory:');
    await store.observePin('fx__echo', 'local', seen('h1'), at(0));
    expect(await store.repin('fx__echo', EVERY_PRINCIPAL, at(1))).toBeUndefined();
    await store.observePin('fx__echo', 'local', seen('h2'), at(2));
    expect(await store.repin('fx__echo', EVERY_PRINCIPAL, at(3))).toEqual({ tool: 'fx__echo', principal: EVERY_PRINCIPAL, hash: 'h2', definition: seen('h2').definition, pinnedAt: at(3) });
    expect(await store.observePin('fx__echo', 'local', seen('h2'), at(4))).toBe('same');
    expect(await store.repin('other', EVERY_PRINCIPAL, at(5))).toBeUndefined();
    expect(await store.repin('other', EVERY_PRINCIPAL, at(5), seen('h9'))).toMatchObject({ hash: 'h9' });
  });

  it("a principal's own decision wins over the one for everyone; one for everyone replaces all", async () => {
    const store = SqliteStore.open(':memory:');
    await store.setApproval({ tool: 't', principal: EVERY_PRINCIPAL, decision: 'revoked', at: at(0), by: 'cli' });
    await store.setApproval({ tool: 't', principal: 'alice', decision: 'approved', at: at(1), by: 'cli' });
    expect((await store.getApproval('t', 'alice'))?.decision).toBe('approved');
    expect((await store.getApproval('t', 'bob'))?.decision).toBe('revoked');
    expect(await store.getApproval('u', 'bob')).toBeUndefined();
    await store.setApproval({ tool: 't', principal: EVERY_PRINCIPAL, decision: 'approved', at: at(2), by: 'cli' });
    expect(await store.listApprovals()).toEqual([{ tool: 't', principal: EVERY_PRINCIPAL, decision: 'approved', at: at(2), by: 'cli' }]);
  });

  it('first uses per principal, cleared per principal or for everyone', async () => {
    const store = SqliteStore.open(':memory:');
    await store.markUsed('t', 'alice', at(0));
    await store.markUsed('t', 'alice', at(1));
    await store.markUsed('t', 'bob', at(1));
    expect(await store.hasUsed('t', 'alice')).toBe(true);
    expect(await store.hasUsed('t', 'carol')).toBe(false);
    expect(await store.clearUses('t', 'alice')).toBe(1);
    expect(await store.hasUsed('t', 'alice')).toBe(false);
    expect(await store.clearUses('t', EVERY_PRINCIPAL)).toBe(1);
  });

  it('persists in broker.sqlite in WAL mode, and a second connection sees writes at once', async () => {
    const dir = tempDir();
    const a = SqliteStore.open(dir);
    const b = SqliteStore.open(dir);
    await a.observePin('t', 'local', seen('h1'), at(0));
    await b.setApproval({ tool: 't', principal: 'local', decision: 'approved', at: at(1), by: 'cli' });
    expect((await a.getApproval('t', 'local'))?.decision).toBe('approved');
    await a.close();
    await b.close();
    const raw = new Database(join(dir, STORE_FILE));
    expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
    raw.close();
    const c = SqliteStore.open(dir);
    expect(await c.getPin('t', 'local')).toMatchObject({ hash: 'h1', definition: seen('h1').definition });
    await c.close();
  });

  it('an unopenable folder is a store_unavailable error', () => {
    const dir = tempDir();
    const file = join(dir, 'a-file');
    writeFileSync(file, 'x');
    expect(() => SqliteStore.open(join(file, 'data'))).toThrow(expect.objectContaining({ code: 'store_unavailable' }));
  });

  /** The files of `dir` with their contents: what opening a store there and refusing it may not change. */
  const contents = (dir: string) => Object.fromEntries(readdirSync(dir).map((name) => [name, readFileSync(join(dir, name)).toString('base64')]));

  for (const journal of ['delete', 'wal'] as const) {
    it(`a store of a newer schema (journal mode ${journal}) is refused store_unavailable and left byte for byte as it was, nothing beside it`, () => {
      const dir = tempDir();
      const raw = new Database(join(dir, STORE_FILE));
      raw.pragma(`journal_mode = ${journal}`);
      raw.exec('CREATE TABLE later (x)');
      raw.pragma('user_version = 9');
      raw.close();
      const before = contents(dir);
      expect(() => SqliteStore.open(dir)).toThrow(
        expect.objectContaining({ code: 'store_unavailable', message: expect.stringContaining('store schema version 9 is newer than this build understands (2)') }),
      );
      expect(contents(dir)).toEqual(before);
    });
  }

  it('a file that is not a database is refused store_unavailable and left as it was, nothing beside it', () => {
    const dir = tempDir();
    writeFileSync(join(dir, STORE_FILE), 'not a database '.repeat(20));
    const before = contents(dir);
    expect(() => SqliteStore.open(dir)).toThrow(expect.objectContaining({ code: 'store_unavailable', message: expect.stringContaining('file is not a database') }));
    expect(contents(dir)).toEqual(before);
  });

  it('openIfPresent: no store file is undefined with nothing created; a store present is opened as open does, a newer one refused as it was', async () => {
    const dir = tempDir();
    expect(SqliteStore.openIfPresent(join(dir, 'data'))).toBeUndefined();
    expect(readdirSync(dir)).toEqual([]);
    const written = SqliteStore.open(join(dir, 'data'));
    await written.setApproval({ tool: 'fx__echo', principal: EVERY_PRINCIPAL, decision: 'approved', at: at(0), by: 'cli' });
    await written.close();
    const present = SqliteStore.openIfPresent(join(dir, 'data'))!;
    expect((await present.getApproval('fx__echo', 'local'))?.decision).toBe('approved');
    await present.close();
    const raw = new Database(join(dir, 'data', STORE_FILE));
    raw.pragma('user_version = 9');
    raw.close();
    const before = contents(join(dir, 'data'));
    expect(() => SqliteStore.openIfPresent(join(dir, 'data'))).toThrow(
      expect.objectContaining({ code: 'store_unavailable', message: expect.stringContaining('store schema version 9 is newer than this build understands (2)') }),
    );
    expect(contents(join(dir, 'data'))).toEqual(before);
    // A file where the folder should be: refused as open refuses it, not taken for "no store".
    writeFileSync(join(dir, 'file'), 'x');
    expect(() => SqliteStore.openIfPresent(join(dir, 'file'))).toThrow(expect.objectContaining({ code: 'store_unavailable' }));
  });
});
