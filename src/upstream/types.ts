/**
 * What the rest of the broker sees of one upstream, whatever its kind (stdio child, Streamable
 * HTTP, SSE, rest). One connection per upstream, shared by every downstream session; a stdio
 * upstream isolated per principal keeps one more per principal for that principal's calls (isolated.ts).
 */
import type { EventEmitter } from 'node:events';
import type { CallToolResult, ClientCapabilities, LoggingLevel, LoggingMessageNotification, Prompt, Resource, ResourceTemplateType, ServerCapabilities, Tool } from '@modelcontextprotocol/client';
import type { SessionNotify } from './url-elicitations.js';
import type { CancelSignal } from '../shared/cancel.js';

/** `connecting` → `ready`; a crash or failed dial → `failed` (and `backoff` until the restart); `closed` after close(). */
export type UpstreamState = 'idle' | 'connecting' | 'ready' | 'backoff' | 'failed' | 'closed' | 'disabled';

/** Why an upstream is not ready: a stable code plus human text (scrubbed before anyone sees it). */
export interface UpstreamStatus {
  state: UpstreamState;
  /** `spawn_failed`, `connect_failed`, `list_failed`, `exited`, `http_status`, … */
  errorCode?: string;
  httpStatus?: number;
  message?: string;
}

/** What an upstream lists, each list complete (pagination followed). */
export interface UpstreamCatalog {
  tools: Tool[];
  prompts: Prompt[];
  resources: Resource[];
  resourceTemplates: ResourceTemplateType[];
}

export type CatalogKind = keyof UpstreamCatalog;

/** Progress of one call as the upstream reported it. */
export interface ProgressUpdate {
  progress: number;
  total?: number;
  message?: string;
}

/**
 * A request an upstream sent to its client (sampling, elicitation, roots) during a call.
 * `sessionId`, when set, names the downstream session (or modern request) the handler answers
 * for: on a stdio or SSE upstream the calls of one such owner are in flight at a time (a handler
 * that names none is an owner of its own call; upstream/owner-gate.ts), and log messages tied to
 * the call (`UpstreamEvents.log`) go to that session.
 * `notify`, when set with `principal` (the session's), sends a notification to that session
 * outside any call: an upstream's `notifications/elicitation/complete` for a URL elicitation
 * relayed to it (url-elicitations.ts), which reaches the sessions of one principal only.
 */
export type ServerRequestHandler = ((request: { method: string; params?: Record<string, unknown> }, signal: AbortSignal) => Promise<Record<string, unknown>>) & {
  readonly sessionId?: string;
  readonly notify?: SessionNotify;
  readonly principal?: string;
};

export interface CallOptions {
  /** Aborting sends `notifications/cancelled` upstream for exactly this request (a `Cancellation` for a call from a direct lane, shared/cancel.ts; a real `AbortSignal` from other callers). */
  signal: CancelSignal;
  /** Upper bound for this attempt, in ms; the broker's deadline stage owns the real deadline. */
  timeoutMs: number;
  onProgress?: (update: ProgressUpdate) => void;
  /** Handles upstream→client requests sent while this call is in flight. */
  onServerRequest?: ServerRequestHandler;
  /** `_meta` of the downstream request, minus its progress token. */
  meta?: Record<string, unknown>;
  /**
   * Send the call as a 2025-11-25 task (the tool's `execution.taskSupport` is `required`): the
   * upstream answers a task at once, its result is then taken with `tasks/result` (which blocks
   * until the task is done), and aborting sends `tasks/cancel` for it.
   */
  asTask?: boolean;
  /**
   * The calling client, as a modern upstream is told in each request's `_meta`: the capabilities
   * it declared (at initialize for a legacy client) and the log level it asked for (absent: no
   * logs). Legacy upstreams ignore it: they were offered capabilities at initialize.
   */
  caller?: { clientCapabilities?: ClientCapabilities; logLevel?: LoggingLevel };
  /**
   * Told the names of arguments the upstream dropped before sending (a rest tool sends only its
   * allowlisted ones); the router puts them in the call record's `stripped`. Called at most once.
   */
  onArgumentsStripped?: (names: string[]) => void;
  /** A modern caller's retry fields for a modern upstream ({@link InputRelay}); absent: a legacy caller's input requests are bridged. */
  inputRelay?: InputRelay;
  /**
   * Told, at most once per attempt, that a 2026-07-28 upstream answered this call with a task of
   * its own (the tasks extension, offered when the upstream declares it): the call goes on
   * following that task (polls, input requests through {@link onServerRequest}, cancel on
   * `signal`), and `callTool` answers once the task ends. Lets a caller answer its own request
   * with a task of the broker's meanwhile (transports/modern-tasks.ts). Absent: the call just waits.
   */
  onUpstreamTask?: (task: UpstreamTaskStarted) => void;
  /**
   * The principal the call is made for (`local` for the stdio client): an upstream isolated per
   * principal (`isolation: "principal"`, isolated.ts) sends it on that principal's own connection.
   * Absent: the shared connection.
   */
  principal?: string;
}

