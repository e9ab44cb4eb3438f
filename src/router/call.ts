/**
 * What the router needs of a call, declared where the router is (DESIGN.md "Folders": broker →
 * router, one way). The broker's `BrokerCall` (broker/types.ts) extends {@link RoutedCall}, and
 * broker/types.ts re-exports {@link ToolTarget}, {@link CallerSession} and {@link FlowRef}, so
 * the broker hands its calls to the router (`ToolRouter.dispatch`, router.ts) as they are.
 */
import type { ClientCapabilities, ElicitRequest, ElicitResult, LoggingLevel, Tool } from '@modelcontextprotocol/server';
import type { CancelSignal } from '../shared/cancel.js';
import type { TraceCarrier } from '../shared/trace-context.js';
import type { CallOptions, InputRelay, ProgressUpdate, ServerRequestHandler } from '../upstream/types.js';

/** Where a call is going, as the registry and router know it (`ToolRouter.resolve`). */
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
  /** Why it needs privilege, for the denial (`FunctionTool.privilegeReason`). */
  readonly privilegeReason?: string;
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
   * True when no session ends `unit` (the admin API's `api:<principal>`, a modern request's
   * `modern:<principal>[/<key>]`): its budget is per
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

/**
 * The part of the request the router reads or hands to a function tool
 * (`FunctionToolContext.request`, function-tool.ts); the broker's `CallRequest` extends it.
 */
export interface RoutedRequest {
  /** The name the caller called (advertised). */
  readonly name: string;
  readonly args: Record<string, unknown>;
  /** The downstream request's `_meta`, minus the progress token. */
  readonly meta?: Record<string, unknown>;
  /** Re-issues upstream→client requests (sampling, elicitation, roots) to the calling session. */
  readonly onServerRequest?: ServerRequestHandler;
  /** The durable task this call runs as (src/tasks/); an `ask` then parks it instead of asking. */
  readonly taskId?: string;
  /** Told when a 2026-07-28 upstream answers the call with a task of its own (`CallOptions.onUpstreamTask`). */
  readonly onUpstreamTask?: CallOptions['onUpstreamTask'];
  /** Set when a flow makes this call (`broker__flow_run`): recorded as the record's `flow`. */
  readonly flow?: FlowRef;
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

/**
 * The record fields routing a call can add ({@link RoutedCall.notes}): the broker's record stage
 * copies them into the call's record (broker/types.ts `CallRecord`).
 */
export interface RouteNotes {
  /** Argument names stripped before the call (rest tools), as the upstream reported them. */
  stripped?: string[];
  /** An estate proposal this call stored or applied, noted by the function tool (the estate relay's audit hook; issue 4). */
  proposal?: { id: string; action: 'proposed' | 'applied'; path: string };
}

/**
 * One call as the router sees it: the fields of the broker's `BrokerCall` (broker/types.ts,
 * which extends this) that `ToolRouter.dispatch` reads and writes. The router writes
 * `endedAs`, `requestError` and `notes.stripped` (a function tool may write `notes.proposal`);
 * the rest it only reads, and the broker's stages set them.
 */
export interface RoutedCall {
  readonly callId: string;
  readonly request: RoutedRequest;
  readonly session: CallerSession;
  target?: ToolTarget;
  /** Absolute time (ms since the epoch) at which the call is cancelled as `timeout`. */
  deadline?: number;
  /** Absolute time past which no extension of the deadline goes (`maxTotalTimeoutMs`). */
  hardDeadline?: number;
  /**
   * Where the call's progress goes: the downstream client's sink (`request.onProgress`), wrapped
   * by the deadline stage to move the deadline when `extendOnProgress` is on. Absent when nobody
   * listens; then the upstream is given no progress token.
   */
  onProgress?: (update: ProgressUpdate) => void;
  /** Set by the judge when a human approved this call (policy `ask` or the tool's `requireApproval`). */
  approved?: boolean;
  /**
   * A modern caller's retry fields as the upstream is to get them (un-namespaced, the upstream's
   * own state unsealed), set by the relay stage (broker/relay-input.ts); absent for legacy callers.
   */
  inputRelay?: InputRelay;
  /**
   * Set with a refusal the caller is to get as a JSON-RPC error instead of a result (a
   * `requestState` that fails verification: -32602, the spec's "reject"; a modern upstream's -32021,
   * which the router passes on); the call is still recorded.
   */
  requestError?: { readonly code: number; readonly message: string; readonly data?: unknown };
  /** Aborted at the deadline or on downstream cancel; what the invoke stage passes upstream. */
  signal: CancelSignal;
  /** Extra fields for the record. */
  notes: RouteNotes;
  /**
   * W3C trace context of the attempt in progress (`traceparent`, `tracestate`, `baggage`), set by
   * the tracer before each attempt when tracing is on; the router sends it upstream in `_meta`
   * (and as headers to an HTTP upstream) in place of the caller's. Absent when tracing is off.
   */
  traceMeta?: TraceCarrier;
  /**
   * What a handler that settles on abort (`FunctionTool.settlesOnAbort`) said it left behind when
   * it failed after the call was cancelled or timed out (its first text line): the deadline stage
   * still settles the call `cancelled` / `timeout` and adds this to the reason.
   */
  endedAs?: string;
}
