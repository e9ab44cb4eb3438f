/**
 * One `tools/call` as it moves through the broker path (seed 002_7bce204a86c1c7ba.txt).
 * Stages read and write this object; the runner owns its lifecycle.
 */
import type { CallToolResult, InputRequiredResult } from '@modelcontextprotocol/server';
import type { FlowRef, RouteNotes, RoutedCall, RoutedRequest } from '../router/call.js';
import type { CancelSignal } from '../shared/cancel.js';
import type { ProgressUpdate } from '../upstream/types.js';
import { ROLLBACK_META_KEY, type Outcome } from './outcomes.js';

// The router's view of a call lives in router/ (broker → router, one way); re-exported so importers of these keep working.
export type { CallerSession, FlowRef, ToolTarget } from '../router/call.js';

/**
 * The request as received: what the router reads ({@link RoutedRequest}: `name`, `args`, `meta`,
 * `onServerRequest`, `taskId`, `flow`) and what only the broker's stages use.
 */
export interface CallRequest extends RoutedRequest {
  /** Aborted when the downstream client cancels. */
  readonly signal: CancelSignal;
  /**
   * Aborts `signal`: given by a caller that owns it and lets the broker abort it too (deadline,
   * shutdown), so a call needs no second signal; absent, the broker wraps `signal` in its own.
   * Node 20's AbortSignal costs microseconds a call (issue 6).
   */
  readonly abort?: (reason: unknown) => void;
  /** Forwards progress to the downstream client; absent when it sent no progress token. */
  readonly onProgress?: (update: ProgressUpdate) => void;
  /**
   * Who approved this call in the approval inbox before it ran (a parked task resumed from its
   * row): an `ask` or a tool's `requireApproval` is satisfied. A `deny` still denies.
   */
  readonly approvedBy?: string;
  /**
   * Why the caller already knows these arguments cannot be sent (a flow's reference that cannot
   * be read), as one line naming no value: the call is judged and recorded like any other, and
   * the invoke stage refuses it `invalid_arguments` with this reason; nothing is sent.
   */
  readonly invalidArguments?: string;
  /**
   * Why a modern caller's retry carrying a held-request state was refused (transports/held-calls.ts),
   * as one line: the call is judged and recorded like any other, and the judge refuses it
   * `invalid_arguments` with this reason unless the policy refuses it first (never asking, even
   * under `ask`), before budget and breaker; nothing is sent.
   */
  readonly heldStateRefused?: string;
  /**
   * Why a modern caller's held-request retry whose state opened may not join its call
   * (broker/judge.ts `heldRetryJoins`: the call was not approved at its first round and must be
   * now), as one line: the judge settles it as the policy refuses it, else `approval_required`
   * with this reason, never running it, before budget and breaker; nothing is sent.
   */
  readonly heldRetryUnapproved?: string;
  /**
   * Told by the judge when the call goes on approved (a policy `ask` or `requireApproval`
   * answered): a modern call's held requests are then sealed as approved (transports/held-calls.ts).
   */
  readonly onApproved?: () => void;
  /**
   * Whether an input request of this call is held for its caller's retry now (a modern call,
   * transports/held-calls.ts): read when the deadline passes, so a `timeout` the caller let pass
   * by not answering is no failure for the breaker, whichever of the deadline and
   * `policy.askTimeoutMs` ends it.
   */
  readonly awaitingCaller?: () => boolean;
}

/** The record written for every judged call (DESIGN.md "Contract"). */
export interface CallRecord {
  ts: string;
  callId: string;
  /** The legacy session; `null` for a modern (2026-07-28) request, which has none. */
  sessionId: string | null;
  principal: string;
  unit: string;
  /** `server/tool`; for a prompt `server/<prompt>`, for a resource `server/<uri>`. */
  subject: string;
  /** Advertised name; for a resource, its URI (a template completion: the `uriTemplate`). */
  name: string;
  /**
   * What was judged, when it was not a `tools/call` (absent for tool calls):
   * `resource` (`resources/read`), `prompt` (`prompts/get`), `completion` (`completion/complete`),
   * `subscribe` (`resources/subscribe`). See broker/primitive-judge.ts.
   */
  kind?: 'resource' | 'prompt' | 'completion' | 'subscribe';
  outcome: Outcome;
  status: number;
  durationMs: number;
  attempts: number;
  bytesOut: number;
  reason?: string;
  args: unknown;
  /** `input_required` when the call was answered with an upstream's input requests (broker/relay-input.ts); absent otherwise. */
  resultType?: 'input_required';
  /** Breaker state of the tool after the call (`closed`, `open`, `half_open`), when known. */
  breaker?: string;
  /** Argument names stripped before the call (rest tools). */
  stripped?: string[];
  /** An estate proposal this call stored or applied (the estate relay's audit hook; issue 4). */
  proposal?: RouteNotes['proposal'];
  /** The flow that made this call, and the step ({@link FlowRef}); absent for a call made directly. */
  flow?: FlowRef;
  /** The call's trace (32 hex digits), when tracing is on and the call was sampled (issue 20). */
  traceId?: string;
  /** The call's own span in that trace (16 hex digits). */
  spanId?: string;
}