/** An upstream's own task as it answered a call (`resultType: "task"`): what {@link CallOptions.onUpstreamTask} is told. */
export interface UpstreamTaskStarted {
  /** The upstream's task id: stays inside the broker (callers see the broker's own ids). */
  readonly taskId: string;
  /** Its first status (`working`, `input_required`, …), when it gave one. */
  readonly status?: string;
  /** The poll interval it suggested, in ms, when it gave one. */
  readonly pollIntervalMs?: number;
}

/**
 * Set when the caller is modern (2026-07-28): a modern upstream's `input_required` answer is
 * returned as the result (its input requests' params scrubbed) instead of being put to the
 * caller as live requests, and the first round carries these fields (the broker has un-namespaced
 * and unsealed them: broker/relay-input.ts). Legacy upstreams ignore it.
 */
export interface InputRelay {
  /** The caller's answers to the upstream's input requests, under the upstream's own keys. */
  readonly inputResponses?: Record<string, unknown>;
  /** The upstream's own `requestState`, byte for byte as it sent it. */
  readonly requestState?: string;
}

/** Options of {@link Upstream.request}. */
export interface RequestOptions {
  signal?: AbortSignal;
  /** Upper bound of the request, in ms. */
  timeoutMs: number;
  /** The calling client, told to a modern upstream in `_meta` ({@link CallOptions.caller}); absent for the broker's own requests. */
  caller?: CallOptions['caller'];
  /** Answers a modern upstream's `input_required` to `prompts/get` or `resources/read` (as {@link CallOptions.onServerRequest}). */
  onServerRequest?: ServerRequestHandler;
  /** As {@link CallOptions.inputRelay}, for `prompts/get` and `resources/read`. */
  inputRelay?: InputRelay;
  /** As {@link CallOptions.principal}; absent for the broker's own requests (lists, subscriptions). */
  principal?: string;
}

export interface UpstreamEvents {
  /** A catalog list changed (after a refresh, a crash or a reconnect). */
  changed: [kind: CatalogKind];
  /** The state changed. */
  state: [status: UpstreamStatus];
  /** `notifications/resources/updated` from the upstream. */
  resourceUpdated: [uri: string];
  /**
   * `notifications/message` from the upstream, with the downstream session it is provably tied
   * to: it arrived on the response stream of a call made for that session. Undefined: it belongs
   * to no call we can name (stdio, SSE, a Streamable HTTP upstream's standalone stream).
   */
  log: [params: LoggingMessageNotification['params'], owner: string | undefined];
}

export interface Upstream extends EventEmitter<UpstreamEvents> {
  /** The server key in `servers.json`. */
  readonly name: string;
  readonly kind: 'stdio' | 'http' | 'sse' | 'rest';
  readonly status: UpstreamStatus;
  readonly catalog: UpstreamCatalog;
  /**
   * The protocol era the connection speaks once ready: `modern` (2026-07-28, no `initialize`,
   * per-request `_meta`) or `legacy` (2025-11-25 and older); undefined before the first dial and
   * for kinds that speak no MCP (rest).
   */
  readonly era?: 'modern' | 'legacy';
  /** What the upstream declared at initialize (or in `server/discover`), once ready. */
  readonly capabilities: ServerCapabilities | undefined;
  /** The `instructions` the upstream gave at initialize, once ready; absent when it gave none. */
  readonly instructions?: string;
  /** Exact secret values injected into this upstream (env, headers) for scrubbing. */
  readonly secrets: readonly string[];
  /**
   * Loads what the config points at (files such as an OpenAPI document) without connecting.
   * Throws {@link ConfigError} for a bad file. Optional: kinds with nothing to load omit it.
   */
  prepare?(): Promise<void>;
  /** First dial. Never throws: a failure shows in `status`. */
  start(): Promise<void>;
  /** Close, then dial once (seed 004). A failure leaves it disconnected with its tools withdrawn. */
  reconnect(): Promise<UpstreamStatus>;
  close(): Promise<void>;
  /**
   * One attempt of a tool call. A Streamable HTTP upstream that answers 404 for the session the
   * request carried rejects with `BrokerError` `session_lost` (or `upstream_session_lost`, see
   * upstream/session-lost.ts) once a new session was tried: the request was not processed.
   */
  callTool(toolName: string, args: Record<string, unknown> | undefined, options: CallOptions): Promise<CallToolResult>;
  /** Any other request (prompts/get, resources/read, completion/complete, resources/subscribe, …). */
  request(method: string, params: Record<string, unknown> | undefined, options: RequestOptions): Promise<Record<string, unknown>>;
  /**
   * Asks for `notifications/resources/updated` of `uri` (emitted as `resourceUpdated`): the era's
   * way, `resources/subscribe` (2025-11-25) or a `subscriptions/listen` naming it (2026-07-28).
   * Optional: without it the resource router sends `resources/subscribe` through {@link request}.
   * @param timeoutMs deadline of the upstream's answer (or acknowledgement), in ms
   */
  subscribeResource?(uri: string, timeoutMs: number): Promise<void>;
  /** Undoes {@link subscribeResource} for `uri`. */
  unsubscribeResource?(uri: string, timeoutMs: number): Promise<void>;
  /**
   * Fetches list `kind` again when the upstream's cache hints say it is stale (a modern upstream
   * without `listChanged`, past its `ttlMs`); resolves once `catalog` holds what is fresh. Never throws.
   */
  freshen?(kind: CatalogKind): Promise<void>;
}
