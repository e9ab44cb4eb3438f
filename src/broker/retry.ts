/**
 * The retry stage (seed 002_7bce204a86c1c7ba.txt step 7; issue 3 §5; case F18): retries READ
 * tools only. A call is tried again when the tool is read-only (`call.readOnly`, set by the
 * judge from `annotations.readOnlyHint`, a per-tool `readOnly` or `policy.readOnly`), its last
 * attempt failed retryably (`call.retryable`, set by invoke: transport fault, 429, 5xx), and
 * fewer than `broker.retry.maxRetries` retries (at most 2, default 2) were made. A write, a
 * destructive tool or one with no hint is never retried: a second attempt could apply it twice.
 *
 * Backoff: `baseDelayMs · 2^n` with full jitter (default 200 ms, `config/schema.ts`), or the
 * upstream's `Retry-After` (`call.retryAfterMs`). A wait that would end past the call's deadline
 * is not started; a cancel or the deadline during the wait ends it (the deadline stage settles
 * the outcome). Waits go through the injected `sleep`. Invoke counts `call.attempts`.
 *
 * An upstream that no longer knew the session (`call.sessionLost`, HTTP 404) has opened a new one
 * by the time the attempt settles: a read-only tool is retried on it at once (one of the
 * `maxRetries`). A write is not: the 404 proves this request was not processed, yet what it meant
 * may rest on the lost session's state, so the caller decides; the reason says it was not retried.
 */
import { splitStage, type Stage } from './runner.js';
import type { BrokerCall } from './types.js';
import type { CancelSignal } from '../shared/cancel.js';

export interface RetryDeps {
  now(): number;
  /** Resolves after `ms`; rejects when `signal` aborts first (`Clock.sleep`). */
  sleep(ms: number, signal?: CancelSignal): Promise<void>;
  /** Retries after the first attempt (`broker.retry.maxRetries`, 0–2). */
  maxRetries: number;
  /** First backoff, in ms (`broker.retry.baseDelayMs`). */
  baseDelayMs: number;
  /** Uniform in [0, 1); default `Math.random`. */
  random?: () => number;
}

/** Whether the settled attempt may be tried again. */
export function mayRetry(call: BrokerCall): boolean {
  return call.readOnly === true && call.retryable === true && call.outcome === 'upstream_error' && !call.signal.aborted;
}

/** One call's retries: how many were made, and whether retrying stopped on a wait (the reason then says why, or the deadline stage does). */
interface RetryTicket {
  retries: number;
  stopped: boolean;
}

/**
 * The retry stage, in halves (broker/runner.ts): `again` after each attempt decides on and waits
 * out the next one, `leave` notes on the reason what became of the retries. A call that needs no
 * retry passes in the turn it came (no wait, no frame of its own).
 */
export function retryStage(deps: RetryDeps): Stage {
  const random = deps.random ?? Math.random;
  const maxRetries = Math.min(2, Math.max(0, deps.maxRetries));
  return splitStage<RetryTicket>(
    'retry',
    () => ({ retries: 0, stopped: false }),
    (call, ticket) => {
      if (ticket.stopped) return;
      if (call.sessionLost && call.outcome === 'upstream_error' && call.readOnly !== true && !call.reason?.includes('not retried')) {
        call.reason = `${call.reason ?? 'upstream session lost'}; not retried: the tool is not read-only`;
      }
      if (call.attempts > 1 && call.outcome === 'upstream_error') call.reason = `${call.reason ?? 'upstream failure'} (after ${call.attempts} attempts)`;
    },
    (call, ticket) => {
      if (ticket.retries >= maxRetries || !mayRetry(call)) return false;
      const delay = call.retryAfterMs ?? Math.round(random() * deps.baseDelayMs * 2 ** ticket.retries);
      if (call.deadline !== undefined && deps.now() + delay >= call.deadline) {
        call.reason = `${call.reason ?? 'upstream failure'}; not retried: the next attempt would start after the deadline`;
        ticket.stopped = true;
        return false;
      }
      ticket.retries++;
      const stop = () => {
        ticket.stopped = true; // cancelled or the deadline passed while waiting
        return false;
      };
      let waited: Promise<void>;
      try {
        // Whatever the sleep gives back is waited on as `await` would (a bare value: no wait).
        waited = Promise.resolve(deps.sleep(delay, call.signal));
      } catch {
        return stop();
      }
      return waited.then(() => true, stop);
    },
  );
}
