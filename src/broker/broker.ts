/**
 * The broker: runs every `tools/call` through the ordered call path and turns the settled call
 * into an answer (seed 002_7bce204a86c1c7ba.txt; DESIGN.md "Contract").
 *
 * A refusal is a `CallToolResult` with `isError: true`, one line of text naming the outcome and
 * reason, and `_meta` with the outcome and call id, so the model can react. A result that
 * carries the upstream's body keeps every block, `structuredContent` and `_meta` key, with the
 * outcome and call id added to `_meta`. A call the judge settled by asking a modern caller
 * through an input request (`call.inputRequired`) is answered with that `input_required`
 * result, its `_meta` carrying the outcome (`approval_required`) and call id the same way; so is a
 * modern upstream's `input_required` relayed to a modern caller (outcome `ok`, broker/relay-input.ts).
 */
import type { CallToolResult, InputRequiredResult } from '@modelcontextprotocol/server';
import type { Clock } from '../shared/clock.js';
import { cancellationFollowing } from '../shared/cancel.js';
import { extend } from '../shared/extend.js';
import { newCallId } from '../shared/ids.js';
import { InflightTable } from '../shared/inflight.js';
import { MemoryRelief } from '../shared/memory-relief.js';
import { withMeta } from '../wire/raw-json.js';
import { ShuttingDown } from './deadline.js';
import { compose, type Stage } from './runner.js';
import { CALL_ID_META_KEY, carriesResult, OUTCOME_META_KEY, OUTCOME_STATUS, type Outcome } from './outcomes.js';
import type { BrokerCall, CallerSession, CallRecord, CallRequest, ToolTarget, WireError } from './types.js';

/** What the broker answered for one call. */
export interface BrokerAnswer {
  readonly callId: string;
  readonly outcome: Outcome;
  /** HTTP status of the outcome (Contract table). */
  readonly status: number;
  /**
   * What an MCP client receives: a `CallToolResult`, or for a modern caller asked for approval
   * an `InputRequiredResult` (`resultType: 'input_required'`; outcome `approval_required`).
   */
  readonly result: CallToolResult | InputRequiredResult;
  readonly reason?: string;
  /** The record as written; absent when it could not be written, or is deferred (`BrokerCall.recordDeferred`). */
  readonly record?: CallRecord;
  /** The resolved target, when the name was known. */
  readonly target?: ToolTarget;
  /** Upstream invocations sent (0: nothing reached the upstream, so nothing can have landed). */
  readonly attempts: number;
  /**
   * The `_meta["mcp-broker/rollback"]` of a result that came back but was refused (`withheld`),
   * scrubbed: the work landed though the body is withheld. Absent otherwise (a result that
   * reaches the caller carries its own).
   */
  readonly rollback?: unknown;
  /** Set when the caller is to get a JSON-RPC error instead of `result` (a refused `requestState`: -32602). */
  readonly requestError?: { readonly code: number; readonly message: string; readonly data?: unknown };
  /**
   * The upstream's JSON-RPC error to answer the caller with instead of `result` (-32042, URL
   * elicitation required; `BrokerCall.wireError`), when the call settled `upstream_error` on it.
   * The transport decides whether this caller may get it (it declared URL-mode elicitation).
   */
  readonly wireError?: WireError;
}

/** A call in flight: its answer to come (set once `run` has begun), and how to abort it. */
interface CallInFlight {
  running?: Promise<unknown>;
  abort: (reason: unknown) => void;
}

export class Broker {
  private readonly path: (call: BrokerCall) => Promise<void>;
  /** Aborted by `drain()`: every call in flight is cancelled, answered and recorded. */
  private readonly closing = new AbortController();
  /** Whether `drain()` was called: the broker is shutting down and cancels every call. */
  get draining(): boolean {
    return this.closing.signal.aborted;
  }
  /**
   * Each call in flight, by a number of ours: its answer to come, and how to abort it (its
   * signal), for `drain()`. An {@link InflightTable}: it keeps nothing of a settled call.
   */
  private readonly inflight = new InflightTable<number, CallInFlight>();
  private callSeq = 0;
  /** Collects the garbage of large results once the broker goes quiet (shared/memory-relief.ts). */
  private readonly relief = new MemoryRelief();

  /**
   * Told of every settled call with its answer (results scrubbed and evaluated), before the
   * caller is answered: the task engine keeps a parked call's answer in its row. Must not throw.
   */
  onSettled?: (call: BrokerCall, answer: BrokerAnswer) => void | Promise<void>;

