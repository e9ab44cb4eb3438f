/**
 * One MCP upstream over stdio, Streamable HTTP or SSE: dial, list, serve calls, watch for
 * crashes and restart with capped exponential backoff (cases F08, F10, F12).
 *
 * - A dial is complete only when every catalog list it declared has been fetched with
 *   pagination followed; a failing `tools/list` fails the dial and it is retried, never left
 *   "connected with zero tools" (F12).
 * - A crash rejects every in-flight request at once (the SDK rejects pending requests with
 *   `SdkError` `ConnectionClosed` when the transport closes; F08), withdraws the catalog (`changed`), and schedules a
 *   restart after `initialDelayMs · 2^n` (jittered, capped at `maxDelayMs`).
 * - Progress uses the broker's own token per call, so no progress event is lost to the SDK's
 *   response/notification ordering, and each update reaches exactly the call it belongs to (F02).
 * - Timeouts are always explicit (F18): the SDK's 60 s default never applies.
 * - A log message is tied to a call only when it arrived on that call's own response stream (a
 *   Streamable HTTP upstream; call-stream-logs.ts), and then carries the session the call was
 *   made for; every other one (stdio, SSE, the standalone GET stream) belongs to no call, whatever
 *   is in flight when it arrives.
 * - An upstream→client request (sampling, elicitation, roots) goes to the route of the call on
 *   whose response stream it arrived (Streamable HTTP), whatever else is in flight. Arriving
 *   elsewhere (stdio, SSE) it carries no link to its call, so on such an upstream that was offered
 *   sampling, elicitation or roots the calls of one caller (a legacy session, or one modern
 *   request) are in flight at a time (owner-gate.ts): `tools/call`, `prompts/get`,
 *   `resources/read` and `completion/complete` of another caller wait their turn, first come first
 *   served, inside their own deadline; a held call (a modern caller's retry awaited) keeps its
 *   turn until it ends. The request then goes to that caller's newest route. Should calls of
 *   several callers be in flight all the same (a Streamable HTTP upstream's GET stream), it is
 *   refused (`ambiguous_caller`, -32603 to the upstream), never guessed.
 * - A Streamable HTTP upstream that answers HTTP 404 to a request carrying our `Mcp-Session-Id`
 *   no longer knows that session (it restarted, or expired it): the spec (2025-11-25, "Session
 *   Management") says to start a new session with a new `initialize`. The connection is re-dialled
 *   once per lost session, however many calls met the 404 at once, keeping its catalog listed
 *   meanwhile (calls arriving during the re-dial wait for it); the failed call is rejected with
 *   `BrokerError` `session_lost` (see {@link McpUpstream.callTool}) for the broker path to retry.
 * - The era is negotiated per upstream (`server/discover` first; era-memory.ts) and the verdict
 *   remembered in the store: a dial with a remembered verdict sends no probe, and when that verdict
 *   fails the dial (the upstream changed) the upstream is probed again at once. A stdio child that
 *   drops the connection on the probe is legacy. On a modern connection calls carry the caller's
 *   own `_meta` and are bridged for input (modern-call.ts); tools with an invalid `x-mcp-header`
 *   are left out of the catalog with a warning.
 * - Modern resource subscriptions ride one `subscriptions/listen` naming every subscribed URI
 *   ({@link McpUpstream.subscribeResource}); list changes ride another (`listChanged` kinds).
 * - Cache hints (2026-07-28 `ttlMs` on a modern upstream's lists): a list that no `listChanged`
 *   will ever invalidate is fetched again on the next downstream list once its `ttlMs` has
 *   passed, at most once per {@link MIN_LIST_REFETCH_MS} and never polled
 *   ({@link McpUpstream.freshen}); `cacheScope` is not kept: the broker's own answers are always
 *   `ttlMs: 0`, `private` (transports/session.ts), so an upstream's `public` never reaches a client.
 * - URL-mode elicitation: an `elicitation/create` with `mode: "url"` and a -32042 answer to a call
 *   note their `elicitationId`s for the calling session, and the upstream's
 *   `notifications/elicitation/complete` goes to that session only (url-elicitations.ts).
 */
