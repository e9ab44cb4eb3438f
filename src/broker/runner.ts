/**
 * The broker runner: composes ordered stages into one call path (after hono's `compose`).
 *
 * A stage is `(call, next) => Promise<void>`: work before `next()` runs on the way in, work
 * after it on the way out (scrub, evaluate and record act on the way out). A stage that does
 * not call `next()` has settled the call. A throw from any stage is turned into `guard_error`
 * at one boundary here (fail closed: the result is withheld) and never escapes `run`.
 * `next()` may be called again once the previous call returned (the retry stage does), never
 * while one is still running.
 */
import { CALL_TIMING, markCall } from '../shared/call-timing.js';
import { messageOf } from '../shared/errors.js';
import type { BrokerCall } from './types.js';
import { refuse } from './types.js';

export type Next = () => Promise<void>;

/** One step of the broker path. */
export interface Stage {
  /** Shown in `guard_error` reasons and logs. */
  readonly name: string;
  run(call: BrokerCall, next: Next): Promise<void>;
}

/** Builds the call path from stages, outermost first. */
export function compose(stages: readonly Stage[]): (call: BrokerCall) => Promise<void> {
  return (call) => dispatch(stages, 0, call);
}

async function dispatch(stages: readonly Stage[], index: number, call: BrokerCall): Promise<void> {
  const stage = stages[index];
  if (!stage) return;
  let running = false;
  const next: Next = async () => {
    if (running) throw new Error(`stage "${stage.name}" called next() while it was still running`);
    running = true;
    try {
      await dispatch(stages, index + 1, call);
    } finally {
      running = false;
    }
  };
  if (CALL_TIMING) markCall(`${stage.name} in`);
  try {
    await stage.run(call, next);
  } catch (err) {
    refuse(call, 'guard_error', `${stage.name} failed: ${messageOf(err)}`);
  }
  if (CALL_TIMING) markCall(`${stage.name} out`);
}
