/**
 * The task engine's instance rules on a manual clock and an in-memory store (issue 15 §3): a
 * dead instance's running rows become killed by system, another live instance's running row
 * reads A2A `unknown` until its heartbeat goes stale, and TTL expiry deletes a task.
 * The broker path is stood in for by `run` (this tests the engine, not the path).
 */
import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import type { BrokerAnswer } from '../../src/broker/broker.js';
import type { CallerSession, ToolTarget } from '../../src/broker/types.js';
import { ManualClock } from '../../src/shared/clock.js';
import { call } from '../broker/support.js';
import { silentLogger } from '../../src/shared/logger.js';
import { SqliteStore, type TaskRow } from '../../src/store/index.js';
import { TASK_POLL_MS, TASK_STALE_MS, TaskEngine } from '../../src/tasks/index.js';

const engines: TaskEngine[] = [];
afterEach(async () => {
  for (const e of engines.splice(0)) await e.stop();
});

const session: CallerSession = { sessionId: 's1', principal: 'alice', unit: 's1', isLive: () => true };
const target: ToolTarget = { name: 'u__echo', server: 'u', toolName: 'echo', state: 'active', source: 'upstream' };

function setup(options: { pidAlive?: (pid: number) => boolean; run?: () => Promise<BrokerAnswer>; timing?: { heartbeatMs?: number; staleMs?: number; pollMs?: number }; askMode?: 'elicit' | 'park' } = {}) {
  const clock = new ManualClock();
  const store = SqliteStore.open(':memory:');
  const engine = new TaskEngine({
    store,
    clock,
    logger: silentLogger(),
    run: options.run ?? (() => new Promise<BrokerAnswer>(() => undefined)),
    scrubArgs: (a) => a,
    ttlMs: 60_000,
    maxTtlMs: 120_000,
    askMode: () => options.askMode ?? 'elicit',
    pidAlive: options.pidAlive,
    timing: options.timing,
  });
  engines.push(engine);
  return { clock, store, engine };
}

function runningRow(id: string, owner: string, at: string): TaskRow {
  return {
    id, status: 'running', stoppedBy: null, owner, principal: 'alice', unit: 's1', sessionId: 's1', subject: 'u/echo', name: 'u__echo',
    args: {}, argsRedacted: false, result: null, reason: null, callId: '', approvedBy: null, createdAt: at, updatedAt: at, ttlMs: 60_000,
  };
}

describe('TaskEngine instances', () => {
  it('an instance on this host whose pid is gone is reaped at start, though its heartbeat is fresh: killed by system, MCP failed, A2A failed', async () => {
    const { clock, store, engine } = setup({ pidAlive: () => false });
    const at = new Date(clock.now()).toISOString();
    await store.heartbeat({ id: 'old', host: hostname(), pid: 424242, startedAt: at, heartbeatAt: at });
    await store.addTask(runningRow('t1', 'old', at));
    await engine.start();
    const row = (await engine.get('t1', 'alice'))!;
    expect(row).toMatchObject({ status: 'killed', stoppedBy: 'system' });
    expect(engine.a2a(row)).toBe('failed');
    expect(engine.toMcpTask(row)).toMatchObject({ status: 'failed', _meta: { 'mcp-broker/a2a': 'failed' } });
  });

  it('a running row of a live instance on another host reads unknown (MCP working); once its heartbeat is stale it is reaped', async () => {
    const { clock, store, engine } = setup();
    const at = new Date(clock.now()).toISOString();
    await store.heartbeat({ id: 'peer', host: 'another-host', pid: 1, startedAt: at, heartbeatAt: at });
    await store.addTask(runningRow('t1', 'peer', at));
    await engine.start();
    let row = (await engine.get('t1', 'alice'))!;
    expect(row.status).toBe('running');
    expect(engine.a2a(row)).toBe('unknown');
    expect(engine.toMcpTask(row).status).toBe('working');
    await clock.advance(TASK_STALE_MS + TASK_POLL_MS);
    row = (await engine.get('t1', 'alice'))!;
    expect(row).toMatchObject({ status: 'killed', stoppedBy: 'system' });
    expect(engine.a2a(row)).toBe('failed');
  });

  it("a task is one principal's: get and cancel by another find nothing", async () => {
    const { engine } = setup();
    await engine.start();
    const row = await engine.create({ name: 'u__echo', args: {} }, session, target);
    expect(await engine.get(row.id, 'bob')).toBeUndefined();
    await expect(engine.cancel(row.id, 'bob')).rejects.toMatchObject({ code: 'not_found' });
    expect(await engine.cancel(row.id, 'alice')).toMatchObject({ status: 'killed', stoppedBy: 'user' });
  });

  it('issue 15: broker.taskStaleMs and taskPollMs drive reaping and the suggested poll interval', async () => {
    const { clock, store, engine } = setup({ timing: { heartbeatMs: 1_000, staleMs: 3_000, pollMs: 250 } });
    const at = new Date(clock.now()).toISOString();
    await store.heartbeat({ id: 'peer', host: 'another-host', pid: 1, startedAt: at, heartbeatAt: at });
    await store.addTask(runningRow('t1', 'peer', at));
    await engine.start();
    await clock.advance(3_000);
    expect((await engine.get('t1', 'alice'))!.status).toBe('running'); // not yet stale
    await clock.advance(500);
    const row = (await engine.get('t1', 'alice'))!;
    expect(row).toMatchObject({ status: 'killed', stoppedBy: 'system' });
    expect(engine.toMcpTask(row).pollInterval).toBe(250);
    expect(TASK_STALE_MS).toBeGreaterThan(3_500); // the default would not have reaped it yet
  });

  it('TTL: a completed task and its result are deleted once its ttl has passed', async () => {
    const answer = { callId: 'c1', outcome: 'ok', status: 200, result: { content: [{ type: 'text', text: 'done' }] } } as BrokerAnswer;
    const { clock, engine } = setup({ run: async () => answer });
    await engine.start();
    const row = await engine.create({ name: 'u__echo', args: {} }, session, target, 5_000);
    const done = await engine.settled(row.id, 'alice', new AbortController().signal);
    expect(done).toMatchObject({ status: 'completed', callId: 'c1', result: answer.result });
    await clock.advance(5_000);
    expect(await engine.get(row.id, 'alice')).toBeUndefined();
  });
});

