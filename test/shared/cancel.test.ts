import fc from 'fast-check';
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { Cancellation, cancellationFollowing, toAbortSignal, type CancelSignal } from '../../src/shared/cancel.js';

/**
 * One step of a model run: add or remove listener `n`; abort (with a reason, or none); or add a
 * listener `100 + n` that, when it runs, removes listener `other` or aborts again.
 */
type Step =
  | { op: 'add'; n: number }
  | { op: 'remove'; n: number }
  | { op: 'abort'; reason?: string }
  | { op: 'removeOnRun' | 'abortOnRun'; n: number; other: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ op: fc.constant('add' as const), n: fc.nat(4) }),
  fc.record({ op: fc.constant('remove' as const), n: fc.nat(4) }),
  fc.record({ op: fc.constantFrom('removeOnRun' as const, 'abortOnRun' as const), n: fc.nat(4), other: fc.nat(4) }),
  fc.record({ op: fc.constant('abort' as const), reason: fc.option(fc.string({ maxLength: 3 }), { nil: undefined }) }),
);

/** Runs `steps` on one signal and its abort, and returns what was seen: listeners run in order, then aborted and reason. */
function play(steps: Step[], signal: CancelSignal, abort: (reason?: unknown) => void) {
  const ran: number[] = [];
  const listeners = new Map<number, () => void>();
  const listener = (n: number) => {
    let l = listeners.get(n);
    if (!l) listeners.set(n, (l = () => ran.push(n)));
    return l;
  };
  for (const s of steps) {
    if (s.op === 'add') signal.addEventListener('abort', listener(s.n), { once: true });
    else if (s.op === 'remove') signal.removeEventListener('abort', listener(s.n));
    else if (s.op === 'abort') abort(s.reason);
    else {
      // A listener that, while the abort runs, removes or adds another or aborts again.
      const own = () => {
        ran.push(100 + s.n);
        if (s.op === 'removeOnRun') signal.removeEventListener('abort', listener(s.other));
        else abort(`again ${s.other}`);
      };
      listeners.set(100 + s.n, own);
      signal.addEventListener('abort', own, { once: true });
    }
  }
  const reason = signal.reason;
  return { ran, aborted: signal.aborted, reason: reason instanceof DOMException ? `${reason.name}: ${reason.message}` : reason };
}

