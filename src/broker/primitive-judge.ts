/**
 * The policy for every primitive besides tools: `prompts/get`, `resources/read`,
 * `resources/subscribe` and `completion/complete` are judged by the same `policy` as
 * `tools/call` ({@link decidePrimitive}), recorded (one line each, with `kind`), published, and
 * only then answered. Lists (`prompts/list`, `resources/list`, `resources/templates/list`) leave
 * out what the principal is denied ({@link PrimitiveGuard.visible}).
 *
 * Refusals are JSON-RPC errors (these requests have no `isError` result): `denied` and
 * `approval_required` are {@link POLICY_REFUSED_CODE}, `invalid_arguments` (a refused
 * `requestState` of an asked request, below) is -32602, `guard_error` is -32603, each with a
 * one-line message naming the outcome and `data` carrying the outcome and call id under the
 * result `_meta` keys. An upstream's own error passes on as it came (outcome `upstream_error`,
 * `timeout`, `invalid_arguments` or `cancelled` in the record).
 *
 * `ask`: asked through `elicitation/create` when the client declared it (accept → served;
 * decline, dismiss, no answer within `policy.askTimeoutMs` → `approval_required`); without
 * elicitation → `approval_required` at once. A modern caller's retry answering its upstream's
 * input requests is not asked about again: a relay state of the approved round goes on once, a
 * held-request state that opens for the request goes on (its held call checks the round), and
 * either state refused is `invalid_arguments` (-32602) as without `ask`, nothing sent; so is a
 * state that is no approval state of this request (broker/ask-input.ts: garbage, another kind's,
 * expired, sealed for another prompt, resource, principal or arguments), nobody asked.
 * `mcp-broker approve` and `policy.firstUse` are for tools only. Fail closed: a request whose
 * record cannot be written is answered `guard_error` and the upstream's answer withheld; one
 * already refused keeps its outcome.
 */
import { ProtocolError, ProtocolErrorCode, type InputRequiredResult } from '@modelcontextprotocol/server';
import type { RecordPublisher } from '../audit/publisher.js';
import type { RecordSink } from '../audit/records.js';
import { isoTime, type Clock } from '../shared/clock.js';
import { messageOf } from '../shared/errors.js';
import { isRequestTimeout } from '../shared/sdk-errors.js';
import { newCallId } from '../shared/ids.js';
import type { Logger } from '../shared/logger.js';
import { askApproval } from '../router/ask.js';
import { askThroughInput } from './ask-input.js';
import type { ApprovalStates } from './approval-state.js';
import { ShuttingDown } from './deadline.js';
import { cutReason, oneLine } from './failure.js';
import { CALL_ID_META_KEY, OUTCOME_META_KEY, OUTCOME_STATUS, type Outcome } from './outcomes.js';
import { decidePrimitive, type CompiledPolicy, type Verdict } from './policy.js';
import { HELD_UNAPPROVED_REASON } from './held-state.js';
import { kindOf } from './sealed-state.js';
import { approximateJsonBytes, cutName, type RecordDeps } from './record.js';
import type { CallerSession, CallRecord } from './types.js';

/** What a judged request was, as the record's `kind` says. */
export type PrimitiveKind = NonNullable<CallRecord['kind']>;

/**
 * JSON-RPC error code of a policy refusal (`denied`, `approval_required`) of a prompt, resource
 * or completion request: in the implementation-defined server range (-32000 to -32099); MCP
 * defines no code for it. The outcome is in `error.data["mcp-broker/outcome"]`.
 */
export const POLICY_REFUSED_CODE = -32003;

/**
 * What a `forward` throws when it refuses the request before sending anything upstream (a
 * modern retry whose relay or held-request `requestState` is refused): JSON-RPC -32602, recorded
 * `invalid_arguments` with 0 attempts, as the same state refused by the judge under `ask` is.
 */
export class UnsentRefusal extends ProtocolError {
  constructor(reason: string) {
    super(ProtocolErrorCode.InvalidParams, reason);
  }
}

