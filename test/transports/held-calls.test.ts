/**
 * HeldCall (transports/held-calls.ts) with a ManualClock: an upstream request is held until
 * answered once; past the bound it is rejected (-32603) and the call is aborted with
 * InputNotAnswered (recorded `timeout` by the deadline stage, a DeadlineExceeded).
 */
import { describe, expect, it } from 'vitest';
import { DeadlineExceeded } from '../../src/broker/deadline.js';
import { ManualClock } from '../../src/shared/clock.js';
import { HeldCall, HeldCalls, InputNotAnswered } from '../../src/transports/held-calls.js';

function rig(boundMs = 1000) {
  const clock = new ManualClock();
  const aborted: unknown[] = [];
  const call = new HeldCall({ server: 'conf', clock, boundMs, abort: (reason) => aborted.push(reason) });
  return { clock, call, aborted };
}

describe('held calls', () => {
  it('hands each upstream request out once under <server>/<round>, answers it once, then tells the end', async () => {
    const { call } = rig();
    let finish!: (v: unknown) => void;
    call.attach(new Promise((r) => (finish = r)));
    const upstream = new AbortController();
    const answered = call.hold({ method: 'roots/list' }, upstream.signal);
    const event = await call.next();
    expect(event).toMatchObject({ kind: 'asked', key: 'conf/1', round: 1, request: { method: 'roots/list' } });
    expect(call.answer(2, { roots: [] })).toBe(false);
    expect(call.answer(1, { roots: [{ uri: 'file:///a' }] })).toBe(true);
    expect(call.answer(1, { roots: [] })).toBe(false);
    expect(await answered).toEqual({ roots: [{ uri: 'file:///a' }] });
    const second = call.hold({ method: 'roots/list' }, upstream.signal);
    expect(await call.next()).toMatchObject({ kind: 'asked', key: 'conf/2', round: 2 });
    call.answer(2, { roots: [] });
    await second;
    finish('the result');
    expect(await call.next()).toEqual({ kind: 'done', ok: true, value: 'the result' });
  });

  it('past the bound the held request is rejected and the call aborted with InputNotAnswered (a DeadlineExceeded)', async () => {
    const { clock, call, aborted } = rig(500);
    const held = call.hold({ method: 'elicitation/create', params: { message: 'm' } }, new AbortController().signal);
    const rejected = held.then(() => 'answered', (err: Error) => err.message);
    await clock.advance(499);
    expect(aborted).toEqual([]);
    await clock.advance(1);
    expect(await rejected).toContain('did not answer elicitation/create within 500 ms');
    expect(aborted).toHaveLength(1);
    expect(aborted[0]).toBeInstanceOf(InputNotAnswered);
    expect(aborted[0]).toBeInstanceOf(DeadlineExceeded);
    expect(call.held()).toBeUndefined();
    expect(call.answer(1, {})).toBe(false);
  });

  it('the upstream giving up on its request drops it', async () => {
    const { call } = rig();
    const upstream = new AbortController();
    const held = call.hold({ method: 'roots/list' }, upstream.signal).catch((err: unknown) => err);
    upstream.abort(new Error('upstream cancelled'));
    expect(((await held) as Error).message).toBe('upstream cancelled');
    expect(call.held()).toBeUndefined();
  });

  it('a second upstream request while the first is held (such as the own roots/list server-everything sends at start) is handed out after the first is answered; each round answers its own', async () => {
    const { call } = rig();
    const upstream = new AbortController();
    const first = call.hold({ method: 'elicitation/create', params: { message: 'm' } }, upstream.signal);
    expect(await call.next()).toMatchObject({ kind: 'asked', key: 'conf/1', round: 1 });
    const second = call.hold({ method: 'roots/list' }, upstream.signal);
    // The caller's retry of round 1 still finds it held (was: replaced by round 2, the retry refused).
    expect(call.held(1)).toEqual({ round: 1, key: 'conf/1' });
    // A valid state without the answer is handed its own round again, not the newer one.
    expect(await call.next(1)).toMatchObject({ kind: 'asked', key: 'conf/1', round: 1 });
    expect(call.answer(1, { action: 'decline' })).toBe(true);
    expect(await first).toEqual({ action: 'decline' });
    expect(await call.next()).toMatchObject({ kind: 'asked', key: 'conf/2', round: 2, request: { method: 'roots/list' } });
    expect(call.answer(2, { roots: [] })).toBe(true);
    expect(await second).toEqual({ roots: [] });
    expect(call.held()).toBeUndefined();
  });

  it('a call that ends while a request it handed out waits stays held until that request is answered: the retry answers it and gets the result', async () => {
    const { call } = rig();
    const table = new HeldCalls(undefined as never); // park/get only: no states sealed here
    let finish!: (v: unknown) => void;
    const result = new Promise((r) => (finish = r));
    call.attach(result);
    const upstream = new AbortController();
    const first = call.hold({ method: 'elicitation/create', params: { message: 'm' } }, upstream.signal);
    expect(await call.next()).toMatchObject({ round: 1 });
    table.park(call, result);
    const second = call.hold({ method: 'roots/list' }, upstream.signal);
    call.answer(1, { action: 'accept', content: {} });
    await first;
    expect(await call.next()).toMatchObject({ kind: 'asked', round: 2 });
    // The tool ends before the caller answers round 2 (the upstream's own roots/list at start).
    finish('the result');
    await result;
    await Promise.resolve();
    expect(table.get(call.id)).toBe(call);
    expect(call.held(2)).toEqual({ round: 2, key: 'conf/2' });
    expect(call.answer(2, { roots: [] })).toBe(true);
    expect(await second).toEqual({ roots: [] });
    expect(await call.next()).toEqual({ kind: 'done', ok: true, value: 'the result' });
    expect(table.get(call.id)).toBeUndefined();
  });

  it('a call that ends holding nothing leaves the table at once', async () => {
    const { call } = rig();
    const table = new HeldCalls(undefined as never);
    let finish!: (v: unknown) => void;
    const result = new Promise((r) => (finish = r));
    call.attach(result);
    const answered = call.hold({ method: 'roots/list' }, new AbortController().signal);
    await call.next();
    table.park(call, result);
    call.answer(1, { roots: [] });
    await answered;
    finish('done');
    await result;
    await Promise.resolve();
    expect(table.get(call.id)).toBeUndefined();
  });
});
