/**
 * One `tools/call` as it moves through the broker path (seed 002_7bce204a86c1c7ba.txt).
 * Stages read and write this object; the runner owns its lifecycle.
 */
import type { CallToolResult, ClientCapabilities, ElicitRequest, ElicitResult, LoggingLevel, Tool } from '@modelcontextprotocol/server';
import type { InputRelay, ProgressUpdate, ServerRequestHandler } from '../upstream/types.js';
import { ROLLBACK_META_KEY, type Outcome } from './outcomes.js';
import type { InputRequiredResult } from '@modelcontextprotocol/server';
import type { TraceCarrier } from '../shared/trace-context.js';

/** Where a call is going, as the registry and router know it. */
export interface ToolTarget {
  /** Advertised name. */
  readonly name: string;
  /** Server key (`broker`, `estate` for the broker's own tools). */
  readonly server: string;
  /** The tool's own name at its server. */
  readonly toolName: string;
  /**
   * `active`, `disabled` (by config), `gone` (its upstream is running but not serving it now),
   * `down` (its upstream is not running: failed to start, crashed, restarting).
   */
  readonly state: 'active' | 'disabled' | 'gone' | 'down';
  /** Why it cannot be called (one line, safe to show): set when `down`, and for a disabled upstream. */
  readonly reason?: string;
  /** `upstream` (an MCP or rest upstream) or `local` (a function tool served by the router). */
  readonly source: 'upstream' | 'local';
  /** The definition as advertised; present when active. */
  readonly definition?: Tool;
  /** Pin of the definition (sha256); present when active. */
  readonly hash?: string;
  /**
   * The policy action when no `policy.rules` entry matches, instead of `policy.default`; set by
   * the router for function tools that declare it (`estate__apply_proposal`: `ask`). Issue 4.
   */
  readonly policyDefault?: 'ask' | 'deny';
  /**
   * The tool itself demands a human's approval on every call (`requireApproval` of a function
   * tool, seed 003). The judge asks, before budget, breaker and deadline, so waiting on a human
   * neither spends budget nor counts against the tool's deadline or breaker.
   */
  readonly requireApproval?: boolean;
  /**
   * The tool acts on what every session shares (`broker__reconnect`: an upstream connection), so
   * the judge denies it to a principal that is neither privileged (`local`, or role `operator`)
   * nor allowed it by a `policy.rules` entry naming it literally (policy.ts, step 5).
   */
  readonly requiresPrivilege?: boolean;
  /** What the call would do, for the approval prompt (`approvalDetail` of a function tool). */
  readonly approvalDetail?: (args: unknown, session: CallerSession) => readonly string[] | Promise<readonly string[]>;
}

/** The downstream side of a call: who is calling, and how to reach them. */
export interface CallerSession {
  /**
   * Downstream session id; `api` calls get a fresh one. `null` for a modern (2026-07-28)
   * request, which has no session: its records carry `"sessionId": null`.
   */
  readonly sessionId: string | null;
  /** Who: `local` for the stdio client, a configured principal name over HTTP. */
  readonly principal: string;
  /**
   * Budget scope: a legacy session, an API caller's unit, or a modern request's unit
   * (`transports/unit.ts`: `modern:<principal>/<key>` for a `_meta["mcp-broker/unit"]` key,
   * else `modern:<principal>`).
   */
  readonly unit: string;
  /**
   * True when no session ends `unit` (the admin API's `api:<principal>`): its budget is per
   * `broker.budgetWindowMs` window and renews (broker/budget.ts). Absent: the unit is a session's,
   * its budget lasting as long as the session.
   */
  readonly sessionless?: boolean;
  /** What the downstream client declared at initialize. */
  readonly clientCapabilities?: ClientCapabilities;
  /** The log level the client asked for (`logging/setLevel`); absent: it asked for none. */
  readonly logLevel?: LoggingLevel;
  /** Asks the human through `elicitation/create`; absent when the client cannot. */
  elicit?(params: ElicitRequest['params'], options: { timeoutMs: number; signal?: AbortSignal }): Promise<ElicitResult>;
  /** Whether the downstream connection is still there to receive an answer. */
  isLive(): boolean;
  /**
   * One `ping` round trip to the client on the call's stream: resolves when it answers, rejects
   * when the connection closes first or `timeoutMs` passes. The router's liveness proof after an
   * approval (seed 003); absent for callers with no connection (the HTTP API).
   */
  ping?(options: { timeoutMs: number; signal?: AbortSignal }): Promise<void>;
  /** Sends an MCP log notification to this session at `level` (publish stage). */
  log?(level: 'debug' | 'info' | 'warning' | 'error', data: unknown): void;
  /**
   * The protocol era of the request: `legacy` (2025-11-25 and older: `initialize`, sessions,
   * server-to-client requests) or `modern` (2026-07-28: per-request `_meta`, no session, input
   * requests as `input_required` results). Absent means legacy (the HTTP API, tasks).
   */
  readonly era?: 'legacy' | 'modern';
  /**
   * A modern retry's `inputResponses` (the answers to the `inputRequests` of an earlier
   * `input_required` result, keyed as asked), as the client sent them; absent on a first try
   * and for legacy callers. Untrusted input.
   */
  readonly inputResponses?: Record<string, unknown>;
  /**
   * A modern retry's `requestState`, byte for byte as the client echoed it (the broker sealed
   * it, so it must be verified before use); absent on a first try and for legacy callers.
   */
  readonly requestState?: string;
}

