/**
 * Held calls: a modern (2026-07-28) caller's `tools/call` during which a legacy (2025-11-25)
 * upstream sent `sampling/createMessage`, `elicitation/create` or `roots/list`. The 2026 era has
 * no server-to-client requests, so the call is answered at once with `input_required`: one input
 * request (the upstream's, scrubbed, as it sent it) under a key namespaced by the upstream
 * (`<server>/<round>`), and a sealed `requestState` (broker/held-state.ts). The upstream's request
 * is held open and the broker path keeps running; the client's retry (same tool, arguments and
 * principal, with `inputResponses` and that state) answers the held request and joins the call in
 * flight: it gets the call's result, or the next `input_required` when the upstream asks again.
 * The retry never runs the tool a second time and writes no record: the call writes its one
 * record when it ends. A refused retry (its state altered, expired, issued for another principal,
 * tool or arguments, or for a round answered already) answers nothing and leaves a record of its
 * own, as any refused state: `invalid_arguments`, 0 attempts (session.ts, broker/judge.ts).
 *
 * Bound: a held request waits at most `policy.askTimeoutMs` (src/config/schema.ts) for the
 * retry; the state expires then too. Past it the upstream's request is answered with an error
 * (-32603) and the call is cancelled, recorded `timeout` with the reason
 * {@link InputNotAnswered}.
 *
 * Held calls live in the memory of one broker process (a table per gateway): a retry must reach
 * the process that answered `input_required`. Elsewhere its state still opens (the key is in the
 * shared store) but names no held call there, and the retry is refused (`invalid_arguments`) with a reason
 * that says so.
 */
import { randomUUID } from 'node:crypto';
import { ProtocolError, ProtocolErrorCode, type InputRequiredResult } from '@modelcontextprotocol/server';
import { DeadlineExceeded } from '../broker/deadline.js';
import { HeldStates } from '../broker/held-state.js';
import type { SealedStates } from '../broker/sealed-state.js';
import type { Clock } from '../shared/clock.js';

/** One upstream request, as the broker path routes it toward the caller. */
export interface HeldRequest {
  readonly method: string;
  readonly params?: Record<string, unknown>;
}

/** Abort reason of a held call whose caller did not retry in time: recorded as `timeout`. */
export class InputNotAnswered extends DeadlineExceeded {
  /** The caller's wait, not the upstream's failure: the breaker leaves it be (broker/breaker.ts). */
  constructor(boundMs: number, method: string) {
    super(boundMs, undefined, true);
    this.message = `the caller did not answer the upstream's ${method} (an input request) within policy.askTimeoutMs (${boundMs} ms)`;
    this.name = 'InputNotAnswered';
  }
}

interface Pending {
  readonly round: number;
  readonly key: string;
  readonly request: HeldRequest;
  /** When the held request is given up, in ms since the epoch (the broker's clock). */
  readonly expiresAt: number;
  readonly resolve: (response: Record<string, unknown>) => void;
  /** Whether a caller has been handed this request already. */
  announced: boolean;
}

/** What happened next in a held call: the upstream asked (hand `pending` to the caller) or the call ended. */
export type HeldEvent =
  | { readonly kind: 'asked'; readonly key: string; readonly request: HeldRequest; readonly round: number; readonly expiresAt: number }
  | { readonly kind: 'done'; readonly ok: true; readonly value: unknown }
  | { readonly kind: 'done'; readonly ok: false; readonly err: unknown };

export interface HeldCallOptions {
  /** Server key of the upstream, the namespace of the input request keys. */
  readonly server: string;
  readonly clock: Clock;
  /** How long a held request waits for the retry, in ms (`policy.askTimeoutMs`). */
  readonly boundMs: number;
  /** Ends the call (its broker path's abort) when a held request was not answered in time. */
  readonly abort: (reason: unknown) => void;
}

/**
 * One modern call whose upstream may ask for input. Owned by the request that started it; put in
 * {@link HeldCalls} once it has answered `input_required`, and removed when the call ends.
 */
export class HeldCall {
  readonly id = randomUUID();
  /** Whether the call was approved at its first round (a policy `ask`): sealed into its held states (`HeldClaim.approved`). */
  approved = false;
  private round = 0;
  /**
   * The upstream requests held now, by round, oldest first. Usually one; several when the
   * upstream sends another before the first is answered (server-everything's own `roots/list`
   * at start, say): each is handed to the caller in turn, and answered by its own round.
   */
  private readonly pending = new Map<number, Pending>();
  private ended?: HeldEvent & { kind: 'done' };
  private wake?: () => void;
  /** Told once the call has ended and no upstream request is held any more ({@link whenDrained}). */
  private drained?: () => void;

  constructor(private readonly options: HeldCallOptions) {}

  /** Follows the call's broker path: its end is the last event. */
  attach(result: Promise<unknown>): void {
    result.then(
      (value) => this.end({ kind: 'done', ok: true, value }),
      (err) => this.end({ kind: 'done', ok: false, err }),
    );
  }