/** One request to judge. */
export interface PrimitiveRequest {
  readonly kind: PrimitiveKind;
  /** Server key of the upstream that serves it. */
  readonly server: string;
  /** `prompt`: matched by advertised prompt name; `resource`: by URI (a template completion: the `uriTemplate`). */
  readonly type: 'prompt' | 'resource';
  /** The advertised prompt name, or the URI. The record's `name`. */
  readonly name: string;
  /** The upstream's own prompt name, or the URI: the record's `subject` is `server/<own name>`. */
  readonly ownName: string;
  /** What the record keeps as `args` (scrubbed): prompt arguments, the completed argument. */
  readonly args: unknown;
  /** The downstream request's signal. */
  readonly signal: AbortSignal;
}

export interface PrimitiveGuardDeps {
  policy: CompiledPolicy;
  /** Advertised-name prefix of a server (`''` for bare names); undefined for a server not configured. */
  prefixOf(server: string): string | undefined;
  records: RecordSink;
  publisher?: RecordPublisher<CallRecord>;
  clock: Clock;
  logger: Logger;
  /** Makes argument values safe to keep: the scrubber's `value`. */
  scrubArgs: (args: unknown) => unknown;
  /** Makes a reason safe to keep: the scrubber's `text`. */
  scrubText: (text: string) => string;
  /** As the record stage's `shown` (record.ts `RecordDeps`): a record a reload's secret came during the write of is published as shown. */
  shown?: RecordDeps['shown'];
  /** How long an approval prompt waits, in ms (`policy.askTimeoutMs`). */
  askTimeoutMs: number;
  /** Told after each attempt to write a record whether it was written (metrics). Default none. */
  onRecorded?: (written: boolean) => void;
  /**
   * Seals and redeems the approval states of modern callers: with it, an `ask` of a 2026-07-28
   * caller's `prompts/get` or `resources/read` is answered `input_required` (broker/ask-input.ts,
   * approval key `prompt:<name>` or `resource:<uri>`), the request served on the approved retry.
   * Absent (and for completions and subscriptions, which may not answer `input_required`): such
   * an ask is `approval_required`.
   */
  approvalStates?: ApprovalStates;
  /**
   * Counts a request waiting on its upstream as in flight for shutdown (`Broker.hold`): `abort`
   * with a {@link ShuttingDown} settles it `cancelled` with that reason, recorded, then answered.
   * Default none: the request waits for its upstream (or the downstream cancel) alone.
   */
  hold?: (running: Promise<unknown>, abort: (reason: unknown) => void) => void;
}

/** Methods of a primitive kind that may answer `input_required` (the spec's list). */
const ASKS_THROUGH_INPUT: ReadonlySet<PrimitiveKind> = new Set(['prompt', 'resource']);

/** Judges, records and publishes the prompt, resource and completion requests of every session. */
export class PrimitiveGuard {
  constructor(private readonly deps: PrimitiveGuardDeps) {}

  /**
   * Whether `principal` may have `item` with nobody asked (the verdict is `allow`, run mode
   * included): for what cannot ask, such as the resources a 2026-07-28 `subscriptions/listen`
   * names, where an `ask` is as good as a refusal.
   */
  allowedOutright(principal: string, item: { server: string; type: 'prompt' | 'resource'; name: string }): boolean {
    return this.verdictOn(item, principal).kind === 'allow';
  }

  /** Whether a list shows a prompt (advertised name) or resource (URI or `uriTemplate`) to `principal`: not when its action is `deny`. */
  visible(principal: string, item: { server: string; type: 'prompt' | 'resource'; name: string }): boolean {
    const prefix = this.deps.prefixOf(item.server);
    if (prefix === undefined) return false;
    return this.deps.policy.primitiveAction({ type: item.type, name: item.name, prefix }, principal).action !== 'deny';
  }

