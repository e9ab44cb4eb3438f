/**
 * Every call the broker accepted leaves exactly one record, a parked one too (issue 15): a row
 * parked on an `ask` and then rejected, cancelled or expired while no call waits on it (its
 * caller left, or the broker that parked it stopped) gets its record from the task engine; a
 * row whose call still waits gets it from that call only. The engine on a manual clock and an
 * in-memory store; the broker path is stood in for by `park` and `onSettled`, as the judge and
 * the broker call them.
 */
import { once } from 'node:events';
import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import type { BrokerAnswer } from '../../src/broker/broker.js';
import type { BrokerCall, CallerSession, CallRecord, ToolTarget } from '../../src/broker/types.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { SqliteStore, type TaskRow } from '../../src/store/index.js';
import { TASK_POLL_MS, TaskEngine, type TaskEngineDeps } from '../../src/tasks/index.js';

const engines: TaskEngine[] = [];
afterEach(async () => {
  for (const e of engines.splice(0)) await e.stop();
});

const session: CallerSession = { sessionId: 's1', principal: 'alice', unit: 's1', isLive: () => true };
const target: ToolTarget = { name: 'u__echo', server: 'u', toolName: 'echo', state: 'active', source: 'upstream' };
const TTL_MS = 60_000;

function setup(options: { store?: SqliteStore; clock?: ManualClock; failRecords?: () => boolean; run?: TaskEngineDeps['run'] } = {}) {
  const clock = options.clock ?? new ManualClock();
  const store = options.store ?? SqliteStore.open(':memory:');
  const records: CallRecord[] = [];
  const engine = new TaskEngine({
    store,
    clock,
    logger: silentLogger(),
    run: options.run ?? (() => new Promise<BrokerAnswer>(() => undefined)),
    record: async (r) => {
      if (options.failRecords?.()) throw new Error('disk full');
      records.push(r);
    },
    scrubArgs: (a) => a,
    ttlMs: TTL_MS,
    maxTtlMs: 120_000,
    askMode: () => 'park',
    pidAlive: () => false,
  });
  engines.push(engine);
  return { clock, store, engine, records };
}

/** A plain call as the judge parks it; `leave()` is its caller going away. */
function plainCall(clock: ManualClock) {
  const controller = new AbortController();
  const call = {
    callId: 'call-1',
    request: { name: 'u__echo', args: { text: 'hi' }, signal: controller.signal },
    session,
    target,
    startedAt: clock.now(),
    attempts: 0,
    bytesOut: 0,
    notes: {},
  } as unknown as BrokerCall;
  return { call, leave: () => controller.abort('the caller left') };
}

/** The answer the path gives the call after the judge's refusal; `recorded` as the record stage left it. */
function answerOf(call: BrokerCall, outcome: 'approval_required' | 'cancelled', recorded: boolean): BrokerAnswer {
  const record = recorded ? ({ callId: call.callId, outcome } as CallRecord) : undefined;
  return { callId: call.callId, outcome, status: 403, attempts: 0, result: { content: [], isError: true }, record } as BrokerAnswer;
}

/** Parks `call`, and settles it as the broker does: the record is deferred when it stays parked. */
async function parkAndSettle(engine: TaskEngine, call: BrokerCall): Promise<string> {
  const decided = engine.park(call, 'policy asks');
  const [row] = await waitRows(engine);
  const decision = (await decided)!;
  const stillParked = !decision.approved && decision.stillParked === true;
  await engine.onSettled(call, answerOf(call, !decision.approved && decision.cancelled ? 'cancelled' : 'approval_required', !stillParked));
  return row!.id;
}

async function waitRows(engine: TaskEngine): Promise<TaskRow[]> {
  for (;;) {
    const rows = (await engine.list(undefined, { status: 'parked' })).items;
    if (rows.length) return rows;
    await new Promise((r) => setImmediate(r));
  }
}

