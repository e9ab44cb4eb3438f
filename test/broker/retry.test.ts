import { describe, expect, it } from 'vitest';
import { deadlineStage } from '../../src/broker/deadline.js';
import { retryStage } from '../../src/broker/retry.js';
import { compose } from '../../src/broker/runner.js';
import { refuse, type BrokerCall } from '../../src/broker/types.js';
import { ManualClock } from '../../src/shared/clock.js';
import { call, fakeInvoke, target, text } from './support.js';

/** An upstream that fails `failures` times (retryably unless told otherwise), then answers. */
function flaky(failures: number, options: { retryable?: boolean; retryAfterMs?: number } = {}) {
  return fakeInvoke((c, n) => {
    if (n <= failures) {
      refuse(c, 'upstream_error', 'HTTP 503');
      c.retryable = options.retryable ?? true;
      c.retryAfterMs = options.retryAfterMs;
      return;
    }
    c.outcome = 'ok';
    c.result = text('ok');
  });
}

function setup(invoke: ReturnType<typeof flaky>, options: { maxRetries?: number; random?: () => number; timeoutMs?: number } = {}) {
  const clock = new ManualClock();
  const sleeps: number[] = [];
  const retry = retryStage({
    now: () => clock.now(),
    sleep: (ms, signal) => {
      sleeps.push(ms);
      return clock.sleep(ms, signal);
    },
    maxRetries: options.maxRetries ?? 2,
    baseDelayMs: 200,
    random: options.random ?? (() => 0.5),
  });
  const deadline = deadlineStage({ clock, timeoutFor: () => options.timeoutMs ?? 60_000, extendOnProgress: false, maxTotalTimeoutMs: 600_000 });
  const run = compose([deadline, retry, invoke]);
  /** Runs the call, moving time on until it settles. */
  const settle = async (c: BrokerCall) => {
    let done = false;
    const p = run(c).then(() => (done = true));
    while (!done) await clock.advance(50);
    await p;
    return c;
  };
  return { clock, sleeps, settle };
}

const readCall = () => call({ target: target('fx__read', { tool: { annotations: { readOnlyHint: true } } }), readOnly: true });
const writeCall = () => call({ target: target('fx__write'), readOnly: false });

describe('retry stage', () => {
  it('retries a read-only tool on a retryable failure, at most maxRetries times, with jittered doubling backoff', async () => {
    const invoke = flaky(2);
    const { sleeps, settle } = setup(invoke);
    const c = await settle(readCall());
    expect(c.outcome).toBe('ok');
    expect(c.attempts).toBe(3);
    expect(sleeps).toEqual([100, 200]); // 0.5 · 200 · 2^0, 0.5 · 200 · 2^1
  });

  it('gives up after maxRetries and says how many attempts it made', async () => {
    const invoke = flaky(5);
    const { settle } = setup(invoke);
    const c = await settle(readCall());
    expect(c.outcome).toBe('upstream_error');
    expect(c.attempts).toBe(3);
    expect(invoke.reached).toBe(3);
    expect(c.reason).toContain('after 3 attempts');
  });

  it('never retries a write tool', async () => {
    const invoke = flaky(2);
    const { sleeps, settle } = setup(invoke);
    const c = await settle(writeCall());
    expect(c.outcome).toBe('upstream_error');
    expect(c.attempts).toBe(1);
    expect(sleeps).toEqual([]);
  });

  it('never retries a failure that is not retryable (a protocol error)', async () => {
    const invoke = flaky(2, { retryable: false });
    const { settle } = setup(invoke);
    expect((await settle(readCall())).attempts).toBe(1);
  });

  it('maxRetries 0 disables retry; more than 2 is capped at 2', async () => {
    expect((await setup(flaky(5), { maxRetries: 0 }).settle(readCall())).attempts).toBe(1);
    expect((await setup(flaky(5), { maxRetries: 9 }).settle(readCall())).attempts).toBe(3);
  });

  it('honours Retry-After when it fits inside the deadline', async () => {
    const { sleeps, settle } = setup(flaky(1, { retryAfterMs: 3000 }));
    const c = await settle(readCall());
    expect(sleeps).toEqual([3000]);
    expect(c.outcome).toBe('ok');
  });

  it('does not start a wait that would end past the deadline', async () => {
    const { sleeps, settle } = setup(flaky(1, { retryAfterMs: 5000 }), { timeoutMs: 4000 });
    const c = await settle(readCall());
    expect(sleeps).toEqual([]);
    expect(c.outcome).toBe('upstream_error');
    expect(c.reason).toContain('deadline');
  });

  it('a cancel during the backoff ends the call without another attempt', async () => {
    const invoke = flaky(5, { retryAfterMs: 1000 });
    const clock = new ManualClock();
    const controller = new AbortController();
    const run = compose([
      deadlineStage({ clock, timeoutFor: () => 60_000, extendOnProgress: false, maxTotalTimeoutMs: 600_000 }),
      retryStage({ now: () => clock.now(), sleep: (ms, s) => clock.sleep(ms, s), maxRetries: 2, baseDelayMs: 200 }),
      invoke,
    ]);
    const c = call({ target: target(), readOnly: true, request: { signal: controller.signal } });
    const done = run(c);
    await clock.advance(500);
    controller.abort();
    await done;
    expect(invoke.reached).toBe(1);
    expect(c.outcome).toBe('cancelled');
  });

  it.each([
    ['throws at once', (): never => {
      throw new Error('no clock');
    }, { outcome: 'upstream_error', reason: 'HTTP 503', attempts: 1 }],
    ['gives back no promise', (): undefined => undefined, { outcome: 'ok', reason: undefined, attempts: 2 }],
  ] as const)('a sleep that %s is taken as await takes it: a throw stops retrying quietly, a bare value waits for nothing', async (_what, sleep, expected) => {
    const retry = retryStage({ now: () => 0, sleep: sleep as never, maxRetries: 2, baseDelayMs: 200, random: () => 0.5 });
    const c = readCall();
    await compose([retry, flaky(1)])(c);
    expect({ outcome: c.outcome, reason: c.reason, attempts: c.attempts }).toEqual(expected);
  });
});
