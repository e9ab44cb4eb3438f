import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { EVERY_PRINCIPAL, SqliteStore } from '../../src/store/index.js';

const at = (n: number) => new Date(1_700_000_000_000 + n).toISOString();
const seen = (hash: string) => ({ hash, definition: { name: 'fx__echo', description: `definition ${hash}` } });
const open: SqliteStore[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** The next event-loop turn: where a commit by another connection (another process, in life) becomes visible. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** Two connections to one store file: the broker's and, say, `mcp-broker approve`'s. */
function twoConnections(): [SqliteStore, SqliteStore] {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-store-cache-'));
  dirs.push(dir);
  const a = SqliteStore.open(dir);
  const b = SqliteStore.open(dir);
  open.push(a, b);
  return [a, b];
}

describe('SqliteStore read cache', () => {
  it('sees an approval another connection stored after this one had read and cached the tool', async () => {
    const [broker, cli] = twoConnections();
    expect(await broker.getApproval('fx__echo', 'local')).toBeUndefined();
    expect(await broker.getApproval('fx__echo', 'local')).toBeUndefined();
    await cli.setApproval({ tool: 'fx__echo', principal: EVERY_PRINCIPAL, decision: 'approved', at: at(1), by: 'cli' });
    await nextTurn();
    expect((await broker.getApproval('fx__echo', 'local'))?.decision).toBe('approved');
    await cli.setApproval({ tool: 'fx__echo', principal: 'local', decision: 'revoked', at: at(2), by: 'cli' });
    await nextTurn();
    expect((await broker.getApproval('fx__echo', 'local'))?.decision).toBe('revoked');
  });

  it('sees a pin another connection moved, and its own writes at once', async () => {
    const [broker, cli] = twoConnections();
    expect(await broker.observePin('fx__echo', 'local', seen('h1'), at(0))).toBe('new');
    expect(await broker.observePin('fx__echo', 'local', seen('h1'), at(1))).toBe('same');
    await cli.repin('fx__echo', EVERY_PRINCIPAL, at(2), seen('h2'));
    await nextTurn();
    expect(await broker.observePin('fx__echo', 'local', seen('h1'), at(3))).toBe('changed');
    expect(await broker.observePin('fx__echo', 'local', seen('h2'), at(4))).toBe('same');
    // Its own approval is seen on the next read, with no other connection involved.
    await broker.setApproval({ tool: 'fx__echo', principal: 'local', decision: 'approved', at: at(5), by: 'cli' });
    expect((await broker.getApproval('fx__echo', 'local'))?.decision).toBe('approved');
  });

  it('sees first uses cleared by another connection', async () => {
    const [broker, cli] = twoConnections();
    await broker.markUsed('fx__echo', 'local', at(0));
    expect(await broker.hasUsed('fx__echo', 'local')).toBe(true);
    expect(await cli.clearUses('fx__echo', EVERY_PRINCIPAL)).toBe(1);
    await nextTurn();
    expect(await broker.hasUsed('fx__echo', 'local')).toBe(false);
  });

  it('keeps each (tool, principal) pair apart in the cache, whatever characters the two hold', async () => {
    const [broker] = twoConnections();
    // Joined with U+0000 these two pairs would be one key ("a\0b\0c"), as the cache's keys once were.
    await broker.setApproval({ tool: 'a', principal: 'b\u0000c', decision: 'approved', at: at(0), by: 'cli' });
    await broker.markUsed('a', 'b\u0000c', at(0));
    expect((await broker.getApproval('a', 'b\u0000c'))?.decision).toBe('approved');
    expect(await broker.hasUsed('a', 'b\u0000c')).toBe(true);
    expect(await broker.getApproval('a\u0000b', 'c')).toBeUndefined();
    expect(await broker.hasUsed('a\u0000b', 'c')).toBe(false);
    expect(await broker.observePin('a', 'b\u0000c', seen('h1'), at(1))).toBe('new');
    await broker.repin('a', 'b\u0000c', at(2), seen('h2'));
    expect(await broker.observePin('a', 'b\u0000c', seen('h2'), at(3))).toBe('same');
    // Another principal of the same tool: its own pin (the default one, at h1), its own approval and use.
    expect(await broker.observePin('a', 'b', seen('h1'), at(4))).toBe('same');
    expect(await broker.getApproval('a', 'b')).toBeUndefined();
    expect(await broker.hasUsed('a', 'b')).toBe(false);
  });
});