import { EventEmitter } from 'node:events';
import { Client, isSpecType, ProtocolError, ProtocolErrorCode, RELATED_TASK_META_KEY, SdkError, SdkErrorCode, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/core';
import type { Transport, CallToolResult, ClientCapabilities, McpSubscription, PriorDiscovery, ServerCapabilities, Tool } from '@modelcontextprotocol/client';
import { z } from 'zod';
import type { HttpServerConfig, SseServerConfig, StdioServerConfig } from '../config/schema.js';
import { toAbortSignal, type CancelSignal } from '../shared/cancel.js';
import { extend, hasOwnMember } from '../shared/extend.js';
import { BrokerError, messageOf } from '../shared/errors.js';
import { InflightTable } from '../shared/inflight.js';
import { credentialValues, Scrubber } from '../shared/scrub.js';
import type { Clock } from '../shared/clock.js';
import type { Logger } from '../shared/logger.js';
import type { ArrivedNotification, CallStreamSink } from '../wire/call-stream-logs.js';
import { ChildProcessTransport } from './child-transport.js';
import { DirectCalls } from '../wire/direct-calls.js';
import { answerMalformedRequests, answerMalformedResponses } from '../wire/message-shape.js';
import { EraMemory, type EraVerdictStore, type ProtocolEraName } from './era-memory.js';
import { FallbackTransport } from './fallback-transport.js';
import { OwnerGate, type GateRelease } from './owner-gate.js';
import { mcpParamHeaders, scanMcpHeaders, type McpHeaderDeclaration } from './mcp-param-headers.js';
import { callerMeta, callModern, INPUT_REQUIRED_METHODS } from './modern-call.js';
import { isSessionNotFound, sessionLostError, sessionLostInFlightError, untilAborted } from './session-lost.js';
import { createUpstreamTransport, dialFailure } from './upstream-transport.js';
import { acceptTaskResults, declaresTasksExtension } from './upstream-task.js';
import { UpstreamScrub } from './upstream-scrub.js';
import { shownStderrLine } from './stderr-line.js';
import { elicitationIdsOf, UrlElicitations } from './url-elicitations.js';
import type {
  CallOptions,
  CatalogKind,
  RequestOptions,
  ServerRequestHandler,
  Upstream,
  UpstreamCatalog,
  UpstreamEvents,
  UpstreamStatus,
} from './types.js';

/** Results pass through untouched: no schema copy of large payloads on the hot path. */
const AnyObject = z.custom<Record<string, unknown>>((v) => typeof v === 'object' && v !== null);

/** Most pages followed for one list, so a looping cursor cannot hang a dial. */
const MAX_PAGES = 1000;
/** A connection that stayed ready this long resets its restart backoff, in ms. */
const STABLE_AFTER_MS = 10_000;

/**
 * Shortest time a modern upstream's list is held before {@link McpUpstream.freshen} fetches it
 * again, in ms, whatever its `ttlMs` (0 included): a downstream client listing in a loop costs
 * the upstream at most one list per second.
 */
export const MIN_LIST_REFETCH_MS = 1000;
/** Headroom given to the SDK's own timer beyond ours, so our deadline always fires first, in ms. */
const SDK_TIMEOUT_HEADROOM_MS = 5_000;
/**
 * Longest wait for the answer to the `server/discover` probe, in ms (bounded by the server's
 * `connectTimeoutMs`). A silent stdio server is legacy once it passes; over HTTP it fails the dial.
 */
const PROBE_TIMEOUT_MS = 5_000;

/**
 * Requests other than `tools/call` that a caller makes and that pass the owner gate: the server
 * features an upstream's sampling or elicitation request may be nested in (2025-11-25
 * `client/sampling`, `client/elicitation`), and completion. The broker's own requests (lists,
 * `resources/subscribe` for every session at once, ping) are made for no caller and are no
 * feature a request is nested in, so they pass no gate: while they alone are in flight an
 * upstream request meets `no_caller`, and while a caller holds the gate it is that caller's.
 */
const FEATURE_METHODS: ReadonlySet<string> = new Set(['prompts/get', 'resources/read', 'completion/complete']);

/**
 * Whom a call's upstream→client requests belong to (the gate's owner, the route's key): the
 * downstream session, or the modern request, its handler names (`ServerRequestHandler.sessionId`);
 * a call whose handler names none (or that has none) is an owner of its own.
 */
function ownerOf(handler: ServerRequestHandler | undefined, routeId: number): string {
  return handler?.sessionId !== undefined ? `session:${handler.sessionId}` : `call:${routeId}`;
}

/**
 * The route of a call made with no way to answer an upstream's request (an admin API call, a
 * parked call run after its approval, a flow started over the API): an owner of its own whose
 * requests are refused. Without it such a call had no route, so a request it caused went to
 * whichever other caller's call was in flight (another principal's client saw its prompt, and
 * the answer came back from there); and while it is in flight, a request that names no call is
 * ambiguous, as with any two owners.
 */
function unanswerable(owner: string): ServerRequestHandler {
  const refuse = async (request: { method: string }): Promise<Record<string, unknown>> => {
    throw new BrokerError('no_caller', `${request.method} was asked during a call whose caller cannot answer it (no client session)`);
  };
  return Object.assign(refuse, { sessionId: owner });
}

export interface McpUpstreamOptions {
  name: string;
  /**
   * Whether more than one principal may call through this connection (read at each use: a
   * config reload may add principals). Then a Streamable HTTP upstream's request on its
   * standalone GET stream, tied to no call, is refused rather than put to whoever's call is in
   * flight. Default false.
   */
  sharedByPrincipals?: () => boolean;
  config: StdioServerConfig | HttpServerConfig | SseServerConfig;
  logger: Logger;
  clock: Clock;
  /** Names inherited from our environment by stdio children. */
  inheritEnv: readonly string[];
  maxMessageBytes: number;
  restart: { initialDelayMs: number; maxDelayMs: number };
  /** Capabilities offered to the upstream (those the downstream client declared). */
  clientCapabilities?: ClientCapabilities;
  /** Used for `node` commands; default `process.execPath`. */
  nodePath?: string;
  /**
   * Scrubs the params of requests this upstream sends toward the client (elicitation,
   * sampling, roots); the gateway's one scrubber. Default one that knows no exact secrets.
   */
  scrubber?: Scrubber;
  /** Injected `fetch` for HTTP kinds (tests). */
  fetch?: typeof fetch;
  version?: string;
  /** Where the upstream's era verdict is remembered (the gateway's store); absent: every dial probes. */
  eras?: EraVerdictStore;
  /** `broker.legacyEraMaxAgeMs`, in ms; default a day. */
  legacyEraMaxAgeMs?: number;
}

const EMPTY_CATALOG = (): UpstreamCatalog => ({ tools: [], prompts: [], resources: [], resourceTemplates: [] });

export class McpUpstream extends EventEmitter<UpstreamEvents> implements Upstream {
  readonly name: string;
  readonly kind: 'stdio' | 'http' | 'sse';
  readonly secrets: readonly string[];
  status: UpstreamStatus = { state: 'idle' };
  catalog: UpstreamCatalog = EMPTY_CATALOG();
  capabilities: ServerCapabilities | undefined;
  era: ProtocolEraName | undefined;
  instructions: string | undefined;

  private client?: Client;
  private readonly eraMemory: EraMemory;
  /** Modern connections: each listed tool's `x-mcp-header` parameters, by its own name. */
  private headerDeclarations = new Map<string, McpHeaderDeclaration[]>();
  private transport?: Transport;
  /** `tools/call` on the current transport, past the SDK `Protocol` (issue 6). */
  private direct?: DirectCalls;
  private generation = 0;
  private failures = 0;
  private readyAt = 0;
  private cancelRestart?: () => void;
  private autoRestart = true;
  private progressSeq = 0;
  /** Each call's progress route, by the token sent upstream (an {@link InflightTable}, as the next). */
  private readonly progress = new InflightTable<string, NonNullable<CallOptions['onProgress']>>();
  /**
   * Calls in flight with a handler for upstream→client requests, newest last, with their owner
   * ({@link ownerOf}) and the call's signal (a request relayed for it is cancelled when it aborts).
   * An {@link InflightTable}: a finished call's handler (its session's closures) is not kept past it.
   */
  private readonly requestRoutes = new InflightTable<number, { handler: ServerRequestHandler; owner: string; signal?: CancelSignal }>();
  private routeSeq = 0;
  /**
   * Lets one caller's calls be in flight at a time while upstream→client requests cannot be
   * attributed ({@link gated}); calls of every dial pass the same gate.
   */
  private readonly gate = new OwnerGate();
  /** What the current connection was offered at its dial (its request handlers: installHandlers). */
  private offered: ClientCapabilities = {};
  /**
   * Upstream→client requests that arrived on a call's own response stream (a Streamable HTTP
   * upstream; call-stream-logs.ts): their JSON-RPC id → the owner (`ServerRequestHandler.sessionId`) of that call.
   */
  private readonly requestOwners = new Map<string, string>();
  /** Upstream→client requests that arrived on a Streamable HTTP upstream's standalone GET stream (call-stream-logs.ts): their JSON-RPC ids, refused by the route. */
  private readonly standaloneRequests = new Set<string>();
  private refreshing = new Map<CatalogKind, Promise<void>>();
  /** Failure reasons already logged at error/warn since the upstream was last ready ({@link logFailure}). */
  private readonly loggedFailures = new Set<string>();
  private clientCapabilities: ClientCapabilities;
  private readonly scrub: UpstreamScrub;
  /** URIs downstream sessions subscribed to here; on a modern connection, the `resourceSubscriptions` of {@link resourceListen}. */
  private readonly resourceUris = new Set<string>();
  /** When each list of a modern upstream goes stale by its `ttlMs` (ms since the epoch; {@link freshen}). */
  private readonly staleAt = new Map<CatalogKind, number>();
  /** The open `subscriptions/listen` naming {@link resourceUris} (modern only), with the dial it belongs to. */
  private resourceListen?: { generation: number; subscription: McpSubscription };
  /** Reopenings of {@link resourceListen}, one after another. */
  private resourceListenQueue: Promise<void> = Promise.resolve();
  /** URL elicitations relayed to a session, awaiting this upstream's `notifications/elicitation/complete`. */
  private readonly urlElicitations: UrlElicitations;
  /**
   * The re-dial after the upstream said it no longer knows session `lost` (HTTP 404), one per
   * lost session; kept after it settled, for calls whose 404 for that session comes later.
   * `answered`: whether the lost session had answered a call (see {@link sessionAnswered}).
   */
  private renewal?: { lost: string; answered: boolean; done: Promise<void>; settled: boolean };
  /**
   * Whether the current session has answered a call with a result, or was opened by a dial that
   * is not a renewal. Losing any other session counts as failing (`upstream_session_lost`), so
   * an upstream that loses every new session opens the breaker instead of being renewed for free.
   */
  private sessionAnswered = true;

  constructor(private readonly options: McpUpstreamOptions) {
    super();
    this.scrub = new UpstreamScrub(options.scrubber ?? new Scrubber());
    this.name = options.name;
    const config = options.config;
    this.kind = 'command' in config ? 'stdio' : config.type === 'sse' ? 'sse' : 'http';
    this.secrets = credentialValues('command' in config ? config.env : config.headers);
    this.clientCapabilities = options.clientCapabilities ?? {};
    this.urlElicitations = new UrlElicitations(() => options.clock.now());
    this.eraMemory = new EraMemory({
      name: options.name,
      config,
      store: options.eras,
      clock: options.clock,
      logger: options.logger,
      legacyMaxAgeMs: options.legacyEraMaxAgeMs ?? 24 * 60 * 60 * 1000,
    });
  }

  /** Sets the capabilities offered at the next dial. */
  setClientCapabilities(capabilities: ClientCapabilities): void {
    this.clientCapabilities = capabilities;
  }

  async start(): Promise<void> {
    if (this.options.config.disabled) {
      this.setStatus({ state: 'disabled' });
      return;
    }
    await this.dial();
  }

  async reconnect(): Promise<UpstreamStatus> {
    this.autoRestart = false;
    this.cancelRestart?.();
    await this.teardown('reconnect');
    this.failures = 0;
    // An operator's re-dial is news: its failure is logged even when a restart failed so before.
    this.loggedFailures.clear();
    await this.dial();
    // A manual redial that fails leaves the upstream disconnected (seed 004): no silent retries.
    this.autoRestart = this.status.state === 'ready';
    return this.status;
  }

  async close(): Promise<void> {
    this.autoRestart = false;
    this.cancelRestart?.();
    // A child whose dial has not finished is not in use; one still booting would not see its
    // stdin close until it has loaded (a Node server: ~100 ms or more), so it is ended at once
    // instead of after the grace a served child gets. A negotiating client's disposable probe
    // process shuts the broker down right after `server/discover`, while its children boot.
    if (this.status.state === 'connecting' && this.transport instanceof ChildProcessTransport && this.transport.kill('SIGTERM')) {
      this.options.logger.debug('upstream not ready at close: ended at once (SIGTERM)');
    }
    await this.teardown('close');
    this.setStatus({ state: 'closed' });
  }

  /** Ends a stdio child's process group at once (shutdown by signal). */
  kill(): void {
    this.autoRestart = false;
    this.cancelRestart?.();
    if (this.transport instanceof ChildProcessTransport) this.transport.kill();
  }

  /**
   * One `tools/call` attempt. Rejects with `BrokerError` `upstream_unavailable` when not connected;
   * with `BrokerError` `session_lost` (data `{httpStatus: 404}`) when a Streamable HTTP upstream
   * answered 404 for the session the request carried: then a new session is open (or the
   * re-dial failed, see `status`) by the time it rejects, and the upstream never processed the
   * request (a 404 for the session refuses it before any handler runs), so the caller may send it
   * again. A session lost before it answered any call rejects with `upstream_session_lost`
   * instead: an upstream that loses every session it opens is failing.
   */
  callTool(toolName: string, args: Record<string, unknown> | undefined, options: CallOptions): Promise<CallToolResult> {
    // Nothing to wait for (no session renewal, a free or no gate): sent in this very turn.
    const renewal = this.renewal;
    if (renewal && !renewal.settled) return this.untilRenewed(options.signal).then(() => this.callToolNow(toolName, args, options));
    return this.callToolNow(toolName, args, options);
  }

  /** {@link callTool} once no session renewal is under way. */
  private callToolNow(toolName: string, args: Record<string, unknown> | undefined, options: CallOptions): Promise<CallToolResult> {
    const routeId = ++this.routeSeq;
    const owner = ownerOf(options.onServerRequest, routeId);
    if (!this.gated()) return this.sendToolCall(toolName, args, options, routeId, owner);
    // Every tools/call passes the gate, with a handler or without: its tool may ask, and a request
    // with no handler of its own must not be taken for another caller's.
    const release = this.gate.tryEnter(owner);
    if (release) return this.sendToolCall(toolName, args, options, routeId, owner).finally(release);
    return this.gateTurn(owner, options.signal, 'tools/call').then((turn) => this.sendToolCall(toolName, args, options, routeId, owner).finally(turn));
  }

  /** {@link callTool} once its turn at the gate came. */
  private async sendToolCall(toolName: string, args: Record<string, unknown> | undefined, options: CallOptions, routeId: number, owner: string): Promise<CallToolResult> {
    const client = this.readyClient();
    const session = this.sessionId();
    // A copy of the caller's `_meta` only when something is added to it or it has members.
    let meta: Record<string, unknown> | undefined = options.meta;
    let token: string | undefined;
    if (options.onProgress) {
      token = `${this.name}#${++this.progressSeq}`;
      this.progress.set(token, options.onProgress);
      meta = extend(meta, { progressToken: token });
    }
    const answering = options.onServerRequest ?? unanswerable(owner);
    this.requestRoutes.set(routeId, { handler: answering, owner, signal: options.signal });
    const params: Record<string, unknown> = { name: toolName, arguments: args ?? {} };
    const modern = this.era === 'modern';
    if (modern) meta = extend(meta, callerMeta(options.caller, this.followsTasks(options)));
    if (hasOwnMember(meta)) params._meta = meta === options.meta ? extend(meta, {}) : meta;
    try {
      let result: CallToolResult;
      if (options.asTask && !modern) {
        result = await this.callAsTask(client, params, options);
      } else if (modern) {
        const declarations = this.headerDeclarations.get(toolName);
        const headers = declarations?.length ? mcpParamHeaders(declarations, args) : undefined;
        const scrubbed = extend(options, {
          // The SDK's request takes a real AbortSignal (the broker's is a Cancellation: shared/cancel.ts).
          signal: toAbortSignal(options.signal),
          onServerRequest: this.scrubbedRoute(options.onServerRequest),
          scrubRequest: (p: Record<string, unknown> | undefined) => this.scrub.serverRequest(p),
          sleep: this.options.clock.sleep.bind(this.options.clock),
        });
        result = (await callModern(client, this.name, 'tools/call', params, scrubbed, options.timeoutMs + SDK_TIMEOUT_HEADROOM_MS, headers)) as CallToolResult;
      } else if (this.direct) {
        // A request on this call's own response stream is this call's route's.
        result = (await this.direct.request('tools/call', params, { signal: options.signal, timeoutMs: options.timeoutMs + SDK_TIMEOUT_HEADROOM_MS, owner: answering.sessionId })) as CallToolResult;
      } else {
        result = (await client.request({ method: 'tools/call', params }, AnyObject, {
          signal: toAbortSignal(options.signal),
          timeout: options.timeoutMs + SDK_TIMEOUT_HEADROOM_MS,
        })) as CallToolResult;
      }
      if (this.sessionId() === session) this.sessionAnswered = true;
      return result;
    } catch (err) {
      if (ProtocolError.isInstance(err) && err.code === ProtocolErrorCode.UrlElicitationRequired) throw this.urlElicitationRequired(err, options.onServerRequest);
      if (session !== undefined && isSessionNotFound(err)) throw await this.sessionLost(session, options.signal);
      // Closed under it by the renewal another request's 404 started (issue 17 §6).
      if (session !== undefined && (this.renewal?.lost === session || this.sessionId() !== session) && !options.signal?.aborted) throw sessionLostInFlightError(this.name);
      throw err;
    } finally {
      this.requestRoutes.delete(routeId);
      // Progress sent just before the response is dispatched a tick after it; keep the route briefly.
      if (token) setImmediate(() => this.progress.delete(token!));
    }
  }

  /**
   * The upstream answered a call with -32042 (URL elicitation required): the error as the client
   * is to see it (code kept, message and data scrubbed), its elicitations remembered for the
   * calling session so their completions reach it.
   */
  private urlElicitationRequired(err: ProtocolError, route: ServerRequestHandler | undefined): ProtocolError {
    const scrubbed = this.scrub.error(err, this.name);
    if (route?.notify && route.principal !== undefined) for (const id of elicitationIdsOf(scrubbed.data)) this.urlElicitations.expect(id, route.notify, route.principal);
    return scrubbed;
  }

  /**
   * A call to a tool that requires tasks (2025-11-25): `tools/call` with `task`, then
   * `tasks/result`, which the upstream answers once the task is done. The upstream's task id
   * stays inside this connection (the broker answers its own task ids), so ids of different
   * upstreams never meet. Aborting sends `tasks/cancel` (best effort) and rejects.
   */
  private async callAsTask(client: Client, params: Record<string, unknown>, options: CallOptions): Promise<CallToolResult> {
    const timeout = options.timeoutMs + SDK_TIMEOUT_HEADROOM_MS;
    const signal = toAbortSignal(options.signal);
    const created = (await client.request({ method: 'tools/call', params: { ...params, task: { ttl: options.timeoutMs } } } as never, AnyObject, {
      signal,
      timeout,
    })) as { task?: { taskId?: unknown } };
    const taskId = created.task?.taskId;
    if (typeof taskId !== 'string') return created as CallToolResult; // answered at once, not as a task
    const onAbort = () => void client.request({ method: 'tasks/cancel', params: { taskId } } as never, AnyObject, { timeout: 5_000 }).catch(() => undefined);
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const result = (await client.request({ method: 'tasks/result', params: { taskId } } as never, AnyObject, { signal, timeout })) as CallToolResult;
      return withoutRelatedTask(result);
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /**
   * Any other request. When a Streamable HTTP upstream answers 404 for our session, a new session
   * is opened and the request sent once more on it (these methods read, or set up what the new
   * session lacks: none applies a tool's write).
   */
  async request(method: string, params: Record<string, unknown> | undefined, options: RequestOptions): Promise<Record<string, unknown>> {
    if (!FEATURE_METHODS.has(method)) return this.sendRequest(method, params, options);
    // A caller's prompt, resource or completion: its route and its turn at the gate, as a tools/call's.
    const routeId = ++this.routeSeq;
    const owner = ownerOf(options.onServerRequest, routeId);
    const gated = this.gated();
    let release = gated ? this.gate.tryEnter(owner) : undefined;
    let sent = options;
    if (gated && !release) {
      // The wait counts inside the request's own bound.
      const started = this.options.clock.now();
      const bound = AbortSignal.timeout(options.timeoutMs);
      release = await this.gateTurn(owner, options.signal ? AbortSignal.any([options.signal, bound]) : bound, method);
      sent = { ...options, timeoutMs: Math.max(1, options.timeoutMs - (this.options.clock.now() - started)) };
    }
    this.requestRoutes.set(routeId, { handler: options.onServerRequest ?? unanswerable(owner), owner, signal: options.signal });
    try {
      return await this.sendRequest(method, params, sent);
    } finally {
      this.requestRoutes.delete(routeId);
      release?.();
    }
  }

  /** {@link request} once its turn at the gate came (or needing none). */
  private async sendRequest(method: string, params: Record<string, unknown> | undefined, options: RequestOptions): Promise<Record<string, unknown>> {
    const send = async () => {
      await this.untilRenewed(options.signal);
      const session = this.sessionId();
      try {
        const client = this.readyClient();
        let answer: Record<string, unknown>;
        if (this.era === 'modern' && options.caller) {
          // The caller's own capabilities and log level, and its answers to the upstream's questions (modern-call.ts).
          const withCaller = { ...params, _meta: { ...(params?._meta as Record<string, unknown> | undefined), ...callerMeta(options.caller) } };
          answer = INPUT_REQUIRED_METHODS.has(method)
            ? await callModern(
                client,
                this.name,
                method,
                withCaller,
                {
                  signal: options.signal,
                  onServerRequest: this.scrubbedRoute(options.onServerRequest),
                  inputRelay: options.inputRelay,
                  scrubRequest: (p) => this.scrub.serverRequest(p),
                },
                options.timeoutMs,
                undefined,
              )
            : await client.request({ method, params: withCaller } as never, AnyObject, { signal: options.signal, timeout: options.timeoutMs });
        } else {
          answer = await client.request({ method, params } as never, AnyObject, { signal: options.signal, timeout: options.timeoutMs });
        }
        // Any answer shows the session works, not only a tool call's (issue 17 §6).
        if (this.sessionId() === session) this.sessionAnswered = true;
        return answer;
      } catch (err) {
        if (session !== undefined && isSessionNotFound(err)) throw await this.sessionLost(session, options.signal);
        throw err;
      }
    };
    try {
      return await send();
    } catch (err) {
      if (err instanceof BrokerError && err.code === 'session_lost' && this.status.state === 'ready') return send();
      throw err;
    }
  }

  /**
   * Asks for `notifications/resources/updated` of `uri`. Legacy: `resources/subscribe` (through
   * {@link request}). Modern (2026-07-28 has no `resources/subscribe`): `uri` joins the
   * `resourceSubscriptions` of this connection's one resource listen, reopened with the new set
   * (the new listen acknowledged before the old one is closed, so no update falls between them);
   * the set carries over to a re-dial (a legacy upstream is sent `resources/subscribe` for each
   * again once the new connection is ready: its subscriptions were the old connection's). Rejects when the upstream refuses or does not acknowledge
   * within `timeoutMs` (ms); the URI stays wanted and is asked for again at the next change or dial.
   */
  async subscribeResource(uri: string, timeoutMs: number): Promise<void> {
    const known = this.resourceUris.has(uri);
    this.resourceUris.add(uri);
    if (this.era !== 'modern') {
      await this.request('resources/subscribe', { uri }, { timeoutMs });
      return;
    }
    if (!known || !this.resourceListen) await this.relistenResources(timeoutMs);
  }

  /** Undoes {@link subscribeResource}: `resources/unsubscribe` (legacy), or the listen reopened without `uri` (closed when none is left). */
  async unsubscribeResource(uri: string, timeoutMs: number): Promise<void> {
    if (!this.resourceUris.delete(uri)) return;
    if (this.era !== 'modern') {
      await this.request('resources/unsubscribe', { uri }, { timeoutMs });
      return;
    }
    await this.relistenResources(timeoutMs);
  }

  /** Replaces the resource listen with one naming {@link resourceUris} now (none: closed); queued behind any reopening in progress. */
  private relistenResources(timeoutMs: number): Promise<void> {
    const run = this.resourceListenQueue.then(async () => {
      const client = this.client;
      const generation = this.generation;
      if (!client || this.era !== 'modern') return;
      const old = this.resourceListen;
      const uris = [...this.resourceUris];
      try {
        if (uris.length) {
          const subscription = await client.listen({ resourceSubscriptions: uris }, { timeout: timeoutMs });
          this.resourceListen = { generation, subscription };
          void subscription.closed.then((reason) => {
            if (reason !== 'local' && this.resourceListen?.subscription === subscription && generation === this.generation) {
              this.resourceListen = undefined;
              this.options.logger.warn({ reason }, 'upstream resource subscriptions/listen stream ended; resource updates are not seen until the next subscribe or dial');
            }
          });
        } else {
          this.resourceListen = undefined;
        }
      } finally {
        if (old && old.generation === generation && old !== this.resourceListen) await old.subscription.close().catch(() => undefined);
      }
    });
    this.resourceListenQueue = run.catch(() => undefined);
    return run;
  }

  /**
   * Whether calls pass the owner gate now: the connection speaks 2025-11-25 (a modern upstream
   * asks through `input_required`, on the call's own answer), it was offered sampling, elicitation
   * or roots (else it cannot ask at all), and its transport carries the upstream's requests apart
   * from any call (stdio, SSE; a Streamable HTTP upstream sends them on the call's own response
   * stream, see {@link callStreamLogSink}).
   */
  private gated(): boolean {
    if (this.era !== 'legacy' || !(this.offered.sampling || this.offered.elicitation || this.offered.roots)) return false;
    const transport = this.transport instanceof FallbackTransport ? this.transport.active : this.transport;
    return !(transport instanceof StreamableHTTPClientTransport);
  }

  /**
   * Waits for the turn of a call of `owner` at the gate. Rejects when `signal` aborts first (the
   * call's deadline, a cancel, shutdown) with `BrokerError` `owner_gate_wait` marked not sent, the
   * reason as its `cause`.
   */
  private async gateTurn(owner: string, signal: CancelSignal | undefined, method: string): Promise<GateRelease> {
    this.options.logger.debug({ method, waiting: this.gate.waiting + 1 }, 'call waits for its turn: calls of another caller are in flight on this upstream');
    try {
      return await this.gate.enter(owner, signal);
    } catch (err) {
      throw new BrokerError('owner_gate_wait', `${method} to upstream "${this.name}" ended while waiting for the calls of another caller to end (${messageOf(err)}); nothing was sent`, {
        cause: err,
        data: { sent: false },
      });
    }
  }

  /** `route` with the params of what it is asked scrubbed, as the upstream's own requests to the client are. */
  private scrubbedRoute(route: ServerRequestHandler | undefined): ServerRequestHandler | undefined {
    if (!route) return undefined;
    const scrubbed = (r: { method: string; params?: Record<string, unknown> }, signal: AbortSignal) => route({ method: r.method, params: this.scrub.serverRequest(r.params) }, signal);
    return Object.assign(scrubbed, { sessionId: route.sessionId });
  }

  /** The `Mcp-Session-Id` of a Streamable HTTP connection; undefined for other kinds and before one is assigned. */
  private sessionId(): string | undefined {
    if (this.kind !== 'http') return undefined;
    const id = (this.transport as { sessionId?: unknown } | undefined)?.sessionId;
    return typeof id === 'string' ? id : undefined;
  }

  /** Waits for a session renewal in progress, if any (rejects only when `signal` aborts). */
  private async untilRenewed(signal: CancelSignal | undefined): Promise<void> {
    const renewal = this.renewal;
    if (renewal && !renewal.settled) await untilAborted(renewal.done, signal);
  }

  /**
   * The upstream answered 404 for session `lost`: opens a new session (one re-dial for every
   * call that met the 404 of one session) and returns the error the failed call rejects with.
   */
  private async sessionLost(lost: string, signal: CancelSignal | undefined): Promise<BrokerError> {
    const renewal = this.renewSession(lost);
    await untilAborted(renewal.done, signal);
    return sessionLostError(this.name, renewal.answered, this.status);
  }

  /**
   * The re-dial for lost session `lost`: a second caller for the same session shares it. When the
   * connection is on another session already (this caller's 404 came late) or a reconnect or a
   * crash owns it, nothing is re-dialled.
   */
  private renewSession(lost: string): { answered: boolean; done: Promise<void> } {
    if (this.renewal?.lost === lost) return this.renewal;
    if (this.sessionId() !== lost || this.status.state !== 'ready') return { answered: false, done: Promise.resolve() };
    this.options.logger.warn('upstream session not found (HTTP 404); opening a new session');
    const renewal = { lost, answered: this.sessionAnswered, settled: false, done: Promise.resolve() };
    renewal.done = (async () => {
      this.cancelRestart?.();
      const closing = this.teardown('session lost', { keepCatalog: true });
      const generation = this.generation;
      await closing;
      // A close() or reconnect() while the old connection closed owns the upstream now.
      if (generation !== this.generation) return;
      await this.dial();
      // A session a renewal opened has to answer a call before losing it is free again.
      if (this.status.state === 'ready') this.sessionAnswered = false;
    })().finally(() => (renewal.settled = true));
    this.renewal = renewal;
    return renewal;
  }

  private readyClient(): Client {
    if (this.status.state !== 'ready' || !this.client) {
      throw new BrokerError('upstream_unavailable', `upstream "${this.name}" is not connected (${this.status.state}${this.status.message ? `: ${this.status.message}` : ''})`, {
        data: { status: this.status },
      });
    }
    return this.client;
  }

  private async dial(): Promise<void> {
    const generation = ++this.generation;
    // A restart in progress still says why the last attempt failed, until this one settles.
    const last = this.status.state === 'backoff' || this.status.state === 'failed' ? this.status : undefined;
    this.setStatus({ state: 'connecting', ...(last?.errorCode ? { errorCode: last.errorCode } : {}), ...(last?.message ? { message: last.message } : {}) });
    const prior = await this.eraMemory.prior();
    if (generation !== this.generation) return;
    let failure = await this.connectWith(generation, prior, prior === undefined);
    if (failure === 'superseded') return;
    if (failure && prior && this.eraMemory.negotiates) {
      // The remembered verdict no longer holds (a stale modern one fails loudly): probe again.
      this.options.logger.info({ era: prior.kind, err: messageOf(failure.err) }, 'upstream dial with its remembered era failed; probing its era again');
      failure = await this.connectWith(generation, undefined, true);
    } else if (failure && !prior && this.kind === 'stdio' && isProbeDropped(failure.err)) {
      // A stdio server that ends the connection on a pre-initialize request is a legacy server.
      this.options.logger.info({ err: messageOf(failure.err) }, 'upstream dropped the connection on the era probe; connecting as legacy');
      failure = await this.connectWith(generation, { kind: 'legacy' }, true);
    }
    if (failure === 'superseded') return;
    if (failure) this.dialFailed(failure.err, failure.transport);
  }

  /**
   * One connect plus the first listing, with `prior` handed to the SDK (undefined: probe).
   * Resolves undefined when the upstream is ready, `superseded` when a newer dial, close or
   * reconnect took over meanwhile, else the failure (the client closed). `remember`: store the
   * era found, once ready.
   */
  private async connectWith(
    generation: number,
    prior: PriorDiscovery | undefined,
    remember: boolean,
  ): Promise<undefined | 'superseded' | { err: unknown; transport?: Transport }> {
    const log = this.options.logger;
    let transport: Transport;
    try {
      const callStreamLogs = Object.assign((requestId: string) => this.callStreamLogSink(requestId), {
        standalone: (id: string | number, method: string) => {
          if (!this.takesRequest(method)) return;
          this.standaloneRequests.add(String(id));
          // One the SDK refused before its handler ran is never taken back out: keep the newest only.
          if (this.standaloneRequests.size > MAX_NOTED_STANDALONE) this.standaloneRequests.delete(this.standaloneRequests.values().next().value!);
        },
      });
      transport = await createUpstreamTransport({ ...this.options, scrubber: this.scrub.scrubber, callStreamLogs });
    } catch (err) {
      // The SDK's HTTP transport modules failed to load: a failed dial like any other.
      return generation === this.generation ? { err } : 'superseded';
    }
    if (generation !== this.generation) return 'superseded';
    const timeoutMs = this.options.config.connectTimeoutMs;
    const probeTimeoutMs = Math.min(PROBE_TIMEOUT_MS, timeoutMs);
    const client = new Client(
      { name: 'mcp-broker', version: this.options.version ?? '0.0.0' },
      {
        capabilities: this.clientCapabilities,
        versionNegotiation: this.eraMemory.negotiates
          ? { mode: 'auto', probe: { timeoutMs: probeTimeoutMs } }
          : { mode: 'legacy' },
        // Input requests of a modern upstream are answered per call (modern-call.ts), never by the SDK.
        inputRequired: { autoFulfill: false },
      },
    );
    this.installHandlers(client);
    this.client = client;
    this.transport = transport;
    this.direct = undefined;
    try {
      const connectStarted = this.options.clock.now();
      // A modern upstream's `resultType: "task"` answers reach modern-call.ts (upstream-task.ts).
      await client.connect(acceptTaskResults(transport), { timeout: timeoutMs, ...(prior ? { prior } : {}) });
      if (generation !== this.generation) return 'superseded';
      const era = client.getProtocolEra() ?? 'legacy';
      if (remember && !prior && era === 'legacy' && this.options.clock.now() - connectStarted >= probeTimeoutMs) {
        // Legacy by silence (the probe timed out), not by an answer: a slow-starting 2026 server
        // looks the same, so the verdict is not remembered and the next dial asks again.
        remember = false;
        log.info({ probeTimeoutMs }, 'upstream did not answer the era probe in time; connected as legacy, verdict not remembered');
      }
      this.era = era;
      // Modern calls go through the SDK, which adds the per-request envelope and headers.
      answerMalformedResponses(transport, 'the upstream');
      answerMalformedRequests(transport);
      this.direct = era === 'legacy' ? new DirectCalls(transport) : undefined;
      // Both reach modern clients in the broker's `server/discover` (upstream/surface.ts): scrubbed like a catalog.
      this.capabilities = this.scrub.scrubber.value(client.getServerCapabilities());
      const instructions = client.getInstructions();
      this.instructions = instructions === undefined ? undefined : this.scrub.scrubber.text(instructions);
      const catalog = await this.fetchCatalog(client, timeoutMs);
      if (generation !== this.generation) return 'superseded';
      // Only the current dial's tools set the header marks its calls use (a superseded one's may not).
      catalog.tools = this.admitTools(catalog.tools);
      if (remember) await this.eraMemory.remember(era === 'modern' ? client.getDiscoverResult() : undefined);
      if (generation !== this.generation) return 'superseded';
      this.catalog = catalog;
      this.readyAt = this.options.clock.now();
      this.sessionAnswered = true;
      client.onclose = () => this.onLost(generation);
      this.setStatus({ state: 'ready' });
      this.loggedFailures.clear();
      for (const kind of Object.keys(catalog) as CatalogKind[]) this.emit('changed', kind);
      log.info({ era, tools: catalog.tools.length, prompts: catalog.prompts.length, resources: catalog.resources.length }, 'upstream ready');
      if (era === 'modern') {
        void this.listenForChanges(client, generation, timeoutMs);
        // Subscriptions made before a re-dial carry over to the new connection.
        if (this.resourceUris.size) void this.relistenResources(timeoutMs).catch((err) => log.warn({ err: messageOf(err) }, 'upstream resource subscriptions/listen failed after dial'));
      } else if (this.resourceUris.size && this.capabilities?.resources?.subscribe) {
        // A legacy server's subscriptions belong to its connection (a restarted process, a new
        // session): the broker still holds them (upstream/resources.ts), so each is asked for again.
        for (const uri of this.resourceUris) {
          void this.request('resources/subscribe', { uri }, { timeoutMs }).catch((err) => log.warn({ uri, err: messageOf(err) }, 'upstream resources/subscribe failed after dial'));
        }
      }
      return undefined;
    } catch (err) {
      if (generation !== this.generation) return 'superseded';
      client.onclose = undefined;
      await closeQuietly(client);
      this.client = undefined;
      return { err, transport };
    }
  }

  /**
   * A modern upstream sends list changes only on a `subscriptions/listen` stream its client opens:
   * opens one for the lists it says change (`listChanged`), so they reach the same handlers a
   * legacy upstream's unsolicited notifications do. One that fails or ends is logged and not
   * reopened until the next dial.
   */
  private async listenForChanges(client: Client, generation: number, timeoutMs: number): Promise<void> {
    const caps = this.capabilities ?? {};
    const filter = {
      ...(caps.tools?.listChanged ? { toolsListChanged: true } : {}),
      ...(caps.prompts?.listChanged ? { promptsListChanged: true } : {}),
      ...(caps.resources?.listChanged ? { resourcesListChanged: true } : {}),
    };
    if (Object.keys(filter).length === 0) return;
    try {
      const subscription = await client.listen(filter, { timeout: timeoutMs });
      const reason = await subscription.closed;
      if (generation === this.generation) this.options.logger.warn({ reason }, 'upstream subscriptions/listen stream ended; list changes are not seen until the next dial');
    } catch (err) {
      if (generation === this.generation) this.options.logger.warn({ err: messageOf(err) }, 'upstream subscriptions/listen failed; list changes are not seen until the next dial');
    }
  }

  /** Records a failed dial (status `failed`, tools withdrawn) and schedules the next one. */
  private dialFailed(err: unknown, transport?: Transport): void {
    const status = dialFailure(err, transport, (text) => this.scrub.scrubber.text(text));
    this.logFailure('error', status, 'upstream dial failed');
    this.withdraw();
    this.setStatus(status);
    this.scheduleRestart();
  }

  private installHandlers(client: Client): void {
    client.setNotificationHandler('notifications/progress', (n) => {
      const route = this.progress.get(String(n.params.progressToken));
      if (!route) return;
      const { progress, total, message } = n.params;
      route({ progress, total, message });
    });
    client.setNotificationHandler('notifications/tools/list_changed', () => void this.refresh('tools'));
    client.setNotificationHandler('notifications/prompts/list_changed', () => void this.refresh('prompts'));
    client.setNotificationHandler('notifications/resources/list_changed', async () => {
      await this.refresh('resources');
      await this.refresh('resourceTemplates');
    });
    client.setNotificationHandler('notifications/resources/updated', (n) => void this.emit('resourceUpdated', n.params.uri));
    // Only to the sessions the elicitation was relayed to, of one principal (url-elicitations.ts); an unknown id is dropped.
    client.setNotificationHandler('notifications/elicitation/complete', (n) => {
      const sent = this.urlElicitations.complete(n.params.elicitationId);
      if (sent === 'none') this.options.logger.debug('upstream elicitation/complete for an id no session is waiting on: dropped');
      if (sent === 'ambiguous') this.options.logger.warn('upstream elicitation/complete for an id it sent toward sessions of several principals: dropped, whose it is cannot be told');
    });
    // What reaches the SDK is tied to no call: calls in flight now prove nothing about its origin.
    client.setNotificationHandler('notifications/message', (n) => void this.emit('log', n.params, undefined));
    const caps = this.clientCapabilities;
    this.offered = caps;
    const route = (method: string) => async (req: { params?: unknown }, ctx: { mcpReq: { signal: AbortSignal; id?: string | number } }) => {
      // Arrived on a Streamable HTTP upstream's standalone GET stream: related to no request by
      // the transport's rules (a SHOULD: some servers send a call's questions there). With one
      // principal it goes to the caller in flight, as a stdio upstream's does; shared by several,
      // whoever's calls are in flight now may not have caused it (another principal's finished
      // call may have): refused, never guessed.
      if (ctx.mcpReq.id !== undefined && this.standaloneRequests.delete(String(ctx.mcpReq.id)) && this.options.sharedByPrincipals?.()) {
        throw new BrokerError('no_caller', `${method} from upstream "${this.name}" arrived on its standalone stream, related to no call; it is relayed to no client`);
      }
      const routes = [...this.requestRoutes.values()];
      // Arrived on a call's own response stream: it is that call's, whatever else is in flight.
      const streamOwner = ctx.mcpReq.id === undefined ? undefined : this.requestOwners.get(String(ctx.mcpReq.id));
      if (streamOwner !== undefined) this.requestOwners.delete(String(ctx.mcpReq.id));
      const owned = streamOwner === undefined ? undefined : [...routes].reverse().find((r) => r.handler.sessionId === streamOwner);
      const taken = owned ?? routes.at(-1);
      const handler = taken?.handler;
      if (!handler) throw new BrokerError('no_caller', `${method} from upstream "${this.name}" arrived with no call in flight to route it to`);
      // Otherwise the request carries no link to the call that caused it (stdio, SSE, the GET
      // stream). On stdio and SSE the gate lets one caller's calls be in flight at a time, so the
      // routes here are that caller's. Should several callers' calls be in flight all the same
      // (a Streamable HTTP upstream's GET stream), any pick could hand one client's prompt to
      // another: refused instead, never guessed.
      const sessions = new Set(routes.map((r) => r.owner));
      if (!owned && sessions.size > 1) {
        throw new BrokerError('ambiguous_caller', `${method} from upstream "${this.name}" arrived while calls of ${sessions.size} downstream sessions were in flight; it cannot be routed to one of them safely`);
      }
      const params = this.scrub.serverRequest(req.params as Record<string, unknown> | undefined);
      // Ended with its call only when it can be but that call's: the caller has no other call in flight here.
      const call = routes.filter((r) => r.owner === taken!.owner).length === 1 ? taken!.signal : undefined;
      const { signal, detach } = this.relayedSignal(ctx.mcpReq.signal, call);
      const urlId = method === 'elicitation/create' && params?.mode === 'url' && typeof params.elicitationId === 'string' ? params.elicitationId : undefined;
      const { notify, principal } = handler;
      try {
        if (urlId === undefined || !notify || principal === undefined) return (await handler({ method, params }, signal)) as never;
        // Remembered before it is sent: the upstream may complete it before the client's answer arrives.
        this.urlElicitations.expect(urlId, notify, principal);
        try {
          const answer = await handler({ method, params }, signal);
          if (answer.action !== 'accept') this.urlElicitations.forget(urlId, notify);
          return answer as never;
        } catch (err) {
          this.urlElicitations.forget(urlId, notify);
          throw err;
        }
      } finally {
        detach();
      }
    };
    if (caps.elicitation) client.setRequestHandler('elicitation/create', route('elicitation/create'));
    if (caps.sampling) client.setRequestHandler('sampling/createMessage', route('sampling/createMessage'));
    if (caps.roots) client.setRequestHandler('roots/list', route('roots/list'));
  }

  /**
   * The signal of a request the upstream made, as one for the request relayed to a client: it
   * aborts when the upstream's does (the upstream's `notifications/cancelled`, the connection
   * lost), with the reason scrubbed, and when the call it was made for ends first (`call`, the
   * call's signal: its deadline, the caller's cancel), whether or not the upstream cancels its
   * own. The SDK sends the client a `notifications/cancelled` whose `reason` is the signal's (the
   * upstream's reason is the upstream's own text), and the upstream's request is answered with
   * an error unless the upstream cancelled it. `detach` removes the listeners once the relayed
   * request has settled.
   */
  private relayedSignal(upstream: AbortSignal, call: CancelSignal | undefined): { signal: AbortSignal; detach: () => void } {
    const reason = () => this.scrub.scrubber.text(messageOf(upstream.reason ?? 'the upstream cancelled its request'));
    const ended = () => this.scrub.scrubber.text(`the call it was made for ended: ${messageOf(call?.reason ?? 'cancelled')}`);
    const none = () => undefined;
    if (upstream.aborted) return { signal: AbortSignal.abort(reason()), detach: none };
    if (call?.aborted) return { signal: AbortSignal.abort(ended()), detach: none };
    const controller = new AbortController();
    const onUpstream = () => controller.abort(reason());
    const onCall = () => controller.abort(ended());
    upstream.addEventListener('abort', onUpstream, { once: true });
    call?.addEventListener('abort', onCall, { once: true });
    // Once the relayed request has settled: a long call making many keeps no listener of each.
    const detach = () => {
      upstream.removeEventListener('abort', onUpstream);
      call?.removeEventListener('abort', onCall);
    };
    return { signal: controller.signal, detach };
  }

  /** Whether a handler takes upstream requests of `method` (its capability was offered at this dial). */
  private takesRequest(method: string): boolean {
    const offered = this.clientCapabilities;
    return method === 'sampling/createMessage' ? !!offered.sampling : method === 'elicitation/create' ? !!offered.elicitation : !!offered.roots;
  }

  /**
   * Where log messages on the response stream of direct request `requestId` go: to the session
   * its call was made for; undefined (the stream is left to the SDK) when it names none.
   */
  private callStreamLogSink(requestId: string): CallStreamSink | undefined {
    const owner = this.direct?.ownerOf(requestId);
    if (owner === undefined) return undefined;
    const sink = (notification: ArrivedNotification) => {
      const parsed = LoggingMessageNotificationSchema.safeParse(notification);
      if (parsed.success) this.emit('log', parsed.data.params, owner);
      else this.options.logger.debug('upstream log message on a call stream dropped: not a valid notifications/message');
    };
    // An upstream request on this stream is this call's (see installHandlers' route).
    // Noted only when a handler will take it (its capability was offered), so every note is spent.
    return Object.assign(sink, { request: (id: string | number, method: string) => void (this.takesRequest(method) && this.requestOwners.set(String(id), owner)) });
  }

  /**
   * One list fetched in full; on a modern connection its freshness is noted from the upstream's
   * `ttlMs` ({@link freshen}).
   */
  private async listAll(client: Client, kind: CatalogKind, timeoutMs: number): Promise<unknown[]> {
    const { items, ttlMs } = await listAll(client, kind, timeoutMs);
    if (this.era === 'modern') this.staleAt.set(kind, this.options.clock.now() + Math.max(ttlMs ?? 0, MIN_LIST_REFETCH_MS));
    else this.staleAt.delete(kind);
    // An entry that is no valid MCP `Tool` (`Prompt`, …) is withheld: passed on, a client's SDK
    // refuses the whole merged list (every upstream's entries), and a `null` one broke the roster.
    const valid = isSpecType[SPEC_TYPE_OF[kind]] as (item: unknown) => boolean;
    const kept = items.filter((item) => valid(item));
    if (kept.length < items.length) {
      this.options.logger.warn({ kind, withheld: items.length - kept.length, listed: items.length }, `upstream listed ${kind} that are no valid MCP entries (a missing name, inputSchema or uri, a wrong type): withheld`);
    }
    return kept;
  }

  /**
   * Makes one list fresh enough to serve, by the upstream's cache hints (2026-07-28
   * `server/utilities/caching`): a modern upstream's list that does not say it changes
   * (`listChanged` not declared, so no notification ever invalidates it) is fetched again once
   * its `ttlMs` has passed, when it is next needed (not polled), at most once per
   * {@link MIN_LIST_REFETCH_MS}. A declared `listChanged` makes the list stay until its
   * notification (our `subscriptions/listen`). Legacy upstreams: until `list_changed`, as before.
   * A failed fetch keeps the stale list (the spec allows serving it); never throws.
   */
  async freshen(kind: CatalogKind): Promise<void> {
    const staleAt = this.staleAt.get(kind);
    if (staleAt === undefined || this.era !== 'modern' || this.status.state !== 'ready') return;
    const caps = this.capabilities ?? {};
    const changes = kind === 'tools' ? caps.tools?.listChanged : kind === 'prompts' ? caps.prompts?.listChanged : caps.resources?.listChanged;
    if (changes || this.options.clock.now() < staleAt) return;
    await this.refresh(kind, true);
  }

  /**
   * Re-fetches one list after `list_changed` (or, `onlyIfChanged`, because it went stale: then
   * `changed` is emitted only when the list differs); concurrent requests coalesce.
   */
  private refresh(kind: CatalogKind, onlyIfChanged = false): Promise<void> {
    const running = this.refreshing.get(kind);
    if (running) return onlyIfChanged ? running : running.then(() => this.refresh(kind));
    const client = this.client;
    if (!client || this.status.state !== 'ready') return Promise.resolve();
    const task = (async () => {
      try {
        const items = await this.listAll(client, kind, this.options.config.connectTimeoutMs);
        if (this.client !== client) return;
        const lists = this.catalog as unknown as Record<CatalogKind, unknown[]>;
        const next = kind === 'tools' ? this.admitTools(items as Tool[]) : items;
        // A list fetched again only because it went stale: the same list changes nothing and tells no one.
        if (onlyIfChanged && JSON.stringify(next) === JSON.stringify(lists[kind])) return;
        lists[kind] = next;
        this.emit('changed', kind);
      } catch (err) {
        this.options.logger.warn({ kind, err: messageOf(err) }, 'upstream list refresh failed');
      }
    })().finally(() => this.refreshing.delete(kind));
    this.refreshing.set(kind, task);
    return task;
  }

  /**
   * The tools of a list that may be listed. On a modern connection, a tool whose `x-mcp-header`
   * marks break the rules is left out with a warning naming it and the rule (the spec: a client
   * must not call it), and the marks of the others are kept for their calls' `Mcp-Param-*` headers.
   */
  private admitTools(tools: Tool[]): Tool[] {
    if (this.era !== 'modern') return tools;
    const declarations = new Map<string, McpHeaderDeclaration[]>();
    const admitted = tools.filter((tool) => {
      const scan = scanMcpHeaders(tool.inputSchema);
      if (!scan.valid) {
        this.options.logger.warn({ tool: tool.name, reason: scan.reason }, 'upstream tool left out: invalid x-mcp-header');
        return false;
      }
      if (scan.declarations.length) declarations.set(tool.name, scan.declarations);
      return true;
    });
    this.headerDeclarations = declarations;
    return admitted;
  }

  /**
   * Whether a modern call offers the upstream the tasks extension: the upstream declares it, and
   * the broker can follow a task to its end for this caller (a legacy caller, whose call waits on
   * it; or a caller that declared the extension itself, whose request is answered with a broker
   * task once the upstream answers one: `CallOptions.onUpstreamTask`).
   */
  private followsTasks(options: CallOptions): boolean {
    return declaresTasksExtension(this.capabilities) && (!options.inputRelay || declaresTasksExtension(options.caller?.clientCapabilities));
  }

  /**
   * The first listing after a connect: every list the upstream's capabilities declare (tools,
   * prompts, resources and resource templates), their first pages asked for together rather than
   * each after the last one's answer, each then paginated to its end (a page a round trip).
   * Each request has its own `timeoutMs` from when it was sent: an upstream that answers one
   * request at a time must answer all of them within it. Resource templates are optional (an
   * upstream without them answers an error: none). The tools are as listed, not yet admitted
   * (`admitTools`). Rejects with `list_failed` when any other list fails.
   */
  private async fetchCatalog(client: Client, timeoutMs: number): Promise<UpstreamCatalog> {
    const caps = client.getServerCapabilities() ?? {};
    const list = (kind: CatalogKind, declared: unknown) => (declared ? this.listAll(client, kind, timeoutMs) : undefined);
    const catalog = EMPTY_CATALOG();
    try {
      const [tools, prompts, resources, resourceTemplates] = await Promise.all([
        list('tools', caps.tools),
        list('prompts', caps.prompts),
        list('resources', caps.resources),
        list('resourceTemplates', caps.resources)?.catch(() => []),
      ]);
      if (tools) catalog.tools = tools as Tool[];
      if (prompts) catalog.prompts = prompts as UpstreamCatalog['prompts'];
      if (resources) catalog.resources = resources as UpstreamCatalog['resources'];
      if (resourceTemplates) catalog.resourceTemplates = resourceTemplates as UpstreamCatalog['resourceTemplates'];
    } catch (err) {
      throw new BrokerError('list_failed', `listing failed after connect: ${messageOf(err)}`, { cause: err });
    }
    return catalog;
  }

  /** The transport closed on its own: fail in-flight calls (the SDK does), withdraw, restart. */
  private onLost(generation: number): void {
    if (generation !== this.generation) return;
    const child = this.transport instanceof ChildProcessTransport ? this.transport : undefined;
    const stderr = child?.stderrLine;
    const line = stderr === undefined ? undefined : shownStderrLine(stderr, (text) => this.scrub.scrubber.text(text));
    const exit = child?.exitDescription;
    this.client = undefined;
    this.generation++;
    this.withdraw();
    const status: UpstreamStatus = { state: 'failed', errorCode: 'exited', message: `connection lost${exit ? `: ${exit}` : ''}${line ? `: ${line}` : ''}` };
    this.logFailure('warn', status, 'upstream connection lost');
    this.setStatus(status);
    if (this.options.clock.now() - this.readyAt >= STABLE_AFTER_MS) this.failures = 0;
    this.scheduleRestart();
  }

  private scheduleRestart(): void {
    if (!this.autoRestart) return;
    const { initialDelayMs, maxDelayMs } = this.options.restart;
    const base = Math.min(maxDelayMs, initialDelayMs * 2 ** this.failures);
    const delay = Math.round(base / 2 + Math.random() * (base / 2));
    this.failures++;
    this.cancelRestart?.();
    this.setStatus({ ...this.status, state: 'backoff' });
    this.options.logger.info({ delayMs: delay, attempt: this.failures }, 'upstream restart scheduled');
    this.cancelRestart = this.options.clock.setTimer(delay, () => {
      this.cancelRestart = undefined;
      if (this.autoRestart) void this.dial();
    });
  }

  private withdraw(): void {
    const had = this.catalog;
    this.catalog = EMPTY_CATALOG();
    for (const kind of Object.keys(had) as CatalogKind[]) if (had[kind].length) this.emit('changed', kind);
  }

  /** Closes the current connection; `keepCatalog` leaves the tools listed (a re-dial for a lost session). */
  private async teardown(why: string, options: { keepCatalog?: boolean } = {}): Promise<void> {
    this.generation++;
    const client = this.client;
    this.client = undefined;
    if (!options.keepCatalog) this.withdraw();
    if (client) {
      client.onclose = undefined;
      await closeQuietly(client);
    } else if (this.transport) {
      await this.transport.close().catch(() => undefined);
    }
    this.options.logger.debug({ why }, 'upstream connection closed');
  }

  /**
   * Logs why the upstream is down at `level` the first time a reason is seen, and at debug when a
   * restart fails the same way again, so a crash loop does not repeat its error on every attempt.
   */
  private logFailure(level: 'error' | 'warn', status: UpstreamStatus, what: string): void {
    const reason = `${status.errorCode ?? ''}\n${status.message ?? ''}`;
    const repeated = this.loggedFailures.has(reason);
    this.loggedFailures.add(reason);
    const fields = { errorCode: status.errorCode, err: status.message, ...(repeated ? { repeated: true } : {}) };
    if (repeated) this.options.logger.debug(fields, what);
    else this.options.logger[level](fields, what);
  }

  private setStatus(status: UpstreamStatus): void {
    this.status = status;
    this.emit('state', status);
  }
}

/**
 * Every page of one list, and the shortest `ttlMs` its pages gave (2026-07-28 cache hint; a
 * negative or missing one counts as 0, as the spec says; undefined when no page carried one).
 */
/** Most ids of standalone-stream requests remembered at once (each is spent when its request is routed). */
const MAX_NOTED_STANDALONE = 256;

/** The spec type each catalog list holds (the SDK's validators: `isSpecType`). */
const SPEC_TYPE_OF = { tools: 'Tool', prompts: 'Prompt', resources: 'Resource', resourceTemplates: 'ResourceTemplate' } as const;

async function listAll(client: Client, kind: CatalogKind, timeoutMs: number): Promise<{ items: unknown[]; ttlMs?: number }> {
  const method = kind === 'resourceTemplates' ? 'resources/templates/list' : `${kind}/list`;
  const items: unknown[] = [];
  let ttlMs: number | undefined;
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const result = await client.request({ method, params: cursor ? { cursor } : {} } as never, AnyObject, { timeout: timeoutMs });
    const list = result[kind];
    if (Array.isArray(list)) items.push(...list);
    const ttl = typeof result.ttlMs === 'number' && Number.isFinite(result.ttlMs) ? Math.max(0, result.ttlMs) : 0;
    ttlMs = Math.min(ttlMs ?? Infinity, ttl);
    cursor = typeof result.nextCursor === 'string' && result.nextCursor ? result.nextCursor : undefined;
    if (!cursor) return { items, ttlMs };
  }
  throw new BrokerError('list_failed', `${method} did not end after ${MAX_PAGES} pages`);
}

/** Whether a probe failed because the connection ended under it (a server that exits on an unknown pre-initialize request). */
function isProbeDropped(err: unknown): boolean {
  return err instanceof SdkError && (err.code === SdkErrorCode.EraNegotiationFailed || err.code === SdkErrorCode.ConnectionClosed);
}

async function closeQuietly(client: Client): Promise<void> {
  try {
    await client.close();
  } catch {
    /* closing a broken connection may throw; it is closed either way */
  }
}

/** A task's result without the upstream's `io.modelcontextprotocol/related-task` (its own task id stays in this connection). */
function withoutRelatedTask(result: CallToolResult): CallToolResult {
  const meta = result._meta as Record<string, unknown> | undefined;
  if (!meta || !(RELATED_TASK_META_KEY in meta)) return result;
  const { [RELATED_TASK_META_KEY]: _upstreamTask, ...rest } = meta;
  return { ...result, _meta: rest };
}