  /** Whether an upstream request is held for the caller's retry now. */
  get holding(): boolean {
    return this.pending.size > 0;
  }

  /** Whether the call has ended. */
  get isDone(): boolean {
    return this.ended !== undefined;
  }

  /**
   * Holds one upstream request until a retry answers it ({@link answer}); resolves with the
   * caller's response. Rejects at the bound (-32603, and the call is ended), or when the upstream
   * gives up on it (`signal`).
   */
  hold(request: HeldRequest, signal: AbortSignal): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const round = ++this.round;
      const { boundMs, clock } = this.options;
      const drop = () => {
        this.pending.delete(round);
        signal.removeEventListener('abort', onAbort);
        if (this.ended && !this.pending.size) this.drained?.();
      };
      const onAbort = () => {
        cancelTimer();
        drop();
        reject(signal.reason);
      };
      const cancelTimer = clock.setTimer(boundMs, () => {
        drop();
        reject(new ProtocolError(ProtocolErrorCode.InternalError, `the client did not answer ${request.method} within ${boundMs} ms`));
        this.options.abort(new InputNotAnswered(boundMs, request.method));
      });
      signal.addEventListener('abort', onAbort, { once: true });
      this.pending.set(round, {
        round,
        key: `${this.options.server}/${round}`,
        request,
        expiresAt: clock.now() + boundMs,
        resolve: (response) => {
          cancelTimer();
          drop();
          resolve(response);
        },
        announced: false,
      });
      this.wake?.();
    });
  }

  /**
   * The next thing a caller is to be told: the oldest held request not yet handed to anyone (or,
   * with `again`, the request of that round held now even if it was), or the call's end.
   */
  async next(again?: number): Promise<HeldEvent> {
    for (;;) {
      if (this.ended) return this.ended;
      const repeat = again === undefined ? undefined : this.pending.get(again);
      const p = repeat ?? [...this.pending.values()].find((q) => !q.announced);
      if (p) {
        p.announced = true;
        return { kind: 'asked', key: p.key, request: p.request, round: p.round, expiresAt: p.expiresAt };
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
      again = undefined;
    }
  }

  /** The round and key of the request of `round` if it is held now (else undefined); without `round`, the oldest held. */
  held(round?: number): { round: number; key: string } | undefined {
    const p = round === undefined ? this.pending.values().next().value : this.pending.get(round);
    return p && { round: p.round, key: p.key };
  }

  /** Answers the held request of `round` with the caller's response: false when that round is not held (answered, or given up). */
  answer(round: number, response: Record<string, unknown>): boolean {
    const p = this.pending.get(round);
    if (!p) return false;
    p.resolve(response);
    return true;
  }

  /**
   * Calls `fn` once the call has ended and holds no upstream request: at once if so now. A call
   * can end while a request it handed out waits for the caller's retry (an upstream's own
   * `roots/list` at start, answered after the tool); that retry still answers it and gets the
   * call's result.
   */
  whenDrained(fn: () => void): void {
    if (this.ended && !this.pending.size) fn();
    else this.drained = fn;
  }

  private end(event: HeldEvent & { kind: 'done' }): void {
    this.ended = event;
    this.wake?.();
    if (!this.pending.size) this.drained?.();
  }
}

/** The held calls of one broker process, by id. */
export class HeldCalls {
  private readonly calls = new Map<string, HeldCall>();

  /** `states`: seals and opens the `requestState`s of the held calls' answers. */
  constructor(readonly states: HeldStates) {}

  /**
   * Keeps `call` findable by its id until it has ended and holds no upstream request (a request
   * handed out before the end is still answered by its retry, bounded by `policy.askTimeoutMs`).
   */
  park(call: HeldCall, result: Promise<unknown>): void {
    this.calls.set(call.id, call);
    const remove = () => call.whenDrained(() => this.calls.delete(call.id));
    result.then(remove, remove);
  }

  get(id: string): HeldCall | undefined {
    return this.calls.get(id);
  }

  get size(): number {
    return this.calls.size;
  }
}

const tables = new WeakMap<object, HeldCalls>();

/** The held-call table of `owner` (the gateway): one per broker process and gateway; its states sealed by `sealed` (the gateway's codec). */
export function heldCallsOf(owner: object, sealed: SealedStates): HeldCalls {
  let table = tables.get(owner);
  if (!table) tables.set(owner, (table = new HeldCalls(new HeldStates(sealed))));
  return table;
}

/** The `input_required` answer handing `event`'s request to the caller under `requestState`. */
export function heldInputRequired(event: HeldEvent & { kind: 'asked' }, requestState: string): InputRequiredResult {
  return { resultType: 'input_required', inputRequests: { [event.key]: event.request as never }, requestState } as InputRequiredResult;
}
