/**
 * Estate proposals in the SQLite store: listed per principal (issue 12 item 3), and a store
 * written before the per-principal index existed opens with its rows intact and readable.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore, STORE_FILE, type Proposal } from '../../src/store/index.js';

const at = (n: number) => new Date(1_700_000_000_000 + n).toISOString();
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function proposal(id: string, principal: string, n: number): Proposal {
  return { id, path: 'a.txt', kind: 'content', body: 'x', rationale: 'r', baseSha256: null, status: 'pending', principal, sessionId: 's', createdAt: at(n) };
}

describe('SqliteStore proposals', () => {
  it("listing proposals returned every principal's: now it can be limited to one principal's, with status and limit", async () => {
    const store = SqliteStore.open(':memory:');
    await store.addProposal(proposal('p1', 'alice', 1));
    await store.addProposal(proposal('p2', 'bob', 2));
    await store.addProposal(proposal('p3', 'alice', 3));
    await store.markProposalApplied('p1', at(4), 'alice');
    expect((await store.listProposals({ principal: 'alice', limit: 10 })).map((p) => p.id)).toEqual(['p3', 'p1']);
    expect((await store.listProposals({ principal: 'alice', status: 'pending', limit: 10 })).map((p) => p.id)).toEqual(['p3']);
    expect((await store.listProposals({ principal: 'alice', limit: 1 })).map((p) => p.id)).toEqual(['p3']);
    expect((await store.listProposals({ principal: 'carol', limit: 10 })).map((p) => p.id)).toEqual([]);
    expect((await store.listProposals({ limit: 10 })).map((p) => p.id)).toEqual(['p3', 'p2', 'p1']);
    await store.close();
  });

  it('a store written before the per-principal index keeps its proposals readable, with their principal', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-store-'));
    dirs.push(dir);
    const old = SqliteStore.open(dir);
    await old.addProposal(proposal('p-old', 'alice', 1));
    await old.close();
    const db = new Database(join(dir, STORE_FILE));
    db.exec('DROP INDEX IF EXISTS proposals_by_principal');
    db.close();
    const store = SqliteStore.open(dir);
    expect(await store.getProposal('p-old')).toMatchObject({ id: 'p-old', principal: 'alice', status: 'pending' });
    expect((await store.listProposals({ principal: 'alice', limit: 5 })).map((p) => p.id)).toEqual(['p-old']);
    await store.close();
    const check = new Database(join(dir, STORE_FILE), { readonly: true });
    expect(check.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'proposals_by_principal'").all()).toHaveLength(1);
    check.close();
  });
});
