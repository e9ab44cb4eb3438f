import { describe, expect, it } from 'vitest';
import { deadlineStage, DeadlineExceeded } from '../../src/broker/deadline.js';
import { compose } from '../../src/broker/runner.js';
import { refuse, type BrokerCall } from '../../src/broker/types.js';
import type { CancelSignal } from '../../src/shared/cancel.js';
import { ManualClock } from '../../src/shared/clock.js';
import { call, fakeInvoke, target, text } from './support.js';

/** An upstream that answers only when told, and fails the attempt when its signal aborts (as the SDK does). */
function slowUpstream() {
  const seen: CancelSignal[] = [];
  let answer: (() => void) | undefined;
  const invoke = fakeInvoke(
    (c) =>
      new Promise<void>((resolve) => {
        seen.push(c.signal);
        c.signal.addEventListener('abort', () => {
          refuse(c, 'upstream_error', 'Request aborted');
          resolve();
        });
        answer = () => {
          c.outcome = 'ok';
          c.result = text('done');
          resolve();
        };
      }),
  );
  return { invoke, seen, answer: () => answer?.() };
}

function setup(options: { timeoutMs?: number; extendOnProgress?: boolean; maxTotalTimeoutMs?: number } = {}) {
  const clock = new ManualClock();
  const upstream = slowUpstream();
  const run = compose([
    deadlineStage({
      clock,
      timeoutFor: () => options.timeoutMs ?? 1000,
      extendOnProgress: options.extendOnProgress ?? false,
      maxTotalTimeoutMs: options.maxTotalTimeoutMs ?? 10_000,
    }),
    upstream.invoke,
  ]);
  const start = (c: BrokerCall = call({ target: target(), startedAt: clock.now() })) => ({ c, done: run(c) });
  return { clock, upstream, start };
}

describe('deadline stage', () => {
  it('F18: at the deadline the attempt signal aborts (the upstream request is cancelled) and the call is timeout', async () => {
    const { clock, upstream, start } = setup({ timeoutMs: 1000 });
    const { c, done } = start();
    await clock.advance(999);
    expect(upstream.seen[0]!.aborted).toBe(false);
    await clock.advance(1);
    await done;
    expect(upstream.seen[0]!.aborted).toBe(true);
    expect(upstream.seen[0]!.reason).toBeInstanceOf(DeadlineExceeded);
    expect(c.outcome).toBe('timeout');
    expect(c.reason).toContain('1000 ms');
    expect(c.reason).toContain('cancelled');
  });

  it('an answer before the deadline is ok and leaves no timer behind', async () => {
    const { clock, upstream, start } = setup();
    const { c, done } = start();
    await clock.advance(500);
    upstream.answer();
    await done;
    expect(c.outcome).toBe('ok');
    expect(clock.pending).toBe(0);
  });

  it('a downstream cancel is cancelled, not timeout', async () => {
    const { clock, start } = setup();
    const controller = new AbortController();
    const { c, done } = start(call({ target: target(), startedAt: clock.now(), request: { signal: controller.signal } }));
    controller.abort();
    await done;
    expect(c.outcome).toBe('cancelled');
  });

  it('F18: with extendOnProgress, progress moves the deadline to now + timeoutMs, even when the client asked for no progress', async () => {
    const { clock, upstream, start } = setup({ timeoutMs: 1000, extendOnProgress: true });
    const { c, done } = start();
    await clock.advance(800);
    c.onProgress?.({ progress: 1 });
    expect(c.deadline).toBe(c.startedAt + 1800);
    await clock.advance(900); // t = 1700: past the first deadline, inside the extended one
    expect(upstream.seen[0]!.aborted).toBe(false);
    await clock.advance(100);
    await done;
    expect(c.outcome).toBe('timeout');
  });

  it('F18: progress never extends past maxTotalTimeoutMs', async () => {
    const { clock, upstream, start } = setup({ timeoutMs: 1000, extendOnProgress: true, maxTotalTimeoutMs: 2500 });
    const { c, done } = start();
    expect(c.hardDeadline).toBe(c.startedAt + 2500);
    for (let t = 0; t < 2400; t += 600) {
      await clock.advance(600);
      c.onProgress?.({ progress: 1 });
    }
    expect(c.deadline).toBe(c.startedAt + 2500);
    await clock.advance(2500 - (clock.now() - c.startedAt) - 1);
    expect(upstream.seen[0]!.aborted).toBe(false);
    await clock.advance(1);
    await done;
    expect(c.outcome).toBe('timeout');
  });

  it('without extendOnProgress, progress does not move the deadline', async () => {
    const { clock, start } = setup({ timeoutMs: 1000, extendOnProgress: false });
    const { c, done } = start();
    expect(c.hardDeadline).toBe(c.startedAt + 1000);
    await clock.advance(900);
    c.onProgress?.({ progress: 1 });
    expect(c.deadline).toBe(c.startedAt + 1000);
    await clock.advance(100);
    await done;
    expect(c.outcome).toBe('timeout');
  });

  it('timeoutMs larger than maxTotalTimeoutMs is capped', async () => {
    const { clock, start } = setup({ timeoutMs: 50_000, maxTotalTimeoutMs: 3000 });
    const { c, done } = start();
    expect(c.deadline).toBe(c.startedAt + 3000);
    await clock.advance(3000);
    await done;
    expect(c.outcome).toBe('timeout');
  });
});

describe('deadline stage after a slow judge', () => {
  it('time spent before the stage (an approval prompt) does not eat into the deadline or the cap', async () => {
    const clock = new ManualClock();
    const upstream = slowUpstream();
    const run = compose([deadlineStage({ clock, timeoutFor: () => 1000, extendOnProgress: false, maxTotalTimeoutMs: 5000 }), upstream.invoke]);
    const c = call({ target: target(), startedAt: clock.now() });
    await clock.advance(60_000); // the human took a minute to approve
    const done = run(c);
    expect(c.deadline).toBe(clock.now() + 1000);
    expect(c.hardDeadline).toBe(clock.now() + 1000);
    await clock.advance(999);
    expect(upstream.seen[0]!.aborted).toBe(false);
    await clock.advance(1);
    await done;
    expect(c.outcome).toBe('timeout');
  });
});