  constructor(
    stages: readonly Stage[],
    private readonly clock: Clock,
  ) {
    this.path = compose(stages);
  }

  /** Runs one call through every stage. Never throws; a throw escaping the path (a bug) rejects the returned promise only. */
  call(request: CallRequest, session: CallerSession, target?: ToolTarget): Promise<BrokerAnswer> {
    // The call's signal: the request's own when its owner lets us abort it, else one of ours that
    // follows it. Either way `drain()` can abort it. (Not `AbortSignal.any`: on Node 20 that took
    // ~10 µs a call and kept a WeakRef per call on the long-lived closing signal; issue 6.)
    let abort = request.abort;
    let done = () => {};
    if (!abort) {
      const { own, detach } = cancellationFollowing(request.signal);
      done = detach;
      abort = (reason) => own.abort(reason);
      request = extend(request, { signal: own, abort });
    }
    if (this.closing.signal.aborted) abort(this.closing.signal.reason);
    const key = ++this.callSeq;
    const entry: CallInFlight = { abort };
    this.inflight.set(key, entry);
    const running = this.run(request, session, target);
    entry.running = running;
    // Both sides of `running` handled here: a throw that escaped `run` (a bug) reaches the caller
    // through `running`, never this process as an unhandled rejection.
    const settle = () => {
      this.inflight.delete(key);
      done();
    };
    running.then(
      (answer) => {
        settle();
        this.relief.noteLarge(answer.record?.bytesOut ?? 0);
      },
      settle,
    );
    return running;
  }

  /**
   * Counts `running`, a judged request outside the call path (a prompt, resource or completion
   * request, to its answer: broker/primitive-judge.ts), as in flight until it settles:
   * `drain()` calls `abort` with its reason (at once when the broker is draining already) and
   * waits for `running` as for a call.
   */
  hold(running: Promise<unknown>, abort: (reason: unknown) => void): void {
    if (this.closing.signal.aborted) abort(this.closing.signal.reason);
    const key = ++this.callSeq;
    this.inflight.set(key, { running, abort });
    const settle = () => void this.inflight.delete(key);
    running.then(settle, settle);
  }

  /**
   * Shutdown: cancels every call in flight (outcome `cancelled`, reason `reason.message`, by
   * default "the broker is shutting down") and waits up to `timeoutMs` for their answers and
   * records. Calls made afterwards are cancelled at once.
   */
  async drain(timeoutMs: number, reason: ShuttingDown = new ShuttingDown()): Promise<void> {
    this.closing.abort(reason);
    this.relief.stop();
    for (const { abort } of this.inflight.values()) abort(this.closing.signal.reason);
    if (!this.inflight.size) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(this.inflight.values().map((c) => c.running)),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timer);
  }

  private async run(request: CallRequest, session: CallerSession, target?: ToolTarget): Promise<BrokerAnswer> {
    const call: BrokerCall = {
      callId: newCallId(),
      request,
      session,
      startedAt: this.clock.now(),
      target,
      signal: request.signal,
      abort: request.abort,
      onProgress: request.onProgress,
      attempts: 0,
      bytesOut: 0,
      notes: {},
    };
    await this.path(call);
    const outcome = call.outcome ?? 'guard_error';
    const answer: BrokerAnswer = {
      callId: call.callId,
      outcome,
      status: OUTCOME_STATUS[outcome],
      result: toCallToolResult(call, outcome),
      reason: call.reason,
      record: call.record,
      target: call.target,
      attempts: call.attempts,
      ...(call.rollback !== undefined && !carriesResult(outcome) ? { rollback: call.rollback } : {}),
      ...(call.requestError && { requestError: call.requestError }),
      ...(call.wireError !== undefined && outcome === 'upstream_error' ? { wireError: call.wireError } : {}),
    };
    const told = this.onSettled?.(call, answer);
    if (told) await told;
    return answer;
  }
}

function toCallToolResult(call: BrokerCall, outcome: Outcome): CallToolResult | InputRequiredResult {
  const meta = { [OUTCOME_META_KEY]: outcome, [CALL_ID_META_KEY]: call.callId };
  if ((outcome === 'approval_required' || outcome === 'ok') && call.inputRequired) return { ...call.inputRequired, _meta: { ...call.inputRequired._meta, ...meta } };
  if (carriesResult(outcome) && call.result) {
    // Same object as a spread; a large result that passed through unchanged keeps its bytes (issue 6).
    return withMeta(call.result, meta);
  }
  const reason = call.reason ? `: ${call.reason}` : '';
  return { content: [{ type: 'text', text: `${outcome}${reason}` }], isError: true, _meta: meta };
}