/**
 * The mutable state of one call inside the broker: the router's view of it ({@link RoutedCall}:
 * target, deadlines, progress sink, approval, signal, trace context, the relay's fields, and what
 * the router writes back) plus what only the broker's stages read and write.
 */
export interface BrokerCall extends RoutedCall {
  readonly request: CallRequest;
  /** ms since the epoch, from the broker's clock. */
  readonly startedAt: number;
  /**
   * Set by the judge when it asks a modern caller for approval through an input request: the
   * call is settled `approval_required` (and recorded so) but answered with this
   * `input_required` result instead of a refusal (broker/ask-input.ts).
   */
  inputRequired?: InputRequiredResult;
  /** Aborts `signal` with a reason (the deadline stage's `DeadlineExceeded`); set by the broker. */
  abort?: (reason: unknown) => void;
  /** Whether the tool counts as read-only (retry, read-only mode). */
  readOnly?: boolean;
  /**
   * Upstream invocations made: attempts that were sent (0 when refused before invoke, or when
   * invoke refused before sending anything; see broker/failure.ts).
   */
  attempts: number;
  /** Set when settled; `ok` with a result, or a refusal. */
  outcome?: Outcome;
  reason?: string;
  result?: CallToolResult;
  /** Size of the answered result, in bytes of JSON. */
  bytesOut: number;
  /** Whether the last attempt failed in a way a read-only tool may retry (transport, 429, 5xx). */
  retryable?: boolean;
  /** A `Retry-After` the upstream sent with its last failure, in ms. */
  retryAfterMs?: number;
  /**
   * Whether the last attempt failed only because the upstream no longer knew the session it was
   * sent on (HTTP 404, `BrokerError` `session_lost`): the request was not processed and a new
   * session was opened, so it is no failure for the breaker. Set by invoke.
   */
  sessionLost?: boolean;
  /**
   * The upstream's JSON-RPC error the caller is to get as it came (code, message, data), rather
   * than a refusal result: only -32042 (URL elicitation required), which a client acts on (it
   * opens the URLs in `data.elicitations` and retries). Set by invoke; the call is still settled
   * and recorded `upstream_error`, and the breaker leaves it be (the upstream is not failing).
   */
  wireError?: WireError;
  /**
   * Set by the deadline stage when the call ended `timeout` because its caller did not answer an
   * input request held for it (`DeadlineExceeded.callersWait`): the upstream was waiting on the
   * caller, not failing, so the breaker leaves it be.
   */
  callersWait?: boolean;
  /** Extra fields for the record: the router's ({@link RouteNotes}) and the broker's (breaker state, trace ids). */
  notes: Partial<Pick<CallRecord, 'breaker' | 'stripped' | 'proposal' | 'traceId' | 'spanId'>>;
  /** Written by the record stage. */
  record?: CallRecord;
  /**
   * Set by the judge when the call stopped waiting on a parked row that stays parked: the record
   * stage writes nothing now, the row's settling run (or decision) writes the call's one record.
   */
  recordDeferred?: boolean;
  /**
   * The result's `_meta["mcp-broker/rollback"]` (scrubbed) when a stage refused a result that had
   * come back (`withheld`): the upstream did the work, so a flow can still undo it. Set by {@link refuse}.
   */
  rollback?: unknown;
}

/** Settles a call as a refusal: the result is withheld (its rollback descriptor, if any, is kept in `call.rollback`). */
export function refuse(call: BrokerCall, outcome: Outcome, reason: string): void {
  const rollback = (call.result?._meta as Record<string, unknown> | undefined)?.[ROLLBACK_META_KEY];
  if (rollback !== undefined) call.rollback = rollback;
  call.outcome = outcome;
  call.reason = reason;
  call.result = undefined;
}

/**
 * How a parked `ask` was decided (the approval inbox, src/tasks/engine.ts `TaskEngine.park`).
 * `stillParked`: nobody decided; this run stops waiting (its caller left, the broker is stopping)
 * but the row stays parked, and the call's one record is written when the row settles.
 */
export type ParkDecision = { approved: true; by: string } | { approved: false; reason: string; cancelled?: boolean; stillParked?: boolean };

/** A JSON-RPC error passed to the caller as the upstream sent it (scrubbed); see `BrokerCall.wireError`. */
export interface WireError {
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
}
