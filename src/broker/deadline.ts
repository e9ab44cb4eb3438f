/**
 * The deadline stage (issue 3 §4, case F18): sets `call.deadline` from the tool's, server's or
 * broker's `timeoutMs` (most specific wins) and aborts `call.signal` when it passes, which
 * cancels the upstream request (`notifications/cancelled`). A passed deadline settles the call
 * as `timeout`; a downstream cancel as `cancelled`. With `extendOnProgress`, each progress
 * update moves the deadline to `now + timeoutMs`, never past `maxTotalTimeoutMs` after this stage
 * began (time spent before it, such as an approval prompt, does not count).
 */
import { cancellationFollowing, type CancelSignal } from '../shared/cancel.js';
import type { Clock } from '../shared/clock.js';
import { splitStage, type Stage } from './runner.js';
import { refuse, type BrokerCall } from './types.js';

export interface DeadlineDeps {
  clock: Clock;
  /** The call's `timeoutMs`: per tool, else per server, else `broker.timeoutMs`. */
  timeoutFor(call: BrokerCall): number;
  extendOnProgress: boolean;
  maxTotalTimeoutMs: number;
}

/** Abort reason at the deadline. */
export class DeadlineExceeded extends Error {
  /**
   * Whether the caller, not the upstream, let the time pass (it did not answer an input request
   * held for it: transports/held-calls.ts): still `timeout`, but no failure for the breaker.
   */
  readonly callersWait: boolean;

  constructor(
    readonly timeoutMs: number,
    /** Set when the hard cap (`maxTotalTimeoutMs`) ended the call rather than `timeoutMs`. */
    readonly maxTotalTimeoutMs?: number,
    /** Whether an input request was held for the caller when it passed (`CallRequest.awaitingCaller`). */
    callersWait = false,
  ) {
    super(maxTotalTimeoutMs !== undefined ? `maxTotalTimeoutMs of ${maxTotalTimeoutMs} ms passed` : `deadline of ${timeoutMs} ms passed`);
    this.name = 'DeadlineExceeded';
    this.callersWait = callersWait;
  }
}

/** Abort reason when the broker shuts down with calls in flight; `message` is the call's recorded reason. */
export class ShuttingDown extends Error {
  constructor(message = 'the broker is shutting down') {
    super(message);
    this.name = 'ShuttingDown';
  }
}

/** What the deadline stage hands from its way in to its way out. */
interface DeadlineTicket {
  /** The signal the call ran under (the deadline aborts it). */
  readonly signal: CancelSignal;
  /** Clears the timer armed last (progress re-arms it). */
  cancelTimer: () => void;
  /** Stops following the downstream signal (a bare call's own controller only). */
  readonly detach: () => void;
}

const NOTHING = () => {};

export function deadlineStage(deps: DeadlineDeps): Stage {
  return splitStage<DeadlineTicket>(
    'deadline',
    (call) => {
      const timeoutMs = deps.timeoutFor(call);
      // Counted from here, not from `call.startedAt`: time spent asking for approval is not the upstream's.
      const start = deps.clock.now();
      const cap = start + deps.maxTotalTimeoutMs;
      call.hardDeadline = deps.extendOnProgress ? cap : Math.min(cap, start + timeoutMs);
      // The broker hands us a signal we may abort (call.abort); a bare call gets one of its own.
      let signal = call.signal;
      let abort = call.abort;
      let detach = NOTHING;
      if (!abort) {
        const followed = cancellationFollowing(call.request.signal, () => new Error('cancelled by the client'));
        const own = followed.own;
        detach = followed.detach;
        abort = (reason) => own.abort(reason);
        signal = own;
      }
      const abortAt = abort;

      const ticket: DeadlineTicket = { signal, cancelTimer: NOTHING, detach };
      const arm = (at: number) => {
        ticket.cancelTimer();
        call.deadline = Math.min(at, cap);
        const capped = at > cap ? deps.maxTotalTimeoutMs : undefined;
        const delay = Math.max(0, call.deadline - deps.clock.now());
        // Whether the caller is holding it up is read now: the abort ends the held request.
        ticket.cancelTimer = deps.clock.setTimer(delay, () => abortAt(new DeadlineExceeded(timeoutMs, capped, call.request.awaitingCaller?.() === true)));
      };
      arm(deps.clock.now() + timeoutMs);
      call.signal = signal;
      if (deps.extendOnProgress) {
        // Progress moves the deadline even when the client itself asked for no progress.
        const forward = call.onProgress;
        call.onProgress = (update) => {
          if (!signal.aborted) arm(deps.clock.now() + timeoutMs);
          forward?.(update);
        };
      }
      return ticket;
    },
    (call, ticket) => {
      ticket.cancelTimer();
      ticket.detach();
      const { signal } = ticket;
      if (signal.aborted && ((call.outcome !== 'ok' && call.outcome !== 'tool_error') || call.endedAs !== undefined)) {
        const reason = signal.reason ?? new Error('cancelled by the client');
        const after = call.endedAs !== undefined ? `; ${call.endedAs}` : '';
        // No attempt sent: the deadline passed before (a call waiting its turn at an upstream's owner gate).
        const cancelled = call.attempts > 0 ? 'the upstream request was cancelled' : 'nothing was sent';
        if (reason instanceof DeadlineExceeded) {
          refuse(call, 'timeout', `${reason.message}; ${cancelled}${after}`);
          if (reason.callersWait) call.callersWait = true;
        } else refuse(call, 'cancelled', `${reason instanceof ShuttingDown ? reason.message : 'cancelled by the client'}${after}`);
      }
    },
  );
}