describe('TaskEngine.adopt (a running call made a task when its upstream answered one)', () => {
  it('stores a running row at once and settles it with the call answer, its callId kept', async () => {
    const { engine } = setup();
    await engine.start();
    let answer!: (a: BrokerAnswer) => void;
    const running = new Promise<BrokerAnswer>((resolve) => (answer = resolve));
    const row = await engine.adopt({ name: 'u__echo', args: { text: 'x' } }, session, target, { answer: running, abort: () => undefined });
    expect(row).toMatchObject({ status: 'running', principal: 'alice', subject: 'u/echo', args: { text: 'x' } });
    const settled = new Promise<TaskRow>((resolve) => engine.on('status', (r) => r.id === row.id && r.status === 'completed' && resolve(r)));
    answer({ callId: 'call-1', outcome: 'ok', status: 200, attempts: 1, result: { content: [{ type: 'text', text: 'x' }] } });
    expect(await settled).toMatchObject({ status: 'completed', callId: 'call-1', result: { content: [{ type: 'text', text: 'x' }] } });
  });

  it('cancel aborts the adopted call with the row killed by user first', async () => {
    const { engine } = setup();
    await engine.start();
    const reasons: unknown[] = [];
    const row = await engine.adopt({ name: 'u__echo', args: {} }, session, target, { answer: new Promise<BrokerAnswer>(() => undefined), abort: (r) => reasons.push(r) });
    const cancelled = await engine.cancel(row.id, 'alice');
    expect(cancelled).toMatchObject({ status: 'killed', stoppedBy: 'user' });
    expect(reasons).toHaveLength(1);
    expect(engine.a2a(cancelled)).toBe('canceled');
  });
});

describe('TaskEngine: parked calls of a flow (found by review)', () => {
  it("a flow's step whose flow stops waiting is withdrawn (killed by its parent), never left for a later approval to run outside its flow; a plain call stays parked", async () => {
    const { clock, store, engine } = setup({ askMode: 'park' });
    await engine.start();
    const waits: Array<Promise<unknown>> = [];
    const ids: string[] = [];
    for (const flow of [{ id: 'flow-1', step: 'b' }, undefined]) {
      const controller = new AbortController();
      const c = call({ target, session, request: { name: target.name, args: { note: 'b ran' }, signal: controller.signal, ...(flow && { flow }) } });
      const decision = engine.park(c, 'the policy asks');
      // Parked: its row is in the inbox.
      const rows = async () => (await store.listTasks({ now: clock.now(), limit: 100 })).filter((r) => r.status === 'parked' && !ids.includes(r.id));
      for (let i = 0; i < 100 && (await rows()).length === 0; i++) await new Promise((r) => setImmediate(r));
      ids.push((await rows())[0]!.id);
      controller.abort();
      waits.push(decision);
    }
    const [stepDecision, plainDecision] = await Promise.all(waits);
    expect(stepDecision).toMatchObject({ approved: false, cancelled: true });
    expect(stepDecision).not.toHaveProperty('stillParked');
    expect(plainDecision).toMatchObject({ approved: false, cancelled: true, stillParked: true });
    expect(await store.getTask(ids[0]!, clock.now())).toMatchObject({ status: 'killed', stoppedBy: 'parent' });
    expect(await store.getTask(ids[1]!, clock.now())).toMatchObject({ status: 'parked' });
  });

  it('a task parked again after an earlier approval waits for a new one: the approval is spent (a flow run as a task ran every later ask step on its first)', async () => {
    const { clock, store, engine } = setup({ askMode: 'park' });
    await engine.start();
    const at = new Date(clock.now()).toISOString();
    await store.addTask({ ...runningRow('t-flow', engine.instanceId, at), approvedBy: 'ops' });
    const c = call({ target, session, request: { name: target.name, args: {}, signal: new AbortController().signal, taskId: 't-flow' } });
    void engine.park(c, 'the second ask of the flow');
    for (let i = 0; i < 100 && (await store.getTask('t-flow', clock.now()))?.status !== 'parked'; i++) await new Promise((r) => setImmediate(r));
    expect(await store.getTask('t-flow', clock.now())).toMatchObject({ status: 'parked', approvedBy: null });
  });
});
