/**
 * Task rows and instance heartbeats in the SQLite store (issue 15 §3): a reaped instance's
 * running rows become killed by system, TTL expiry deletes rows, lists are per principal, and
 * an update only moves a row from the statuses it names.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore, type TaskRow } from '../../src/store/index.js';

const T0 = 1_700_000_000_000;
const at = (n: number) => new Date(T0 + n).toISOString();
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function row(id: string, over: Partial<TaskRow> = {}): TaskRow {
  return {
    id,
    status: 'running',
    stoppedBy: null,
    owner: 'i1',
    principal: 'alice',
    unit: 's1',
    sessionId: 's1',
    subject: 'u/echo',
    name: 'u__echo',
    args: { text: 'hi' },
    argsRedacted: false,
    result: null,
    reason: null,
    callId: `c-${id}`,
    approvedBy: null,
    createdAt: at(0),
    updatedAt: at(0),
    ttlMs: 60_000,
    ...over,
  };
}

describe('SqliteStore tasks', () => {
  it('reaping an instance kills its running rows by system, leaves its settled rows and other owners alone, across reopen', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tasks-'));
    dirs.push(dir);
    let store = SqliteStore.open(dir);
    await store.heartbeat({ id: 'i1', host: 'h', pid: 1, startedAt: at(0), heartbeatAt: at(0) });
    await store.addTask(row('a'));
    await store.addTask(row('b', { status: 'completed', result: { content: [] } }));
    await store.addTask(row('c', { owner: 'i2' }));
    await store.close();
    store = SqliteStore.open(dir);
    expect((await store.listInstances()).map((i) => i.id)).toEqual(['i1']);
    expect(await store.reapInstance('i1', at(5))).toBe(1);
    expect(await store.getTask('a', T0)).toMatchObject({ status: 'killed', stoppedBy: 'system', updatedAt: at(5) });
    expect(await store.getTask('b', T0)).toMatchObject({ status: 'completed', result: { content: [] } });
    expect(await store.getTask('c', T0)).toMatchObject({ status: 'running', stoppedBy: null });
    expect(await store.listInstances()).toEqual([]);
    await store.close();
  });

  it('TTL: an expired row is neither read nor listed, and deleteExpiredTasks removes it with its result', async () => {
    const store = SqliteStore.open(':memory:');
    await store.addTask(row('a', { status: 'completed', result: { content: [{ type: 'text', text: 'x' }] }, ttlMs: 1_000 }));
    await store.addTask(row('b', { ttlMs: 10_000 }));
    expect(await store.getTask('a', T0 + 999)).toBeDefined();
    expect(await store.getTask('a', T0 + 1_000)).toBeUndefined();
    expect((await store.listTasks({ now: T0 + 1_000, limit: 10 })).map((t) => t.id)).toEqual(['b']);
    expect(await store.deleteExpiredTasks(T0 + 1_000)).toBe(1);
    expect(await store.getTask('a', T0)).toBeUndefined();
  });

  it('lists one principal only, and updateTask moves a row only from the statuses named', async () => {
    const store = SqliteStore.open(':memory:');
    await store.addTask(row('a'));
    await store.addTask(row('b', { principal: 'bob', createdAt: at(1) }));
    expect((await store.listTasks({ principal: 'alice', now: T0, limit: 10 })).map((t) => t.id)).toEqual(['a']);
    expect((await store.listTasks({ now: T0, limit: 10 })).map((t) => t.id)).toEqual(['b', 'a']);
    expect(await store.updateTask('a', ['parked'], { status: 'completed', updatedAt: at(2) })).toBe(false);
    expect(await store.updateTask('a', ['running'], { status: 'killed', stoppedBy: 'user', reason: 'cancelled', updatedAt: at(2) })).toBe(true);
    expect(await store.updateTask('a', ['running'], { status: 'completed', updatedAt: at(3) })).toBe(false);
    expect(await store.getTask('a', T0)).toMatchObject({ status: 'killed', stoppedBy: 'user', reason: 'cancelled' });
  });

  it("filters before the limit: another principal's many newer rows hide no parked call, and approved ones are listed apart (each was hidden)", async () => {
    const store = SqliteStore.open(':memory:');
    await store.addTask(row('waiting', { status: 'parked' }));
    await store.addTask(row('approved', { status: 'parked', approvedBy: 'cli' }));
    // Bob's flood: 600 newer tasks of his own, completed and parked.
    for (let i = 0; i < 600; i++) await store.addTask(row(`bob-${i}`, { principal: 'bob', status: i % 2 ? 'completed' : 'parked', createdAt: at(10 + i), ttlMs: 600_000 }));
    const ids = async (o: { status?: 'parked'; approved?: boolean; principal?: string }) => (await store.listTasks({ ...o, now: T0 + 5, limit: 500 })).map((t) => t.id);
    expect(await ids({ status: 'parked', approved: true })).toEqual(['approved']);
    expect(await ids({ status: 'parked', principal: 'alice' })).toEqual(['waiting', 'approved']); // one time: by id, descending
    expect(await ids({ status: 'parked', approved: false, principal: 'alice' })).toEqual(['waiting']);
    // The limit still holds, newest first.
    const parked = await ids({ status: 'parked', approved: false });
    expect(parked).toHaveLength(301);
    expect(parked.at(0)).toBe('bob-598');
    expect(parked.at(-1)).toBe('waiting');
  });
});

describe('SqliteStore owed task records (issue 15)', () => {
  it('a store whose tasks table predates record_owed opens, gains the column (rows read not owed), and owes and claims a record once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tasks-'));
    dirs.push(dir);
    let store = SqliteStore.open(dir);
    await store.addTask(row('old', { status: 'parked' }));
    await store.close();
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(join(dir, 'broker.sqlite'));
    db.exec('DROP INDEX IF EXISTS tasks_owing_records');
    db.exec('ALTER TABLE tasks DROP COLUMN record_owed');
    db.close();
    store = SqliteStore.open(dir);
    expect(await store.getTask('old', T0)).toMatchObject({ status: 'parked', recordOwed: false });
    expect(await store.setRecordOwed('old', true)).toBe(true);
    expect(await store.listOwedRecords(T0, 10)).toEqual([]); // parked and not expired: not due
    expect((await store.listOwedRecords(T0 + 60_000, 10)).map((r) => r.id)).toEqual(['old']);
    expect(await store.deleteExpiredTasks(T0 + 60_000)).toBe(0); // owed: kept until its record is written
    expect(await store.setRecordOwed('old', false)).toBe(true);
    expect(await store.setRecordOwed('old', false)).toBe(false); // claimed once
    expect(await store.deleteExpiredTasks(T0 + 60_000)).toBe(1);
    await store.close();
  });

  it('a store whose tasks table predates attempts opens and gains the column (rows read 0); an update keeps the attempts a call sent', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tasks-'));
    dirs.push(dir);
    let store = SqliteStore.open(dir);
    await store.addTask(row('old', { status: 'running' }));
    await store.close();
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(join(dir, 'broker.sqlite'));
    db.exec('ALTER TABLE tasks DROP COLUMN attempts');
    db.close();
    store = SqliteStore.open(dir);
    expect(await store.getTask('old', T0)).toMatchObject({ status: 'running', attempts: 0 });
    expect(await store.updateTask('old', ['running'], { status: 'failed', attempts: 2, updatedAt: new Date(T0).toISOString() })).toBe(true);
    expect(await store.getTask('old', T0)).toMatchObject({ status: 'failed', attempts: 2 });
    await store.close();
  });
});
