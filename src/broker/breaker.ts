/**
 * The breaker stage (seed 002_7bce204a86c1c7ba.txt step 5; issue 3 §3; case F08): one circuit
 * per tool (advertised name). After `broker.breaker.threshold` consecutive upstream failures
 * (`upstream_error`, `timeout`) the circuit opens and calls are refused `breaker_open` for
 * `broker.breaker.openMs` (defaults 5 and 60000, `config/schema.ts`). Then it is half-open: one
 * call goes through while others are refused; its failure reopens the circuit, its success
 * closes it. `tool_error` and `invalid_arguments` are answers, not failures: a model's bad
 * arguments never open it, and they count as success. Other outcomes (a cancel) leave it as it is,
 * and so does an `upstream_error` that only says the upstream lost its session (`call.sessionLost`:
 * HTTP 404 for the session, the request not processed, a new session opened) or that it asked
 * for a URL elicitation (-32042, `call.wireError`: the upstream is answering, not failing), and
 * a `timeout` its caller caused by not answering an input request held for it
 * (`call.callersWait`, transports/held-calls.ts: the upstream was waiting on the caller).
 * Only the upstream's own faults count: `call.attempts` counts only attempts that were sent
 * (broker/failure.ts), and a call with none (refused before anything went out, such as
 * arguments too deep to send or an upstream not connected) leaves the circuit as it was.
 * The record carries the state after the call (`call.notes.breaker`).
 */
import type { Clock } from '../shared/clock.js';
import { isUpstreamFailure, type Outcome } from './outcomes.js';
import { SETTLED, splitStage, type Stage } from './runner.js';
import { refuse } from './types.js';

export type BreakerState = 'closed' | 'open' | 'half_open';

export interface BreakerOptions {
  clock: Clock;
  /** Consecutive upstream failures that open a circuit. */
  threshold: number;
  /** How long an open circuit refuses, in ms. */
  openMs: number;
}

interface Circuit {
  failures: number;
  /** When open: the time it turns half-open (ms since the epoch). */
  openUntil?: number;
  /** When half-open: whether the one trial call is in flight. */
  trial: boolean;
}

/** The circuits of every tool. */
export class Breakers {
  private readonly circuits = new Map<string, Circuit>();

  constructor(private readonly options: BreakerOptions) {}

  /** The state of `key` now. */
  state(key: string): BreakerState {
    const c = this.circuits.get(key);
    if (!c || c.openUntil === undefined) return 'closed';
    return this.options.clock.now() < c.openUntil ? 'open' : 'half_open';
  }

  /**
   * Admits a call or says why not. An admitted call in the half-open state is the trial, and
   * must be followed by {@link settle} (or {@link abandon} when it was never invoked).
   */
  admit(key: string): { ok: true; trial: boolean } | { ok: false; state: BreakerState; retryInMs?: number } {
    const c = this.circuits.get(key);
    const state = this.state(key);
    if (!c || state === 'closed') return { ok: true, trial: false };
    if (state === 'open') return { ok: false, state, retryInMs: c.openUntil! - this.options.clock.now() };
    if (c.trial) return { ok: false, state };
    c.trial = true;
    return { ok: true, trial: true };
  }

  /** Settles an admitted call with its outcome; returns the state after it. */
  settle(key: string, outcome: Outcome | undefined, trial: boolean): BreakerState {
    let c = this.circuits.get(key);
    if (outcome && isUpstreamFailure(outcome)) {
      c ??= { failures: 0, trial: false };
      this.circuits.set(key, c);
      c.failures++;
      if (trial || c.failures >= this.options.threshold) {
        c.openUntil = this.options.clock.now() + this.options.openMs;
      }
      if (trial) c.trial = false;
    } else if (outcome === 'ok' || outcome === 'tool_error' || outcome === 'invalid_arguments') {
      // Half-open trial succeeded, or a closed circuit's run of failures is broken.
      if (c && (trial || c.openUntil === undefined)) this.circuits.delete(key);
    } else if (trial) {
      this.abandon(key);
    }
    return this.state(key);
  }

  /** Every breaker that is not closed now: the key (the advertised tool name) and its state, with `until` (ms since the epoch) while open. */
  notClosed(): { name: string; state: BreakerState; until?: number }[] {
    const out: { name: string; state: BreakerState; until?: number }[] = [];
    for (const [name, c] of this.circuits) {
      const state = this.state(name);
      if (state !== 'closed') out.push(state === 'open' ? { name, state, until: c.openUntil } : { name, state });
    }
    return out;
  }

  /** Gives back the trial slot of a call that was admitted and never invoked. */
  abandon(key: string): void {
    const c = this.circuits.get(key);
    if (c) c.trial = false;
  }
}

export function breakerStage(breakers: Breakers): Stage {
  return splitStage(
    'breaker',
    (call) => {
      const key = call.target?.name ?? call.request.name;
      const admitted = breakers.admit(key);
      if (!admitted.ok) {
        call.notes.breaker = admitted.state;
        const wait = admitted.retryInMs !== undefined ? `; it half-opens in ${Math.max(0, Math.ceil(admitted.retryInMs))} ms` : '; a trial call is in flight';
        refuse(call, 'breaker_open', `the breaker of "${key}" is ${admitted.state === 'open' ? 'open' : 'half-open'}${wait}`);
        return SETTLED;
      }
      return { key, trial: admitted.trial };
    },
    (call, { key, trial }) => {
      if (call.attempts > 0) {
        // A lost session, an upstream asking for a URL elicitation (-32042), or a caller that did not answer an input request held for it: not failing.
        const lostSession = call.outcome === 'upstream_error' && (call.sessionLost === true || call.wireError !== undefined);
        const callersWait = call.outcome === 'timeout' && call.callersWait === true;
        call.notes.breaker = breakers.settle(key, lostSession || callersWait ? undefined : call.outcome, trial);
      } else {
        if (trial) breakers.abandon(key);
        call.notes.breaker = breakers.state(key);
      }
    },
  );
}
