/**
 * Pins per principal in the SQLite store (issue 12 item 7): a default pin (first seen, or the
 * last approval for everyone), principals' own pins over it, and schema-1 stores carried over.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { EVERY_PRINCIPAL, SqliteStore, STORE_FILE } from '../../src/store/index.js';

const at = (n: number) => new Date(1_700_000_000_000 + n).toISOString();
const seen = (hash: string, legacyHash?: string) => ({
  hash,
  definition: { name: 'fx__echo', description: `definition ${hash}` },
  ...(legacyHash ? { legacyHash } : {}),
});
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('SqliteStore pins per principal', () => {
  it('repin for bob re-pinned a changed tool for everyone: now only bob is re-pinned', async () => {
    const store = SqliteStore.open(':memory:');
    expect(store.observePin('fx__echo', 'alice', seen('h1'), at(0))).toBe('new');
    expect(store.observePin('fx__echo', 'alice', seen('h2'), at(1))).toBe('changed');
    expect(await store.repin('fx__echo', 'bob', at(2))).toMatchObject({ principal: 'bob', hash: 'h2', definition: seen('h2').definition });
    expect(store.observePin('fx__echo', 'bob', seen('h2'), at(3))).toBe('same');
    expect(store.observePin('fx__echo', 'alice', seen('h2'), at(3))).toBe('changed');
    expect(store.observePin('fx__echo', 'carol', seen('h2'), at(3))).toBe('changed');
    expect(await store.getPin('fx__echo', 'alice')).toMatchObject({ principal: EVERY_PRINCIPAL, hash: 'h1', definition: seen('h1').definition });
    // Bob's pin already is the latest: nothing moves.
    expect(await store.repin('fx__echo', 'bob', at(4))).toBeUndefined();
    // The upstream going back to h1: bob's own pin now differs, everyone else's matches.
    expect(store.observePin('fx__echo', 'alice', seen('h1'), at(5))).toBe('same');
    expect(store.observePin('fx__echo', 'bob', seen('h1'), at(5))).toBe('changed');
  });

  it('repin for every principal moves the default pin and drops the principals\' own pins', async () => {
    const store = SqliteStore.open(':memory:');
    store.observePin('fx__echo', 'alice', seen('h1'), at(0));
    store.observePin('fx__echo', 'alice', seen('h2'), at(1));
    await store.repin('fx__echo', 'bob', at(2));
    store.observePin('fx__echo', 'alice', seen('h3'), at(3));
    expect(await store.repin('fx__echo', EVERY_PRINCIPAL, at(4))).toMatchObject({ principal: EVERY_PRINCIPAL, hash: 'h3' });
    expect((await store.listPins()).map((p) => [p.principal, p.hash])).toEqual([[EVERY_PRINCIPAL, 'h3']]);
    for (const who of ['alice', 'bob']) expect(store.observePin('fx__echo', who, seen('h3'), at(5))).toBe('same');
  });

  it('a schema-1 store: each pin becomes the default pin, without a definition, upgraded when its old digest still matches', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-store-v1-'));
    dirs.push(dir);
    const v1 = new Database(join(dir, STORE_FILE));
    v1.exec(`CREATE TABLE pins (tool TEXT PRIMARY KEY, hash TEXT NOT NULL, pinned_at TEXT NOT NULL, pending_hash TEXT, pending_since TEXT);
             INSERT INTO pins VALUES ('fx__echo', 'old1', '${at(0)}', 'old2', '${at(1)}'), ('fx__other', 'old9', '${at(0)}', NULL, NULL);
             PRAGMA user_version = 1;`);
    v1.close();
    const store = SqliteStore.open(dir);
    try {
      expect(await store.listPins()).toEqual([
        { tool: 'fx__echo', principal: EVERY_PRINCIPAL, hash: 'old1', pinnedAt: at(0) },
        { tool: 'fx__other', principal: EVERY_PRINCIPAL, hash: 'old9', pinnedAt: at(0) },
      ]);
      // A definition whose old digest differs stays changed, for everyone.
      expect(store.observePin('fx__other', 'alice', seen('h9', 'old8'), at(2))).toBe('changed');
      expect(await store.getPin('fx__other', 'bob')).toMatchObject({ hash: 'old9' });
      // One whose old digest matches is pinned in full now.
      expect(store.observePin('fx__echo', 'alice', seen('h1', 'old1'), at(2))).toBe('same');
      expect(await store.getPin('fx__echo', 'bob')).toEqual({ tool: 'fx__echo', principal: EVERY_PRINCIPAL, hash: 'h1', definition: seen('h1').definition, pinnedAt: at(0) });
      expect(store.observePin('fx__echo', 'bob', seen('h1'), at(3))).toBe('same');
    } finally {
      await store.close();
    }
    const raw = new Database(join(dir, STORE_FILE));
    expect(raw.pragma('user_version', { simple: true })).toBe(2);
    raw.close();
  });
});