describe('records of parked calls settled with no call waiting (issue 15)', () => {
  it('a parked call whose caller left, then rejected, writes one approval_required record with the reason and its call id', async () => {
    const { clock, engine, records } = setup();
    await engine.start();
    const { call, leave } = plainCall(clock);
    const decided = engine.park(call, 'policy asks');
    const [row] = await waitRows(engine);
    leave();
    const decision = (await decided)!;
    expect(decision).toMatchObject({ approved: false, stillParked: true });
    await engine.onSettled(call, answerOf(call, 'cancelled', false)); // the record stage deferred it
    expect(records).toEqual([]);

    await engine.decide(row!.id, { approve: false, by: 'cli', reason: 'not today' });
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({
      callId: 'call-1',
      sessionId: 's1',
      principal: 'alice',
      subject: 'u/echo',
      name: 'u__echo',
      outcome: 'approval_required',
      status: 403,
      attempts: 0,
      reason: 'rejected by cli: not today',
      args: { text: 'hi' },
    });
    await clock.advance(TTL_MS + TASK_POLL_MS);
    expect(records).toHaveLength(1);
    expect(await engine.get(row!.id, undefined)).toBeUndefined();
  });

  it('a parked call whose caller left and that expires undecided writes one approval_required record, then its row is deleted', async () => {
    const { clock, engine, records } = setup();
    await engine.start();
    const { call, leave } = plainCall(clock);
    const decided = engine.park(call, 'policy asks');
    const [row] = await waitRows(engine);
    leave();
    await decided;
    await engine.onSettled(call, answerOf(call, 'cancelled', false));
    await clock.advance(TTL_MS - TASK_POLL_MS);
    expect(records).toEqual([]);
    await clock.advance(2 * TASK_POLL_MS);
    expect(records.map((r) => [r.callId, r.outcome, r.reason])).toEqual([['call-1', 'approval_required', `the parked call expired undecided (its ttl of ${TTL_MS} ms ran out)`]]);
    await clock.advance(TASK_POLL_MS);
    expect(records).toHaveLength(1);
    expect((await engine.list(undefined)).items).toEqual([]);
  });

  it('no duplicate while a call waits: a rejection answers the waiting call, whose record is the only one, also past the TTL', async () => {
    const { clock, engine, records } = setup();
    await engine.start();
    const { call } = plainCall(clock);
    const decided = engine.park(call, 'policy asks');
    const [row] = await waitRows(engine);
    await engine.decide(row!.id, { approve: false, by: 'cli' });
    expect(await decided).toMatchObject({ approved: false, reason: 'rejected by cli' });
    expect(records).toEqual([]); // the waiting call writes it, through the record stage
    await engine.onSettled(call, answerOf(call, 'approval_required', true));
    await clock.advance(TTL_MS + 2 * TASK_POLL_MS);
    expect(records).toEqual([]);
  });

  it('no duplicate when a waiting call expires: the waiter is answered and records; the engine writes none', async () => {
    const { clock, engine, records } = setup();
    await engine.start();
    const { call } = plainCall(clock);
    const settled = parkAndSettle(engine, call);
    await waitRows(engine);
    await clock.advance(TTL_MS + TASK_POLL_MS);
    await settled;
    await clock.advance(2 * TASK_POLL_MS);
    expect(records).toEqual([]);
    expect((await engine.list(undefined)).items).toEqual([]);
  });

  it('after a restart: a row the dead broker parked, rejected while no broker ran, gets its one record from the next broker, once', async () => {
    const clock = new ManualClock();
    const store = SqliteStore.open(':memory:');
    const at = new Date(clock.now()).toISOString();
    await store.heartbeat({ id: 'dead', host: hostname(), pid: 424242, startedAt: at, heartbeatAt: at });
    await store.addTask({
      id: 't1', status: 'parked', stoppedBy: null, owner: 'dead', principal: 'alice', unit: 's1', sessionId: '', subject: 'u/echo', name: 'u__echo',
      args: {}, argsRedacted: false, result: null, reason: 'waiting for approval', callId: '', approvedBy: null, recordOwed: true, createdAt: at, updatedAt: at, ttlMs: TTL_MS,
    });
    const { decideParked } = await import('../../src/tasks/index.js');
    await decideParked(store, 't1', { approve: false, by: 'cli', reason: 'no' }, clock.now());
    const first = setup({ store, clock });
    await first.engine.start();
    expect(first.records.map((r) => [r.outcome, r.reason, r.sessionId])).toEqual([['approval_required', 'rejected by cli: no', null]]);
    expect((await store.getTask('t1', clock.now()))!.callId).toBe(first.records[0]!.callId);
    const second = setup({ store, clock });
    await second.engine.start();
    await clock.advance(TASK_POLL_MS);
    expect([...first.records, ...second.records]).toHaveLength(1);
  });

  it('a record the sink refuses stays owed and is written on a later tick (fail closed)', async () => {
    let failing = true;
    const { clock, engine, records } = setup({ failRecords: () => failing });
    await engine.start();
    const { call, leave } = plainCall(clock);
    const decided = engine.park(call, 'policy asks');
    const [row] = await waitRows(engine);
    leave();
    await decided;
    await engine.onSettled(call, answerOf(call, 'cancelled', false));
    await engine.decide(row!.id, { approve: false, by: 'cli' });
    expect(records).toEqual([]);
    expect((await engine.get(row!.id, undefined))!.recordOwed).toBe(true);
    failing = false;
    await clock.advance(TASK_POLL_MS);
    expect(records.map((r) => r.outcome)).toEqual(['approval_required']);
    expect((await engine.get(row!.id, undefined))!.recordOwed).toBe(false);
  });

  it('a task whose call reached its upstream but could not write its record: the owed record keeps the attempts the call sent, not 0', async () => {
    // The path as the record stage leaves it when the sink refuses: guard_error, the result withheld, no record.
    const withheld = { callId: 'call-7', outcome: 'guard_error', status: 500, attempts: 2, reason: 'the call record could not be written', result: { content: [], isError: true } } as unknown as BrokerAnswer;
    const { clock, engine, records } = setup({ run: async () => withheld });
    await engine.start();
    const row = await engine.create({ name: 'u__echo', args: { text: 'hi' } }, session, target);
    const failed = await engine.settled(row.id, undefined, new AbortController().signal);
    expect(failed).toMatchObject({ status: 'failed', recordOwed: true });
    await new Promise((r) => setImmediate(r)); // its run lets go of the row once its answer is stored
    const ticked = once(engine, 'tick');
    await clock.advance(TASK_POLL_MS);
    await ticked;
    expect(records.map((r) => [r.callId, r.outcome, r.attempts])).toEqual([['call-7', 'guard_error', 2]]);
  });

  it('an approved parked call whose arguments were not kept: its record is written before its failed result can be read; an unwritable record leaves it parked for a later tick (the result was readable first)', async () => {
    let failing = true;
    const { clock, engine, records, store } = setup({ failRecords: () => failing });
    const at = new Date(clock.now()).toISOString();
    await engine.start();
    await store.addTask({
      id: 'r1', status: 'parked', stoppedBy: null, owner: 'gone', principal: 'alice', unit: 's1', sessionId: '', subject: 'u/echo', name: 'u__echo',
      args: {}, argsRedacted: true, result: null, reason: 'waiting for approval', callId: '', approvedBy: 'cli', recordOwed: true, createdAt: at, updatedAt: at, ttlMs: TTL_MS,
    });
    const seenAtFailed: number[] = [];
    engine.on('status', (row) => {
      if (row.id === 'r1' && row.status === 'failed') seenAtFailed.push(records.length);
    });
    await clock.advance(TASK_POLL_MS);
    expect(records).toEqual([]);
    expect((await engine.get('r1', undefined))!.status).toBe('parked');
    failing = false;
    await clock.advance(TASK_POLL_MS);
    expect(records.map((r) => [r.name, r.outcome, r.reason])).toEqual([['u__echo', 'guard_error', 'arguments redacted']]);
    expect(seenAtFailed).toEqual([1]);
    expect(await engine.get('r1', undefined)).toMatchObject({ status: 'failed', recordOwed: false, callId: records[0]!.callId });
    await clock.advance(2 * TASK_POLL_MS);
    expect(records).toHaveLength(1);
  });

  it('an approved flow task a step parked, left so by a stopped broker, is not run again from its row (its earlier steps would run twice): failed cancelled, recorded once; one parked at its own ask runs', async () => {
    const ran: string[] = [];
    const { clock, engine, records, store } = setup({
      run: async (request) => (ran.push(request.name), new Promise<BrokerAnswer>(() => undefined)),
    });
    const at = new Date(clock.now()).toISOString();
    await engine.start();
    const parked = (id: string, name: string, recordOwed: boolean, reason: string) =>
      store.addTask({
        id, status: 'parked', stoppedBy: null, owner: 'gone', principal: 'alice', unit: 's1', sessionId: '', subject: `broker/${name}`, name,
        args: {}, argsRedacted: false, result: null, reason, callId: recordOwed ? '' : 'flow-call', approvedBy: 'cli', recordOwed, createdAt: at, updatedAt: at, ttlMs: TTL_MS,
      });
    const settledRow = new Promise<void>((resolve) => engine.on('status', (row) => row.id === 'f1' && row.status === 'failed' && resolve()));
    const byStep = 'waiting for approval of its step "s2": policy.rules[0] says ask';
    // The flow's own call recorded `cancelled` as its broker stopped: nothing is owed.
    await parked('f1', 'broker__flow_run', false, byStep);
    // One whose record is still owed gets it, once.
    await parked('f2', 'broker__flow_run', true, byStep);
    // A flow parked at its own ask (no step ran) and a plain call: each runs from its row.
    await parked('f3', 'broker__flow_run', false, 'waiting for approval: policy.rules[1] says ask');
    await parked('p1', 'u__echo', false, 'waiting for approval: policy.rules[0] says ask');
    await clock.advance(TASK_POLL_MS);
    await settledRow;
    expect(ran.sort()).toEqual(['broker__flow_run', 'u__echo']);
    expect(await engine.get('f1', undefined)).toMatchObject({ status: 'failed', callId: 'flow-call', reason: expect.stringMatching(/^approved by cli, not run: the flow stopped while one of its steps waited/) });
    expect(await engine.get('f2', undefined)).toMatchObject({ status: 'failed', recordOwed: false });
    expect(await engine.get('f3', undefined)).toMatchObject({ status: 'running' });
    expect(records.map((r) => [r.name, r.outcome])).toEqual([['broker__flow_run', 'cancelled']]);
    await clock.advance(2 * TASK_POLL_MS);
    expect(records).toHaveLength(1);
  });

  it("a step of a flow run as a task, parked on its flow's row: the step's record leaves the flow's owed (it cleared it)", async () => {
    const { engine } = setup();
    await engine.start();
    const row = await engine.create({ name: 'broker__flow_run', args: {} }, session, target);
    const controller = new AbortController();
    const step = { callId: 'step-2', request: { name: 'u__echo', args: {}, signal: controller.signal, taskId: row.id, flow: { id: 'flow-1', step: 's2' } }, session, target } as unknown as BrokerCall;
    const decided = engine.park(step, 'policy asks');
    const [parkedRow] = await waitRows(engine);
    expect(parkedRow).toMatchObject({ id: row.id, reason: 'waiting for approval of its step "s2": policy asks' });
    await engine.decide(row.id, { approve: true, by: 'ops' });
    expect(await decided).toMatchObject({ approved: true });
    await engine.onSettled(step, { callId: 'step-2', outcome: 'ok', status: 200, attempts: 1, result: { content: [] }, record: { callId: 'step-2', outcome: 'ok' } as CallRecord } as BrokerAnswer);
    expect((await engine.get(row.id, undefined))!.recordOwed).toBe(true);
  });

  describe('a task running when its broker dies (SIGKILL): its row is owed from the start', () => {
    /** Broker A (its clock never advanced: a dead process's timer never fires) creates a task and dies. */
    async function dyingTask(store: SqliteStore, run?: TaskEngineDeps['run']) {
      const a = setup({ store, run });
      await a.engine.start();
      engines.splice(engines.indexOf(a.engine), 1); // a dead broker is never stopped
      const row = await a.engine.create({ name: 'u__echo', args: { text: 'hi' } }, session, target);
      expect((await store.getTask(row.id, a.clock.now()))!.recordOwed).toBe(true);
      return { a, row };
    }

    it('the next broker kills it by system and writes its one record: cancelled, the reason, attempts 0', async () => {
      const store = SqliteStore.open(':memory:');
      const { a, row } = await dyingTask(store);
      const b = setup({ store, clock: new ManualClock(a.clock.now()) });
      await b.engine.start();
      expect(await store.getTask(row.id, b.clock.now())).toMatchObject({ status: 'killed', stoppedBy: 'system', recordOwed: false });
      expect(b.records.map((r) => [r.name, r.outcome, r.status, r.attempts, r.reason, r.principal])).toEqual([
        ['u__echo', 'cancelled', 499, 0, 'the broker instance running it ended before it finished', 'alice'],
      ]);
      await b.clock.advance(TTL_MS + 2 * TASK_POLL_MS);
      expect([...a.records, ...b.records]).toHaveLength(1);
    });

    it('none twice: a task whose call wrote its record before its broker died gets no second one', async () => {
      const store = SqliteStore.open(':memory:');
      let engine!: TaskEngine;
      const { a, row } = await dyingTask(store, async (request, s, t) => {
        await new Promise((r) => setImmediate(r)); // `engine` is set once create() answered
        const call = { callId: 'call-9', request, session: s, target: t } as unknown as BrokerCall;
        const answer = { callId: 'call-9', outcome: 'ok', status: 200, attempts: 1, result: { content: [] }, record: { callId: 'call-9', outcome: 'ok' } as CallRecord } as BrokerAnswer;
        await engine.onSettled(call, answer); // the record stage wrote it; the broker dies before the answer is stored
        return new Promise<BrokerAnswer>(() => undefined);
      });
      engine = a.engine;
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      expect((await store.getTask(row.id, a.clock.now()))!.recordOwed).toBe(false);
      const b = setup({ store, clock: new ManualClock(a.clock.now()) });
      await b.engine.start();
      expect((await store.getTask(row.id, b.clock.now()))!.status).toBe('killed');
      await b.clock.advance(TTL_MS + 2 * TASK_POLL_MS);
      expect(b.records).toEqual([]);
    });

    it("a flow run as a task: its step's record is the step's, so the task still owes its own and the next broker writes it (it was lost)", async () => {
      const store = SqliteStore.open(':memory:');
      let engine!: TaskEngine;
      const { a, row } = await dyingTask(store, async (request, s, t) => {
        await new Promise((r) => setImmediate(r));
        // A step of the flow the task runs: its call carries the task's id and its flow.
        const step = { callId: 'step-1', request: { ...request, name: 'u__echo', flow: { id: 'flow-1', step: 's1' } }, session: s, target: t } as unknown as BrokerCall;
        const answer = { callId: 'step-1', outcome: 'ok', status: 200, attempts: 1, result: { content: [] }, record: { callId: 'step-1', outcome: 'ok' } as CallRecord } as BrokerAnswer;
        await engine.onSettled(step, answer);
        return new Promise<BrokerAnswer>(() => undefined);
      });
      engine = a.engine;
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      expect((await store.getTask(row.id, a.clock.now()))!.recordOwed).toBe(true);
      const b = setup({ store, clock: new ManualClock(a.clock.now()) });
      await b.engine.start();
      expect(b.records.map((r) => [r.name, r.outcome])).toEqual([['u__echo', 'cancelled']]);
    });
  });
});