  /**
   * Judges `request` for `caller`; when allowed runs `forward` (the upstream request); writes the
   * record, publishes it, then answers: `forward`'s result, or throws (see the file comment).
   * With `hold`, a shutdown settles a request still waiting on its upstream `cancelled` (its
   * reason the shutdown's), recorded, then thrown as a -32603 naming the outcome.
   */
  serve<T>(request: PrimitiveRequest, caller: CallerSession, forward: (context: { approved: boolean }) => Promise<T>): Promise<T> {
    const { hold } = this.deps;
    if (!hold) return this.answer(request, caller, forward);
    // Held for shutdown to its answer: the record is written before the transport is told the request ended.
    let stop!: (reason: unknown) => void;
    const stopped = new Promise<never>((_, reject) => (stop = reject));
    stopped.catch(() => undefined);
    const answering = this.answer(request, caller, (context) => Promise.race([forward(context), stopped]));
    hold(answering, stop);
    return answering;
  }

  private async answer<T>(request: PrimitiveRequest, caller: CallerSession, forward: (context: { approved: boolean }) => Promise<T>): Promise<T> {
    const { deps } = this;
    const callId = newCallId();
    const startedAt = deps.clock.now();
    let outcome: Outcome;
    let reason: string | undefined;
    let attempts = 0;
    let bytesOut = 0;
    let result: T | undefined;
    let failure: { err: unknown } | undefined;

    let refusal: Awaited<ReturnType<PrimitiveGuard['judge']>>;
    try {
      refusal = await this.judge(request, caller, callId);
    } catch (err) {
      // The store behind approvals and sealed states failed: refused and recorded, as a tool call's stage throw is (fail closed).
      refusal = { outcome: 'guard_error', reason: `judge failed: ${messageOf(err)}` };
    }
    if (refusal) {
      ({ outcome, reason } = refusal);
    } else {
      attempts = 1;
      try {
        result = await forward({ approved: refusal === null });
        outcome = 'ok';
        bytesOut = approximateJsonBytes(result);
      } catch (err) {
        // Cut off by shutdown: answered as a refusal naming it, like a tool call (the upstream's request ends with the session).
        if (!(err instanceof ShuttingDown)) failure = { err };
        // Refused before anything was sent: no attempt.
        if (err instanceof UnsentRefusal) attempts = 0;
        ({ outcome, reason } = classify(err, request.signal));
      }
    }

    const generation = deps.shown?.generation();
    const record: CallRecord = {
      ts: isoTime(startedAt),
      callId,
      sessionId: caller.sessionId,
      principal: caller.principal,
      // As a tool call's record (record.ts): a name or URI the caller sent may hold a secret.
      unit: deps.scrubText(caller.unit),
      subject: cutName(deps.scrubText(`${request.server}/${request.ownName}`)),
      name: cutName(deps.scrubText(request.name)),
      kind: request.kind,
      outcome,
      status: OUTCOME_STATUS[outcome],
      durationMs: Math.max(0, deps.clock.now() - startedAt),
      attempts,
      bytesOut,
      args: deps.scrubArgs(request.args),
    };
    // Scrubbed whole, then cut: the record's and the client's reason alike (it can carry an
    // upstream's error, a judge failure's message, a client's elicitation error).
    const said = reason === undefined ? undefined : cutReason(deps.scrubText(reason));
    if (said !== undefined) record.reason = said;
    if (outcome === 'ok' && (result as { resultType?: unknown } | undefined)?.resultType === 'input_required') record.resultType = 'input_required';
    try {
      await deps.records.append(record);
      deps.onRecorded?.(true);
    } catch (err) {
      deps.onRecorded?.(false);
      deps.logger.error({ callId, kind: request.kind, err: messageOf(err) }, 'record could not be written');
      if (outcome === 'ok') {
        throw refusalError('guard_error', 'the record could not be written; the answer is withheld', callId);
      }
      throw failure ? failure.err : refusalError(outcome, said, callId);
    }
    this.publish(deps.shown && deps.shown.generation() !== generation ? deps.shown.record(record) : record, caller);
    if (outcome === 'ok') return result as T;
    if (refusal?.inputRequired) return { ...refusal.inputRequired, _meta: { ...refusal.inputRequired._meta, [OUTCOME_META_KEY]: outcome, [CALL_ID_META_KEY]: callId } } as T;
    throw failure ? failure.err : refusalError(outcome, said, callId);
  }

