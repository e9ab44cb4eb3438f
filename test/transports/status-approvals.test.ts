/**
 * The status page's approval inbox (`GET /api/v1/status`) for a user shows that user's own parked
 * calls, filtered in the store before the page's limit: filtered after it, the newest 500 parked
 * calls of other principals hid every one of the user's. A real gateway serving HTTP in this
 * process, over its SQLite store.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { TaskRow } from '../../src/store/index.js';
import { serveInProcess, type InProcessHttp } from './in-process.js';

const ALICE = randomBytes(16).toString('hex');
const OP = randomBytes(16).toString('hex');

function parked(id: string, principal: string, createdAt: string): TaskRow {
  return {
    id, status: 'parked', stoppedBy: null, owner: 'gone', principal, unit: 'u', sessionId: 's', subject: 'u/echo', name: 'u__echo',
    args: {}, argsRedacted: false, result: null, reason: 'policy says ask', callId: `c-${id}`, approvedBy: null, createdAt, updatedAt: createdAt, ttlMs: 3_600_000,
  };
}

describe('status page: approval inbox', () => {
  let served: InProcessHttp | undefined;
  afterEach(async () => served?.close());

  it("a user's parked call behind 500 newer ones of another principal was not shown to that user: now it is, and an operator sees the newest page", async () => {
    served = await serveInProcess({
      mcpServers: {},
      principals: { alice: { token: ALICE }, op: { token: OP, role: 'operator' } },
      estate: { enabled: false },
    });
    const { gateway, serving } = served;
    const now = gateway.clock.now();
    await gateway.store.addTask(parked('alice-1', 'alice', new Date(now - 60_000).toISOString()));
    for (let i = 0; i < 500; i++) await gateway.store.addTask(parked(`bob-${String(i).padStart(3, '0')}`, 'bob', new Date(now - 30_000 + i).toISOString()));
    const status = async (token: string) =>
      ((await (await fetch(`${serving.url}/api/v1/status`, { headers: { authorization: `Bearer ${token}` } })).json()) as { approvals: Array<{ id: string }> }).approvals.map((a) => a.id);
    expect(await status(ALICE)).toEqual(['alice-1']);
    const all = await status(OP);
    expect(all).toHaveLength(500);
    expect(all[0]).toBe('bob-499');
  });
});
