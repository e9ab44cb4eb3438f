/**
 * The broker runner: composes ordered stages into one call path (after hono's `compose`).
 *
 * A stage is `(call, next) => Promise<void>`: work before `next()` runs on the way in, work
 * after it on the way out (scrub, evaluate and record act on the way out). A stage that does
 * not call `next()` has settled the call. A throw from any stage is turned into `guard_error`
 * at one boundary here (fail closed: the result is withheld) and never escapes `run`.
 * `next()` may be called again once the previous call returned (the derived `run` of a stage
 * with `again` does: retry's under a wrapper), never while one is still running.
 *
 * A stage also comes in two halves ({@link splitStage}): `enter` on the way in, `leave` on the
 * way out, with a ticket from one to the other, and, for a stage that may send the call through
 * its inner stages again (retry), `again` between the two. The runner walks runs of such stages
 * in one loop instead of one suspended async frame per stage and per `next()` (issue 19: the
 * broker's CPU per call; some 30 promises and frames a call fewer), with the same order, the same
 * settling and the same error boundary at the same stage; their `run` is derived from the
 * halves, for anyone composing by hand (and for wrappers such as the tracer's).
 */
import { CALL_TIMING, markCall } from '../shared/call-timing.js';
import { messageOf } from '../shared/errors.js';
import type { BrokerCall } from './types.js';
import { refuse } from './types.js';

export type Next = () => Promise<void>;

/** What `enter` returns to settle the call there: the inner stages and this stage's `leave` do not run. */
export const SETTLED = false;

/** One step of the broker path. */
export interface Stage {
  /** Shown in `guard_error` reasons and logs. */
  readonly name: string;
  run(call: BrokerCall, next: Next): Promise<void>;
  /**
   * The way in of a stage that wraps its inner stages once: {@link SETTLED} when it settled the
   * call, else a ticket handed to `leave` (anything but `false`). May return a promise when it
   * must wait; a stage whose common case needs no wait returns its ticket at once, so the call
   * keeps its turn. Set by {@link splitStage}, with `leave` and a `run` made of both.
   */
  readonly enter?: (call: BrokerCall) => unknown;
  /** The way out, given `enter`'s ticket, once the inner stages have settled the call. May return a promise. */
  readonly leave?: (call: BrokerCall, ticket: never) => void | PromiseLike<void>;
  /**
   * Asked, with `enter`'s ticket, each time the inner stages have settled the call, before
   * `leave`: `true` sends the call through the inner stages once more (each entering and leaving
   * again), `false` goes on to `leave`. May return a promise (a backoff's wait). A throw is this
   * stage's `guard_error`, and `leave` still runs. Only with `enter`.
   */
  readonly again?: (call: BrokerCall, ticket: never) => boolean | PromiseLike<boolean>;
}

/**
 * A stage in two halves (see the module comment). Its `run(call, next)` is `enter`, then
 * `next()` (again while `again` says so), then `leave`, waiting only on what returns a promise:
 * a stage whose halves answer at once calls `next()` in the same turn.
 */
export function splitStage<T>(
  name: string,
  enter: (call: BrokerCall) => T | typeof SETTLED | PromiseLike<T | typeof SETTLED>,
  leave?: (call: BrokerCall, ticket: T) => void | PromiseLike<void>,
  again?: (call: BrokerCall, ticket: T) => boolean | PromiseLike<boolean>,
): Stage {
  return {
    name,
    enter,
    leave: leave as Stage['leave'],
    again: again as Stage['again'],
    run(call, next) {
      const entered = enter(call);
      if (isThenable(entered)) return Promise.resolve(entered).then((ticket) => around(ticket as T | typeof SETTLED));
      return around(entered);
      async function around(ticket: T | typeof SETTLED): Promise<void> {
        if (ticket === SETTLED) return;
        await next();
        if (again) {
          try {
            while (await again(call, ticket)) await next();
          } catch (err) {
            stageFailed(call, name, err);
          }
        }
        await leave?.(call, ticket);
      }
    },
  };
}

/** Builds the call path from stages, outermost first. */
export function compose(stages: readonly Stage[]): (call: BrokerCall) => Promise<void> {
  return (call) => runFrom(stages, 0, call);
}

/** A stage's own throw: the call is `guard_error` naming the stage (fail closed: the result is withheld). */
function stageFailed(call: BrokerCall, name: string, err: unknown): void {
  refuse(call, 'guard_error', `${name} failed: ${messageOf(err)}`);
}

const isThenable = (value: unknown): value is PromiseLike<unknown> => typeof (value as { then?: unknown } | null | undefined)?.then === 'function';

/**
 * Runs `stages[from..]` on `call`; never rejects. Split stages enter in order until one settles
 * the call or a stage without halves is reached, which runs with a `next()` that continues here;
 * then the split stages that entered leave, innermost first. A stage whose `again` answers
 * `true` on the way out sends the call through the stages inside it once more (they entered and
 * left already), and is asked again when they have.
 */
async function runFrom(stages: readonly Stage[], from: number, call: BrokerCall): Promise<void> {
  const tickets: unknown[] = [];
  let i = from;
  for (;;) {
    for (; i < stages.length; i++) {
      const stage = stages[i]!;
      if (!stage.enter) {
        await dispatch(stages, i, call);
        break;
      }
      if (CALL_TIMING) markCall(`${stage.name} in`);
      let ticket: unknown;
      try {
        ticket = stage.enter(call);
        if (isThenable(ticket)) ticket = await ticket;
      } catch (err) {
        stageFailed(call, stage.name, err);
        ticket = SETTLED;
      }
      if (ticket === SETTLED) {
        if (CALL_TIMING) markCall(`${stage.name} out`);
        break;
      }
      tickets.push(ticket);
    }
    let repeat = -1;
    for (let k = tickets.length - 1; k >= 0; k--) {
      const stage = stages[from + k]!;
      if (stage.again) {
        try {
          const asked = stage.again(call, tickets[k] as never);
          if (isThenable(asked) ? await asked : asked) {
            repeat = k;
            break;
          }
        } catch (err) {
          stageFailed(call, stage.name, err);
        }
      }
      try {
        const left = stage.leave?.(call, tickets[k] as never);
        if (isThenable(left)) await left;
      } catch (err) {
        stageFailed(call, stage.name, err);
      }
      if (CALL_TIMING) markCall(`${stage.name} out`);
    }
    if (repeat < 0) return;
    // The stages inside the one that asked for it run again, from the first inside it.
    tickets.length = repeat + 1;
    i = from + repeat + 1;
  }
}

/** Runs a stage without halves, its `next()` continuing the path after it. */
async function dispatch(stages: readonly Stage[], index: number, call: BrokerCall): Promise<void> {
  const stage = stages[index]!;
  let running = false;
  const next: Next = async () => {
    if (running) throw new Error(`stage "${stage.name}" called next() while it was still running`);
    running = true;
    try {
      await runFrom(stages, index + 1, call);
    } finally {
      running = false;
    }
  };
  if (CALL_TIMING) markCall(`${stage.name} in`);
  try {
    await stage.run(call, next);
  } catch (err) {
    stageFailed(call, stage.name, err);
  }
  if (CALL_TIMING) markCall(`${stage.name} out`);
}