  /**
   * Undefined when the request may go on, null when it may go on approved by a human; else the
   * refusal (with the `input_required` result to answer a modern caller's first round with).
   */
  private async judge(
    request: PrimitiveRequest,
    caller: CallerSession,
    callId: string,
  ): Promise<{ outcome: Outcome; reason: string; inputRequired?: InputRequiredResult } | undefined | null> {
    const verdict = this.verdictOn(request, caller.principal);
    if (verdict.kind === 'allow') return undefined;
    if (verdict.kind === 'refuse') return { outcome: verdict.outcome, reason: verdict.reason };
    const states = this.deps.approvalStates;
    if (caller.era === 'modern' && states && ASKS_THROUGH_INPUT.has(request.kind)) {
      const method = request.kind === 'prompt' ? 'prompts/get' : 'resources/read';
      const state = caller.requestState;
      if (state !== undefined) {
        // The retry answering the upstream's input requests: its state is that round's, never an approval state to verify.
        const answered = await this.answering(request, caller, state, method, states, verdict.reason);
        if (answered !== false) return answered;
      }
      const asked = await askThroughInput(caller, {
        message: async () => askMessage(request, verdict.reason),
        tool: `${request.kind}:${request.name}`,
        args: request.args,
        callId,
        states,
      });
      if (asked.kind === 'approved') return null;
      // A state that is no state of this request: malformed, as without `ask` (-32602).
      if (asked.kind === 'invalid') return { outcome: 'invalid_arguments', reason: asked.reason };
      if (asked.kind === 'ask') {
        return { outcome: 'approval_required', reason: `${verdict.reason}; asked through an input request (input_required)`, inputRequired: asked.result };
      }
      return { outcome: 'approval_required', reason: `${verdict.reason}; ${asked.reason}` };
    }
    const answer = await askApproval(caller, { message: askMessage(request, verdict.reason), timeoutMs: this.deps.askTimeoutMs, signal: request.signal });
    if (answer.approved) {
      // Judged again on the policy as it is now: a reload may have added a deny while the human was asked.
      const now = this.verdictOn(request, caller.principal);
      return now.kind === 'refuse' ? { outcome: now.outcome, reason: `${now.reason} (judged again after the approval)` } : null;
    }
    if (request.signal.aborted) return { outcome: 'cancelled', reason: 'cancelled by the client while waiting for approval' };
    return { outcome: 'approval_required', reason: `${verdict.reason}; ${answer.reason}` };
  }

  /**
   * The judgement of a modern caller's asked request whose `state` answers its upstream's input
   * requests; false for a state of another kind (an approval state, read by `askThroughInput`).
   * A held-request state (a 2025-11-25 upstream's request held during the request:
   * transports/held-calls.ts) that opens for this request goes on without an ask when that
   * request was approved at its first round (the held call refuses one whose round is not
   * waiting, -32602), and is `approval_required` when it was allowed outright then (a reload made
   * it `ask` since: nobody approved it); a relay or URL-elicitation state
   * the relay stage would refuse (broker/relay-input.ts `relayStateRefusal`) is
   * `invalid_arguments` (-32602), as without `ask`, and nobody is asked. An intact relay state
   * of an approved round goes on approved, once; after that, `approval_required` saying so.
   */
  private async answering(
    request: PrimitiveRequest,
    caller: CallerSession,
    state: string,
    method: string,
    states: ApprovalStates,
    why: string,
  ): Promise<{ outcome: Outcome; reason: string } | undefined | null | false> {
    const kind = kindOf(state);
    if (kind === 'held') {
      const opened = await states.openHeld(state, { principal: caller.principal, tool: `${method}:${request.server}/${request.ownName}`, args: request.args });
      if (!opened.ok) return { outcome: 'invalid_arguments', reason: opened.reason };
      // It joins a request already running: approved at its first round, it is not asked again; allowed outright then, nobody approved it.
      return opened.claim.approved ? undefined : { outcome: 'approval_required', reason: `${why}; ${HELD_UNAPPROVED_REASON}` };
    }
    if (kind !== 'relay' && kind !== 'url') return false;
    const relayed = { principal: caller.principal, server: request.server, method, target: request.ownName, args: request.args };
    const unrelayable = await states.relayRefusal(state, relayed);
    if (unrelayable !== undefined) return { outcome: 'invalid_arguments', reason: unrelayable };
    // The retry of a round approved before, which the upstream answered with its own input requests (broker/relay-input.ts).
    if (await states.redeemRelay(state, relayed)) return null;
    return { outcome: 'approval_required', reason: `${why}; the approval this requestState carried was used already, or its round was not approved (one approval serves one request); it was not sent, send it again without it to be asked anew` };
  }