describe('Cancellation', () => {
  it('behaves as AbortController for any sequence of adds, removes and aborts (listeners run once, in order; the first abort wins)', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 12 }), (steps) => {
        const controller = new AbortController();
        const real = play(steps, controller.signal, (reason) => controller.abort(reason));
        const ours = new Cancellation();
        expect(play(steps, ours, (reason) => ours.abort(reason))).toEqual(real);
      }),
      { numRuns: 500 },
    );
  });

  it('never runs a listener added once the abort has begun, even by a listener while the others run', () => {
    const c = new Cancellation();
    const ran: string[] = [];
    c.addEventListener('abort', () => {
      ran.push('first');
      c.addEventListener('abort', () => ran.push('added while running'));
    });
    c.addEventListener('abort', () => ran.push('second'));
    c.abort();
    c.addEventListener('abort', () => ran.push('added after'));
    c.abort();
    expect(ran).toEqual(['first', 'second']);
  });

  it('throws its reason from throwIfAborted once aborted, and defaults the reason to an AbortError', () => {
    const c = new Cancellation();
    expect(() => c.throwIfAborted()).not.toThrow();
    c.abort();
    expect(c.reason).toBeInstanceOf(DOMException);
    expect((c.reason as DOMException).name).toBe('AbortError');
    expect(() => c.throwIfAborted()).toThrow(c.reason as DOMException);
    const why = new Error('deadline');
    const d = new Cancellation();
    d.abort(why);
    d.abort(new Error('later'));
    expect(d.reason).toBe(why);
  });

  it('makes no AbortController until its signal is read', () => {
    // Counted through the global cancel.ts constructs from.
    const Real = globalThis.AbortController;
    let made = 0;
    globalThis.AbortController = class extends Real {
      constructor() {
        super();
        made++;
      }
    };
    try {
      const quiet = Array.from({ length: 10 }, () => new Cancellation());
      for (const c of quiet) {
        c.addEventListener('abort', () => undefined);
        c.abort(new Error('x'));
      }
      expect(made).toBe(0);
      void quiet[0]!.signal;
      void quiet[0]!.signal;
      expect(made).toBe(1);
    } finally {
      globalThis.AbortController = Real;
    }
  });

  it('aborts its real signal first: inside any listener of either, both read as aborted with one reason', () => {
    const c = new Cancellation();
    const seen: string[] = [];
    const look = (who: string) => () => seen.push(`${who}: ${c.aborted} ${c.signal.aborted} ${c.reason === c.signal.reason}`);
    c.addEventListener('abort', look('own'));
    c.signal.addEventListener('abort', look('real'));
    c.abort(new Error('x'));
    expect(seen).toEqual(['real: true true true', 'own: true true true']);
  });

  it('makes a real AbortSignal only when asked, the same one each time, aborted with the same reason', () => {
    const before = new Cancellation();
    const signal = before.signal;
    expect(signal).toBeInstanceOf(AbortSignal);
    expect(before.signal).toBe(signal);
    let heard: unknown;
    signal.addEventListener('abort', () => (heard = signal.reason));
    const why = new Error('cancelled');
    before.abort(why);
    expect(signal.aborted).toBe(true);
    expect(heard).toBe(why);
    expect(AbortSignal.any([signal]).aborted).toBe(true);

    const after = new Cancellation();
    after.abort(why);
    expect(after.signal.aborted).toBe(true);
    expect(after.signal.reason).toBe(why);
    expect(after.signal).toBe(after.signal);
  });

  it('toAbortSignal passes a real AbortSignal through and gives a Cancellation’s own', () => {
    const real = new AbortController().signal;
    expect(toAbortSignal(real)).toBe(real);
    const c = new Cancellation();
    expect(toAbortSignal(c)).toBe(c.signal);
  });

  it('runs the other listeners when one throws, and throws that error on the next tick, as an AbortSignal does', () => {
    // In a fresh process: the error surfaces as an uncaught exception, as EventTarget's does.
    // (It imports the build, dist/: `npm test` builds first.)
    const script = (make: string) => `
      ${make}
      const ran = [];
      process.on('uncaughtException', (err) => { ran.push('uncaught:' + err.message); });
      target.addEventListener('abort', () => { ran.push('first'); throw new Error('boom'); });
      target.addEventListener('abort', () => ran.push('second'));
      abort();
      ran.push('after abort');
      setTimeout(() => console.log(JSON.stringify(ran)), 10);`;
    const run = (make: string) => execFileSync(process.execPath, ['--input-type=module', '-e', script(make)], { encoding: 'utf8', cwd: process.cwd() }).trim();
    const real = run('const c = new AbortController(); const target = c.signal; const abort = () => c.abort();');
    const ours = run(`const { Cancellation } = await import(${JSON.stringify(new URL('../../dist/shared/cancel.js', import.meta.url).href)}); const target = new Cancellation(); const abort = () => target.abort();`);
    expect(JSON.parse(real)).toEqual(['first', 'second', 'after abort', 'uncaught:boom']);
    expect(JSON.parse(ours)).toEqual(JSON.parse(real));
  });

  it('cancellationFollowing aborts with its source (its reason, else the fallback) until detached', () => {
    const source = new AbortController();
    const { own, detach } = cancellationFollowing(source.signal);
    const why = new Error('client');
    source.abort(why);
    expect(own.reason).toBe(why);

    // A source aborted with no reason (a CancelSignal may have none): the fallback's.
    const fallback = new Error('cancelled by the client');
    const reasonless: CancelSignal = { aborted: true, reason: undefined, throwIfAborted: () => undefined, addEventListener: () => undefined, removeEventListener: () => undefined };
    expect(cancellationFollowing(reasonless, () => fallback).own.reason).toBe(fallback);

    const detached = new AbortController();
    const after = cancellationFollowing(detached.signal);
    after.detach();
    detached.abort();
    expect(after.own.aborted).toBe(false);

    const already = new AbortController();
    already.abort(why);
    expect(cancellationFollowing(already.signal).own.reason).toBe(why);
    detach();
  });
});