/** The request as received. */
export interface CallRequest {
  readonly name: string;
  readonly args: Record<string, unknown>;
  /** The downstream request's `_meta`, minus the progress token. */
  readonly meta?: Record<string, unknown>;
  /** Aborted when the downstream client cancels. */
  readonly signal: AbortSignal;
  /**
   * Aborts `signal`: given by a caller that owns it and lets the broker abort it too (deadline,
   * shutdown), so a call needs no second signal; absent, the broker wraps `signal` in its own.
   * Node 20's AbortSignal costs microseconds a call (issue 6).
   */
  readonly abort?: (reason: unknown) => void;
  /** Forwards progress to the downstream client; absent when it sent no progress token. */
  readonly onProgress?: (update: ProgressUpdate) => void;
  /** Re-issues upstream→client requests (sampling, elicitation, roots) to the calling session. */
  readonly onServerRequest?: ServerRequestHandler;
  /** The durable task this call runs as (src/tasks/); an `ask` then parks it instead of asking. */
  readonly taskId?: string;
  /**
   * Who approved this call in the approval inbox before it ran (a parked task resumed from its
   * row): an `ask` or a tool's `requireApproval` is satisfied. A `deny` still denies.
   */
  readonly approvedBy?: string;
  /** Set when a flow makes this call (`broker__flow_run`): recorded as the record's `flow`. */
  readonly flow?: FlowRef;
  /**
   * Why the caller already knows these arguments cannot be sent (a flow's reference that cannot
   * be read), as one line naming no value: the call is judged and recorded like any other, and
   * the invoke stage refuses it `invalid_arguments` with this reason; nothing is sent.
   */
  readonly invalidArguments?: string;
}

/**
 * Which flow made a call, and as what: `id` is the flow's own call id (`broker__flow_run`'s
 * `callId`), `step` the step's id (`on_failure` for the failure hook), `phase` absent for a
 * step, `rollback` for an inverse replayed, `on_failure` for the failure hook.
 */
export interface FlowRef {
  readonly id: string;
  readonly step: string;
  readonly phase?: 'rollback' | 'on_failure';
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
  proposal?: { id: string; action: 'proposed' | 'applied'; path: string };
  /** The flow that made this call, and the step ({@link FlowRef}); absent for a call made directly. */
  flow?: FlowRef;
  /** The call's trace (32 hex digits), when tracing is on and the call was sampled (issue 20). */
  traceId?: string;
  /** The call's own span in that trace (16 hex digits). */
  spanId?: string;
}

/** The mutable state of one call inside the broker. */
export interface BrokerCall {
  readonly callId: string;
  readonly request: CallRequest;
  readonly session: CallerSession;
  /** ms since the epoch, from the broker's clock. */
  readonly startedAt: number;
  target?: ToolTarget;
  /** Absolute time (ms since the epoch) at which the call is cancelled as `timeout`. */
  deadline?: number;
  /**
   * Where the call's progress goes: the downstream client's sink (`request.onProgress`), wrapped
   * by the deadline stage to move the deadline when `extendOnProgress` is on. Absent when nobody
   * listens; then the upstream is given no progress token.
   */
  onProgress?: (update: ProgressUpdate) => void;
  /** Set by the judge when a human approved this call (policy `ask` or the tool's `requireApproval`). */
  approved?: boolean;
  /**
   * Set by the judge when it asks a modern caller for approval through an input request: the
   * call is settled `approval_required` (and recorded so) but answered with this
   * `input_required` result instead of a refusal (broker/ask-input.ts).
   */
  inputRequired?: InputRequiredResult;
  /**
   * A modern caller's retry fields as the upstream is to get them (un-namespaced, the upstream's
   * own state unsealed), set by the relay stage (broker/relay-input.ts); absent for legacy callers.
   */
  inputRelay?: InputRelay;
  /**
   * Set with a refusal the caller is to get as a JSON-RPC error instead of a result (a
   * `requestState` that fails verification: -32602, the spec's "reject"); the call is still recorded.
   */
  requestError?: { readonly code: number; readonly message: string; readonly data?: unknown };
  /** Absolute time past which no extension of the deadline goes (`maxTotalTimeoutMs`). */
  hardDeadline?: number;
  /** Aborted at the deadline or on downstream cancel; what the invoke stage passes upstream. */
  signal: AbortSignal;
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
  /** Extra fields for the record (breaker state, stripped arguments, trace ids). */
  notes: Partial<Pick<CallRecord, 'breaker' | 'stripped' | 'proposal' | 'traceId' | 'spanId'>>;
  /**
   * W3C trace context of the attempt in progress (`traceparent`, `tracestate`, `baggage`), set by
   * the tracer before each attempt when tracing is on; the router sends it upstream in `_meta`
   * (and as headers to an HTTP upstream) in place of the caller's. Absent when tracing is off.
   */
  traceMeta?: TraceCarrier;
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
  /**
   * What a handler that settles on abort (`FunctionTool.settlesOnAbort`) said it left behind when
   * it failed after the call was cancelled or timed out (its first text line): the deadline stage
   * still settles the call `cancelled` / `timeout` and adds this to the reason.
   */
  endedAs?: string;
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