  /** The policy's verdict on `request` for `principal` (an upstream not configured: `unregistered`). */
  private verdictOn(request: Pick<PrimitiveRequest, 'server' | 'type' | 'name'>, principal: string): Verdict {
    const prefix = this.deps.prefixOf(request.server);
    if (prefix === undefined) return { kind: 'refuse', outcome: 'unregistered', reason: `upstream "${request.server}" is not configured` };
    const what = request.type === 'prompt' ? `the prompt "${request.name}"` : `the resources of upstream "${request.server}"`;
    return decidePrimitive(this.deps.policy, { type: request.type, name: request.name, prefix }, principal, what);
  }

  private publish(record: CallRecord, caller: CallerSession): void {
    try {
      this.deps.publisher?.publish(record);
    } catch (err) {
      this.deps.logger.warn({ callId: record.callId, err: messageOf(err) }, 'record publication failed');
    }
    try {
      caller.log?.('debug', record);
    } catch (err) {
      this.deps.logger.debug({ callId: record.callId, err: messageOf(err) }, 'record notification failed');
    }
  }
}

const ACTION_OF: Record<PrimitiveKind, string> = {
  prompt: 'get the prompt',
  resource: 'read the resource',
  completion: 'complete an argument of',
  subscribe: 'subscribe to the resource',
};

/** The approval question: names the primitive and its upstream, never argument values. */
function askMessage(request: PrimitiveRequest, why: string): string {
  const target = request.type === 'prompt' ? `"${request.name}" (${request.server}/${request.ownName})` : `${request.name} (upstream "${request.server}")`;
  return [`Allow the client to ${ACTION_OF[request.kind]} ${target}?`, `Why you are asked: ${why}.`].join('\n');
}

/** The outcome of a failed upstream request. */
function classify(err: unknown, signal: AbortSignal): { outcome: Outcome; reason: string } {
  const reason = oneLine(messageOf(err));
  if (err instanceof ShuttingDown) return { outcome: 'cancelled', reason };
  if (signal.aborted) return { outcome: 'cancelled', reason: 'cancelled by the client' };
  // The SDK's own timeout, or -32001 as the upstream boundary passes it on (upstream-scrub.ts).
  if (isRequestTimeout(err)) return { outcome: 'timeout', reason };
  if (ProtocolError.isInstance(err) && err.code === ProtocolErrorCode.InvalidParams) return { outcome: 'invalid_arguments', reason };
  return { outcome: 'upstream_error', reason };
}

/** The JSON-RPC error of a broker refusal; `reason` already scrubbed and cut ({@link cutReason}). */
function refusalError(outcome: Outcome, reason: string | undefined, callId: string): ProtocolError {
  const code =
    outcome === 'denied' || outcome === 'approval_required' ? POLICY_REFUSED_CODE : outcome === 'invalid_arguments' ? ProtocolErrorCode.InvalidParams : ProtocolErrorCode.InternalError;
  return new ProtocolError(code, reason ? `${outcome}: ${oneLine(reason)}` : outcome, { [OUTCOME_META_KEY]: outcome, [CALL_ID_META_KEY]: callId });
}

