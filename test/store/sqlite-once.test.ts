/** The store's secrets (the approval-state key) and one-time ids (approval states' nonces), across connections to one file. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/index.js';

const at = (n: number) => new Date(1_700_000_000_000 + n).toISOString();
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function twoConnections(): [SqliteStore, SqliteStore] {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-once-'));
  dirs.push(dir);
  return [SqliteStore.open(dir), SqliteStore.open(dir)];
}

describe('SqliteStore secrets and one-time ids', () => {
  it('a secret is made by its first writer; every connection, and a reopened store, gets the same bytes', async () => {
    const [a, b] = twoConnections();
    const first = await a.secret('k', new Uint8Array(32).fill(1), at(0));
    expect(Buffer.from(first)).toEqual(Buffer.alloc(32, 1));
    expect(Buffer.from(await b.secret('k', new Uint8Array(32).fill(2), at(1)))).toEqual(Buffer.alloc(32, 1));
    expect(Buffer.from(await b.secret('other', new Uint8Array(32).fill(3), at(2)))).toEqual(Buffer.alloc(32, 3));
    await a.close();
    await b.close();
  });

  it('a one-time id is spent once, also across connections; ids past their expiry are forgotten', async () => {
    const [a, b] = twoConnections();
    expect(await a.spendOnce('n1', at(1000), at(0))).toBe(true);
    expect(await b.spendOnce('n1', at(1000), at(1))).toBe(false);
    expect(await a.spendOnce('n1', at(1000), at(999))).toBe(false);
    // Spending anything after n1's expiry forgets n1 (its state is refused as expired by then anyway).
    expect(await b.spendOnce('n2', at(5000), at(1001))).toBe(true);
    expect(await a.spendOnce('n1', at(9000), at(1002))).toBe(true);
    await a.close();
    await b.close();
  });
});
