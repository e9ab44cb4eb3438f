/**
 * One downstream session: an SDK `Server` wired to the gateway (DESIGN.md "The data path").
 * One per stdio connection, Streamable HTTP session or SSE connection.
 *
 * Serves the merged roster (tools, prompts, resources, resource templates, completion), sends
 * every `tools/call` through the broker, and relays notifications the other way:
 * `list_changed` to every session, `resources/updated` to subscribed sessions, upstream
 * `notifications/message` to sessions at or above their `logging/setLevel` (case F01): the
 * session of the call it is tied to, else privileged sessions only.
 * `tools/call` results are not re-validated or copied on the way out (case F17).
 *
 * Era (`era`, decided per request by the serving entry: `transports/era.ts`):
 * - `legacy` (2025-11-25 and older): one instance per session (`initialize`, `Mcp-Session-Id`),
 *   its own budget unit and records `sessionId`, `logging/setLevel`, `resources/subscribe`,
 *   upstream requests (sampling, elicitation, roots) re-issued to the client during a call, and
 *   `tools/call` on the direct lane (`wire/direct-tools-call.ts`). An elicitation reaches the client
 *   only in a mode it declared (`url` needs `elicitation.url`; else -32602 to the upstream), and
 *   an upstream's URL elicitation completion reaches this session outside any call.
 * - An upstream's -32042 (URL elicitation required) to a `tools/call` is answered as that
 *   JSON-RPC error, data included, to a legacy caller that declared `elicitation.url`; a modern
 *   one that did gets it as an `input_required` URL elicitation (2026-07-28 has no -32042; the
 *   broker's relay stage, broker/url-input.ts); any other caller gets the `upstream_error` refusal result.
 * - `modern` (2026-07-28): no session (`sessionId` null, records `"sessionId": null`). The SDK's
 *   entry (`serveStdio` on stdio, `createMcpHandler` over HTTP) validates the `_meta` envelope
 *   (-32602, -32022), dispatches `server/discover` (answered here with the surface as it holds
 *   now: `discover-answer.ts`), stamps `resultType`, `ttlMs`/`cacheScope` (`0`/`private`: what
 *   we list depends on the principal) and `io.modelcontextprotocol/serverInfo` on every result, and serves
 *   `subscriptions/listen`. On stdio a plain `tools/call` takes the direct lane
 *   (`wire/direct-modern-call.ts`: the same answers, without the SDK's dispatch). Here each request is its own caller: the capabilities of its
 *   envelope, the unit its `_meta` names (`unit.ts`), logs only as its envelope's `logLevel`
 *   asks, and no server-to-client requests: a legacy upstream's sampling, elicitation or roots
 *   request during a `tools/call`, `prompts/get` or `resources/read` is held and answered to that
 *   request as `input_required`; the client's retry answers it and joins the request in flight
 *   (`held-calls.ts`). Undeclared capability: refused upstream, the request answered -32021;
 *   during a completion: refused -32601. An upstream's `ttlMs`, `cacheScope` or `serverInfo` in
 *   a forwarded result is dropped, so ours apply. `tools/list` is sorted by name.
 */
import { ElicitResultSchema, LoggingLevelSchema } from '@modelcontextprotocol/core';
import { CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY, MissingRequiredClientCapabilityError, ProtocolError, ProtocolErrorCode, SERVER_INFO_META_KEY, Server } from '@modelcontextprotocol/server';
import type {
  ClientCapabilities,
  JSONRPCMessage,
  JSONRPCRequest,
  LoggingLevel,
  ServerCapabilities,
  ServerContext,
  InputRequiredResult,
  Transport,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import { listAsPinned } from '../broker/pins.js';
import { unprefixErrors } from './error-prefix.js';
import { visibleTools } from '../broker/visible-tools.js';
import { openRelay, relayInputRequired, type RelayBinding } from '../broker/relay-input.js';
import { UnsentRefusal, type PrimitiveRequest } from '../broker/primitive-judge.js';
import type { CallerSession, ToolTarget } from '../broker/types.js';
import type { TaskRow } from '../store/store.js';
import { isTerminal } from '../tasks/status.js';
import { VERSION, type Gateway } from '../gateway.js';
import { Cancellation, toAbortSignal, type CancelSignal } from '../shared/cancel.js';
import { messageOf } from '../shared/errors.js';
import { newCallId, newSessionId } from '../shared/ids.js';
import { InflightTable } from '../shared/inflight.js';
import { modernUnit, UNIT_META_KEY } from './unit.js';
import type { ListKind } from '../upstream/registry.js';
import type { MayHave } from '../upstream/resources.js';
import type { ServerRequestHandler } from '../upstream/types.js';
import { supportsFormElicitation, supportsUrlElicitation, type SessionNotify } from '../upstream/url-elicitations.js';
import { routeToolsCallDirectly, type DirectCallExtra, type DirectCallParams } from '../wire/direct-tools-call.js';
import { routeModernToolsCallDirectly, type LaneReplay, type ModernDirectLane } from '../wire/direct-modern-call.js';
import type { StdioEntryLane } from '../wire/stdio-entry-lane.js';
import { guardRequestIds } from './request-ids.js';
import { guardRequestShapes } from './request-shape.js';
import { HELD_UNAPPROVED_REASON, isHeldState, type HeldBinding, type HeldClaim } from '../broker/held-state.js';
import { heldRetryJoins } from '../broker/judge.js';
import { HeldCall, heldCallsOf, heldInputRequired, type HeldEvent } from './held-calls.js';
import { LEGACY_TASK_METHODS, LegacyTasks, TASKS_CAPABILITY, withTaskSupport } from './legacy-tasks.js';
import { declaresTasks, ModernTasks, tasksExtensionRequired, upstreamRunsTasks } from './modern-tasks.js';
import { declaredExtensions, DiscoverAnswer } from './discover-answer.js';
import { hasOwnMember } from '../shared/extend.js';

/** What this server declares to every downstream client. */
export const SERVER_CAPABILITIES: ServerCapabilities = {
  tools: { listChanged: true },
  prompts: { listChanged: true },
  resources: { subscribe: true, listChanged: true },
  logging: {},
  completions: {},
  tasks: TASKS_CAPABILITY,
};

/** `tools/call` parsed lightly: name, arguments and `_meta`; the rest passes as sent. */
const CallToolRequestLight = z.object({
  method: z.literal('tools/call'),
  params: z.looseObject({
    name: z.string(),
    arguments: z.record(z.string(), z.unknown()).optional(),
    task: z.unknown().optional(),
    _meta: z.looseObject({ progressToken: z.union([z.string(), z.number()]).optional() }).optional(),
  }),
});

const AnyResult = z.custom<Record<string, unknown>>((v) => typeof v === 'object' && v !== null);

const LEVELS = LoggingLevelSchema.options;

/** A log level as sent in `_meta`, or undefined when it is none of the spec's. */
const levelOf = (value: unknown): LoggingLevel | undefined => (LEVELS as readonly unknown[]).includes(value) ? (value as LoggingLevel) : undefined;

/** The client capability each upstream→client request needs. */
const CAPABILITY_FOR_REQUEST: Record<string, 'sampling' | 'elicitation' | 'roots'> = {
  'sampling/createMessage': 'sampling',
  'elicitation/create': 'elicitation',
  'roots/list': 'roots',
};

/** The protocol era an instance serves: `legacy` (2025-11-25 and older) or `modern` (2026-07-28). */
export type Era = 'legacy' | 'modern';


export interface SessionOptions {
  /** `local` for stdio; a configured principal over HTTP. */
  principal: string;
  /** Session id of a legacy session; default a new UUID (Streamable HTTP passes its `Mcp-Session-Id`). Ignored for `modern`. */
  sessionId?: string;
  /** The era this instance serves; default `legacy`. */
  era?: Era;
  /**
   * Modern only: whether this instance sends the gateway's `list_changed` and
   * `resources/updated` itself (on stdio `serveStdio` routes them onto the connection's
   * `subscriptions/listen` streams); default true. Over HTTP each request has its own instance
   * and the handler's notifier carries them instead (`http/modern.ts`).
   */
  relayEvents?: boolean;
  /** Called with the client's capabilities as its `initialize` request arrives. */
  onInitialize?: (capabilities: ClientCapabilities) => void;
  /** Extra capabilities (the broker's experimental ones). */
  experimental?: Gateway['experimental'];
  /** Modern only: plain `tools/call` requests take the direct lane (`wire/direct-modern-call.ts`; stdio); default false. */
  directLane?: boolean;
  /** stdio: `tools/call` requests past the SDK entry once the connection is pinned to this instance (`wire/stdio-entry-lane.ts`); default none. */
  entryLane?: StdioEntryLane;
  /**
   * Modern only, one HTTP request's instance (`http/modern.ts`): `replay` gives the outcome of a
   * call the HTTP lane ran and handed to the SDK (`wire/direct-modern-http.ts`), which its
   * `tools/call` handler answers with; `learn` is told the envelope of a call the SDK served.
   */
  handoff?: { replay(): LaneReplay | undefined; learn(envelope: Record<string, unknown> | undefined): void };
}

/** This server's identity, in `initialize`, `server/discover` and every modern result's `_meta`. */
export const SERVER_INFO = { name: 'mcp-broker', version: VERSION };

/** Merged `experimental` capabilities; undefined when there are none. */
function experimentalOf(...sources: (Gateway['experimental'] | undefined)[]): Gateway['experimental'] | undefined {
  const merged: Gateway['experimental'] = Object.assign({}, ...sources.filter(Boolean));
  return Object.keys(merged).length ? merged : undefined;
}

/** What the broker uses of a request handler's context (`ctx.mcpReq`), in the shape the direct lane hands over. */
function extraOf(ctx: ServerContext): Pick<DirectCallExtra, 'signal' | 'sendNotification' | 'sendRequest'> {
  return {
    signal: ctx.mcpReq.signal,
    sendNotification: (notification) => ctx.mcpReq.notify(notification),
    sendRequest: ((r: never, schema: never, opts?: object) => ctx.mcpReq.send(r, schema, opts)) as DirectCallExtra['sendRequest'],
  };
}

/** A forwarded upstream result without what the SDK must author for a modern caller: cache fields, server identity. */
function ownedByUs<T>(result: T): T {
  if (typeof result !== 'object' || result === null) return result;
  const r = result as Record<string, unknown>;
  const meta = r._meta as Record<string, unknown> | undefined;
  const metaHasInfo = typeof meta === 'object' && meta !== null && SERVER_INFO_META_KEY in meta;
  if (!('ttlMs' in r) && !('cacheScope' in r) && !metaHasInfo) return result;
  const { ttlMs: _ttl, cacheScope: _scope, ...rest } = r;
  if (metaHasInfo) {
    const { [SERVER_INFO_META_KEY]: _info, ...otherMeta } = meta;
    rest._meta = otherMeta;
  }
  return rest as T;
}

/** `_meta` without the broker's own unit key (it is not passed on). */
function withoutUnitKey(meta: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!meta || !(UNIT_META_KEY in meta)) return meta;
  const { [UNIT_META_KEY]: _unit, ...rest } = meta;
  return rest;
}

let modernRequests = 0;

/** How a held call is told that a retry follows it now (its progress and cancellation). */
const joiners = new WeakMap<HeldCall, { join: (joiner: Pick<DirectCallExtra, 'signal' | 'sendNotification'>) => void; leave: () => void }>();

export class DownstreamSession {
  /** The legacy session id; `null` for a modern instance (no session). */
  readonly sessionId: string | null;
  readonly principal: string;
  readonly era: Era;
  readonly server: Server;
  /** Modern requests in flight, by the owner tag their upstream calls carry (log routing); an {@link InflightTable}. */
  private readonly requests = new InflightTable<string, ServerContext>();
  private level: LoggingLevel | undefined;
  private readonly subscribed = new Set<string>();
  /**
   * Whether this session may have a resource it subscribed to now, judged as its updates are
   * (below): the gateway's resource router holds the upstream subscription only while some
   * subscriber may.
   */
  private readonly mayHave: MayHave = (uri, server) => {
    const item = { server, type: 'resource' as const, name: uri };
    return this.era === 'modern' ? this.gateway.primitives.allowedOutright(this.principal, item) : this.gateway.primitives.visible(this.principal, item);
  };
  private closed = false;
  /** The 2025-11-25 task ids this session was handed (task-augmented calls), until each settles. */
  private readonly givenTasks = new Set<string>();
  private readonly detach: () => void;
  /** The modern `tools/call` direct lane, once connected with `directLane`. */
  private lane?: ModernDirectLane;
  /** A modern instance's `server/discover` answer, installed once connected (discover-answer.ts). */
  private readonly discover?: DiscoverAnswer;

  constructor(
    private readonly gateway: Gateway,
    private readonly options: SessionOptions,
  ) {
    this.era = options.era ?? 'legacy';
    this.sessionId = this.era === 'legacy' ? (options.sessionId ?? newSessionId()) : null;
    this.principal = options.principal;
    this.discover = this.era === 'modern' ? new DiscoverAnswer(gateway, this.principal) : undefined;
    const surface = this.discover?.surface() ?? {};
    // Modern: tasks are the extension (`io.modelcontextprotocol/tasks`), not the 2025-11-25 `tasks` capability.
    const { tasks: legacyTasks, ...shared } = SERVER_CAPABILITIES;
    this.server = new Server(
      SERVER_INFO,
      {
        // The gateway's experimental capabilities (builtins: `mcp-broker/reconnect`), then the transport's.
        capabilities: {
          ...shared,
          ...(this.era === 'legacy' && { tasks: legacyTasks }),
          experimental: experimentalOf(gateway.experimental, options.experimental),
          ...(this.era === 'modern' && { extensions: declaredExtensions(surface) }),
        },
        instructions: surface.instructions,
        debouncedNotificationMethods: [
          'notifications/tools/list_changed',
          'notifications/prompts/list_changed',
          'notifications/resources/list_changed',
        ],
      },
    );
    this.server.onerror = (err) => gateway.logger.debug({ sessionId: this.sessionId, err: messageOf(err) }, 'downstream protocol error');
    this.installHandlers();
    const modern = this.era === 'modern';
    const relay = !modern || options.relayEvents !== false;
    const onList = (kind: ListKind) => this.sendListChanged(kind);
    // Modern: every update goes out; the SDK's listen router sends it to the subscriptions that asked for the URI.
    // Judged again at each update, as the subscription was: a config reload since may deny the resource now.
    const onUpdated = (uri: string, server: string) => {
      if (!modern && !this.subscribed.has(uri)) return;
      const item = { server, type: 'resource' as const, name: uri };
      if (modern ? !gateway.primitives.allowedOutright(this.principal, item) : !gateway.primitives.visible(this.principal, item)) return;
      void this.server.sendResourceUpdated({ uri }).catch(() => undefined);
    };
    const privileged = options.principal === 'local' || gateway.config.principals[options.principal]?.role === 'operator';
    const onLog = (params: { level: LoggingLevel; logger?: string; data?: unknown }, owner: string | undefined) => {
      if (modern) {
        // Only to the request the log is tied to, as its envelope's `logLevel` asks (absent: none).
        const ctx = owner !== undefined ? this.requests.get(owner) : undefined;
        if (ctx && !this.closed) void ctx.mcpReq.log(params.level, params.data, params.logger).catch(() => undefined);
        return;
      }
      // Tied to a call: its session only. Tied to none: privileged sessions only.
      if (owner !== undefined ? owner === this.sessionId : privileged) this.sendLog(params.level, params.data, params.logger);
    };
    if (relay) gateway.on('listChanged', onList);
    if (relay) gateway.on('resourceUpdated', onUpdated);
    gateway.on('log', onLog);
    // notifications/tasks/status to the session that created the task (2025-11-25), for the tasks
    // it was handed (a parked plain call's row is no task of its caller's: nothing is sent for it).
    const onTask = (row: TaskRow) => {
      if (row.sessionId !== this.sessionId || !this.givenTasks.has(row.id) || this.closed) return;
      const { _meta, ...task } = gateway.tasks.toMcpTask(row);
      void this.server.notification({ method: 'notifications/tasks/status', params: { ...task, _meta } } as never).catch(() => undefined);
      if (isTerminal(row.status)) this.givenTasks.delete(row.id);
    };
    gateway.tasks.on('status', onTask);
    this.detach = () => {
      gateway.off('listChanged', onList);
      gateway.off('resourceUpdated', onUpdated);
      gateway.off('log', onLog);
      gateway.tasks.off('status', onTask);
    };
    // Whoever connects the instance (this.connect, or the SDK's serveStdio / createMcpHandler
    // entry) gets the broker's wrappers on the transport it connected.
    const connect = this.server.connect.bind(this.server);
    this.server.connect = async (transport: Transport) => {
      await connect(transport);
      this.wrapTransport(transport);
    };
    // Closing the instance ends the session even when it was never connected: the SDK's HTTP
    // entry builds one per request and closes it unconnected when its own router serves the
    // request (a modern `subscriptions/listen`), and that close reaches no transport `onclose`.
    const closeServer = this.server.close.bind(this.server);
    this.server.close = async () => {
      await closeServer();
      await this.close();
    };
  }

  /** Connects the session to a transport and starts serving it (legacy Streamable HTTP and SSE sessions). */
  async connect(transport: Transport): Promise<void> {
    const send = transport.send.bind(transport);
    await this.server.connect(transport);
    guardRequestShapes(transport, send);
  }

  /**
   * The broker's wrappers on a connected transport: error messages without the SDK prefix, the
   * `tools/call` direct lane (legacy: `wire/direct-tools-call.ts`; modern with `directLane`:
   * `wire/direct-modern-call.ts`, which answers only what it can answer as the SDK would and hands
   * the rest to the SDK), duplicate request ids refused, a modern `server/discover` answered with
   * the surface as it holds now (discover-answer.ts), and closing the instance ends the session.
   */
  private wrapTransport(transport: Transport): void {
    const watchEntryLane = this.options.entryLane?.attach(transport);
    unprefixErrors(transport);
    this.discover?.install(this.server);
    if (this.era === 'legacy') routeToolsCallDirectly(this.server, transport, (params, extra) => this.callTool(params, extra));
    else if (this.options.directLane) {
      const logging = SERVER_CAPABILITIES.logging !== undefined;
      this.lane = routeModernToolsCallDirectly(this.server, transport, (params, extra, ctx) => this.callTool(params, extra, ctx), { serverInfo: SERVER_INFO, logging });
    }
    guardRequestIds(transport, {
      onInitialize: (caps) => this.options.onInitialize?.(caps),
    });
    watchEntryLane?.();
    const previous = this.server.onclose;
    this.server.onclose = () => {
      previous?.();
      void this.close();
    };
  }

  /**
   * A modern request as the broker sees it: no session, the capabilities of its envelope, the
   * unit its `_meta` names (`unit.ts`), the retry fields of a multi-round-trip request, and logs
   * through the request (sent only as its envelope's `logLevel` asks). No ping, no elicitation:
   * the 2026-07-28 era has no server-to-client requests (upstream ones are held: `held-calls.ts`).
   */
  private modernCaller(ctx: ServerContext, unit: string): CallerSession {
    const inputResponses = ctx.mcpReq.inputResponses;
    const requestState = ctx.mcpReq.requestState<string>();
    return {
      sessionId: null,
      principal: this.principal,
      unit,
      // No session ends a modern unit: its budget is per `broker.budgetWindowMs` window and renews.
      sessionless: true,
      era: 'modern',
      clientCapabilities: (ctx.mcpReq.envelope as Record<string, ClientCapabilities | undefined> | undefined)?.[CLIENT_CAPABILITIES_META_KEY],
      // The level this request asked for (absent: no logs), passed on to a modern upstream.
      logLevel: levelOf((ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[LOG_LEVEL_META_KEY]),
      ...(inputResponses !== undefined && { inputResponses }),
      ...(typeof requestState === 'string' && { requestState }),
      isLive: () => !this.closed && !ctx.mcpReq.signal.aborted,
      log: (level, data) => void ctx.mcpReq.log(level, data, 'mcp-broker').catch(() => undefined),
    };
  }

  /** The caller of one request: the session (legacy), or the request itself (modern: `ctx` required). */
  private callerOf(ctx: ServerContext | undefined, meta: Record<string, unknown> | undefined, extra: Pick<DirectCallExtra, 'sendRequest'>): CallerSession {
    if (this.era === 'modern' && ctx) return this.modernCaller(ctx, modernUnit(this.principal, meta));
    return this.caller((r, s, o) => extra.sendRequest(r as never, s, o));
  }

  /** The caller as the broker sees it, bound to one request's `sendRequest` so approvals ride its stream. */
  caller(sendRequest?: (req: { method: string; params?: unknown }, schema: typeof AnyResult, opts?: { signal?: AbortSignal; timeout?: number }) => Promise<Record<string, unknown>>): CallerSession {
    const capabilities = this.server.getClientCapabilities();
    const session = this;
    const sessionId = this.sessionId ?? newSessionId();
    return {
      sessionId,
      principal: this.principal,
      unit: sessionId,
      era: 'legacy',
      clientCapabilities: capabilities,
      logLevel: this.level,
      // The approval question is form mode: a client that declared URL mode only cannot be asked.
      elicit: supportsFormElicitation(capabilities)
        ? async (params, { timeoutMs, signal }) => {
            if (sendRequest) {
              const r = await sendRequest({ method: 'elicitation/create', params }, AnyResult, { timeout: timeoutMs, signal });
              return ElicitResultSchema.parse(r);
            }
            return this.server.elicitInput(params as never, { timeout: timeoutMs, signal });
          }
        : undefined,
      isLive: () => !session.closed,
      ping: async ({ timeoutMs, signal }) => {
        const opts = { timeout: timeoutMs, signal };
        await (sendRequest ? sendRequest({ method: 'ping' }, AnyResult, opts) : this.server.request({ method: 'ping' }, AnyResult, opts));
      },
      log: (level, data) => session.sendLog(level, data, 'mcp-broker'),
    };
  }

  /**
   * Wraps the re-issue of an upstream→client request (sampling, elicitation, roots) on this
   * session's in-flight call: refused with -32601 when this client did not declare the matching
   * capability (the upstream may have been offered it for another client: `http.clientCapabilities`),
   * an elicitation in a mode it did not declare (`mode: "url"` without `elicitation.url`, form
   * without `form` when it declared `url`) refused with -32602 as the spec's client would, and
   * tagged with the session id (modern: the request's own tag) so an upstream can tell calls
   * of different callers apart, and (legacy) with `notify` and the principal, so the upstream's
   * `notifications/elicitation/complete` for a URL elicitation relayed here reaches this session,
   * outside the call (upstream/url-elicitations.ts). Modern: handed to `modern.hold` (a held
   * call) when the capability was declared, else refused and the call marked for -32021.
   */
  private serverRequestRoute(
    send: ServerRequestHandler,
    owner: string | null = this.sessionId,
    modern?: { declared: ClientCapabilities | undefined; onMissing: (capability: string) => void; hold?: ServerRequestHandler },
  ): ServerRequestHandler {
    const route = async (request: Parameters<ServerRequestHandler>[0], signal: AbortSignal) => {
      if (this.era === 'modern') {
        // The call needs a capability the caller did not declare: the call is answered -32021 (callTool).
        const wanted = CAPABILITY_FOR_REQUEST[request.method];
        if (wanted && !modern?.declared?.[wanted]) modern?.onMissing(wanted);
        else if (request.method === 'elicitation/create' && !elicitationModeDeclared(request, modern?.declared)) {
          throw new ProtocolError(ProtocolErrorCode.InvalidParams, `the calling client did not declare ${request.params?.mode === 'url' ? 'URL' : 'form'}-mode elicitation`);
        }
        // Declared, during a tools/call: held, and handed to the caller as input_required (held-calls.ts).
        else if (wanted && modern?.hold) return modern.hold(request, signal);
        throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `the calling client speaks MCP 2026-07-28, which has no server-to-client "${request.method}" request`);
      }
      const needed = CAPABILITY_FOR_REQUEST[request.method];
      const declared = this.server.getClientCapabilities();
      if (needed && !declared?.[needed]) {
        throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `the calling client did not declare the "${needed}" capability`);
      }
      if (request.method === 'elicitation/create' && !elicitationModeDeclared(request, declared)) {
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `the calling client did not declare ${request.params?.mode === 'url' ? 'URL' : 'form'}-mode elicitation`);
      }
      return send(request, signal);
    };
    return Object.assign(route, { sessionId: owner ?? undefined, ...(this.era === 'legacy' && { notify: this.notifySession, principal: this.principal }) });
  }

  /**
   * Sends a request to this session outside any request (a task's upstream asking for input,
   * 2025-11-25 tasks: the task is `input_required` meanwhile). Bounded by
   * `broker.maxTotalTimeoutMs`; the call's deadline or cancel ends it sooner. Once the session
   * is gone (closed before or while asking) it never answers: the task waits, `input_required`,
   * until its call ends (deadline, `tasks/cancel`, TTL).
   */
  private readonly sendToSession: ServerRequestHandler = async (request, signal) => {
    if (!this.closed) {
      try {
        return await this.server.request(request as never, AnyResult, { signal, timeout: this.gateway.config.broker.maxTotalTimeoutMs });
      } catch (err) {
        if (!this.closed || signal.aborted) throw err;
      }
    }
    return new Promise<never>((_, reject) => {
      if (signal.aborted) return reject(signal.reason);
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
  };

  /** Sends a notification to this session outside any request (an upstream's elicitation completion); never throws. */
  private readonly notifySession: SessionNotify = (notification) => {
    if (this.closed) return;
    void this.server.notification(notification).catch(() => undefined);
  };

  /** Sends a log notification if the session's level lets it through. */
  sendLog(level: LoggingLevel, data: unknown, logger?: string): void {
    if (this.closed) return;
    if (this.level && LEVELS.indexOf(level) < LEVELS.indexOf(this.level)) return;
    if (!this.level && level === 'debug') return;
    void this.server.notification({ method: 'notifications/message', params: { level, logger, data } }).catch(() => undefined);
  }

  /** Ends the session: unsubscribes, detaches from the gateway, closes the transport. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.detach();
    this.requests.clear();
    if (this.sessionId !== null) {
      this.gateway.budgets.release(this.sessionId);
      this.gateway.logLevel.set(this.sessionId, undefined);
    }
    for (const uri of this.subscribed) await this.gateway.resources.unsubscribe(uri, this.mayHave);
    this.subscribed.clear();
    await this.server.close().catch(() => undefined);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private sendListChanged(kind: ListKind): void {
    if (this.closed || !this.server.transport) return;
    const send =
      kind === 'tools' ? this.server.sendToolListChanged() : kind === 'prompts' ? this.server.sendPromptListChanged() : this.server.sendResourceListChanged();
    void Promise.resolve(send).catch(() => undefined);
  }

  /**
   * A modern `tools/call` run by the HTTP lane outside the SDK (`wire/direct-modern-http.ts`), as
   * the SDK-served handler runs it: `ctx` carries the request's envelope and signal.
   */
  directCall(params: DirectCallParams, extra: DirectCallExtra, ctx: ServerContext): Promise<unknown> {
    return this.callTool(params, extra, ctx);
  }

  /** Serves one `tools/call` through the broker; the SDK handler and the direct lane both land here. */
  private async callTool(
    params: z.infer<typeof CallToolRequestLight>['params'],
    extra: Pick<DirectCallExtra, 'signal' | 'sendNotification' | 'sendRequest'> & Partial<Pick<DirectCallExtra, 'abort'>>,
    ctx?: ServerContext,
  ): Promise<unknown> {
    const gw = this.gateway;
    const { name, arguments: args, _meta } = params;
    // Once ready, no await before the upstream write: over HTTP, any turn given up here is spent
    // on the SDK's response setup while the upstream waits (issue 6, bench/README.md). Before,
    // only for what this call needs: another upstream still dialling holds it up not at all.
    if (!gw.readySettled) await gw.readyFor(name);
    const target = gw.router.resolve(name);
    if (!target) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${name}${gw.registry.unknownToolHint()}`);
    // Most calls carry no `_meta`: then no copies of it are made.
    let progressToken: string | number | undefined;
    let sent: Record<string, unknown> | undefined;
    if (_meta) ({ progressToken, ...sent } = _meta);
    const caller = this.callerOf(ctx, sent, extra);
    const modern = this.era === 'modern' && ctx !== undefined;
    // A retry carrying a held-request state joins the call in flight (held-calls.ts); it never runs the tool again.
    if (modern && isHeldState(caller.requestState)) {
      const request = { name, args: args ?? {}, signal: extra.signal };
      // Judged on the policy as it is now, as a prompt's or resource's held retry is (broker/judge.ts heldRetryJoins).
      const judged = async (claim: HeldClaim) =>
        (await heldRetryJoins(gw.judgeDeps, name, this.principal, claim.approved === true))
          ? undefined
          : { answer: await this.refuseHeld(request, caller, target, HELD_UNAPPROVED_REASON, true) };
      return this.joinHeld({ principal: this.principal, tool: name, args: request.args }, caller, extra, (reason) => this.refuseHeld(request, caller, target, reason), judged);
    }
    // Modern: the request's own tag routes the call's upstream logs back to it.
    const owner = modern ? `request:${++modernRequests}` : this.sessionId;
    const own = this.era === 'modern' ? withoutUnitKey(sent) : sent;
    const meta = hasOwnMember(own) ? own : undefined;
    // A modern caller declaring the tasks extension, calling a tool of an upstream with tasks of its own:
    // sent plainly, and answered with a broker task only if the upstream answers with one (upstreamTask).
    let upstreamTask: ReturnType<typeof this.upstreamTaskHook> | undefined;
    if (this.era === 'modern' && ctx) {
      // The tasks extension: the broker decides, from the tool's taskSupport and the request's declaration.
      const tasks = new ModernTasks(gw.tasks, this.principal);
      const upstreamTasks = this.upstreamTasks(target);
      if (tasks.runsAsTask(target, caller.clientCapabilities, upstreamTasks)) {
        return tasks.create({ name, args: args ?? {}, meta }, caller, target);
      }
      if (upstreamTasks && declaresTasks(caller.clientCapabilities)) upstreamTask = this.upstreamTaskHook();
    }
    let last = -Infinity;
    let missing: string | undefined;
    // Modern: the call may outlive this request (its upstream asks for input): its own signal, and
    // progress to whichever request is following it now.
    const held = modern ? this.newHeldCall(target.server, extra) : undefined;
    let notify = extra.sendNotification;
    // Registered here, where the `finally` below removes it: a request answered before (a broker
    // task, a refusal) would otherwise stay in the table for the session's life.
    if (modern && owner) this.requests.set(owner, ctx);
    try {
      const answer = gw.broker.call(
        {
          name,
          args: args ?? {},
          meta,
          signal: held?.signal ?? extra.signal,
          abort: held?.abort ?? extra.abort,
          awaitingCaller: held?.holding,
          onApproved: held?.approve,
          onProgress:
            progressToken === undefined
              ? undefined
              : (update) => {
                  if (update.progress < last) return;
                  last = update.progress;
                  void notify({ method: 'notifications/progress', params: { ...update, progressToken } }).catch(() => undefined);
                },
          // Bounded by the broker's hard cap, never the SDK's hidden 60 s default (F18); the call's deadline aborts it sooner.
          onServerRequest: this.serverRequestRoute(
            (request, signal) => extra.sendRequest(request as never, AnyResult, { signal, timeout: gw.config.broker.maxTotalTimeoutMs }),
            owner,
            {
              declared: caller.clientCapabilities,
              onMissing: (capability) => (missing ??= capability),
              hold: held && ((request, signal) => (upstreamTask?.asked ? upstreamTask.asked(request, signal) : held.hold(request, signal))),
            },
          ),
          onUpstreamTask: upstreamTask?.started,
        },
        caller,
        target,
      );
      const finish = (done: Awaited<typeof answer>) => {
        if (missing !== undefined) {
          // Spec (server/tools, basic/versioning): a request that needs an undeclared client capability is -32021.
          throw new MissingRequiredClientCapabilityError(
            { requiredCapabilities: { [missing]: {} } },
            `the tool needs the client capability "${missing}", which this request did not declare`,
          );
        }
        // A requestState that fails verification is rejected as the spec says (-32602); the call is recorded all the same.
        if (done.requestError) throw new ProtocolError(done.requestError.code, done.requestError.message, done.requestError.data);
        if (done.wireError && this.era === 'legacy' && supportsUrlElicitation(caller.clientCapabilities)) {
          // -32042 (URL elicitation required) reaches a client that can act on it as the upstream sent it;
          // any other gets the refusal result (the spec: the error is only for URL-mode clients; 2026-07-28
          // has no -32042, and the SDK turns a thrown one into -32603 there).
          const { code, message, data } = done.wireError;
          throw new ProtocolError(code, message, data);
        }
        return this.era === 'modern' ? ownedByUs(done.result) : done.result;
      };
      if (!held) return finish(await answer);
      const settled = answer.then(finish);
      held.follow(extra.signal);
      const event = await (upstreamTask ? Promise.race([held.first(settled), upstreamTask.begun]) : held.first(settled));
      if (event.kind === 'task') {
        // The upstream answered with a task: the call is the broker task's now, not this request's.
        held.follow(undefined);
        const tasks = new ModernTasks(gw.tasks, this.principal);
        const adopted = tasks.adopt({ name, args: args ?? {} }, caller, target, { answer, abort: held.abort });
        upstreamTask!.adopted(adopted.then(({ row }) => row.id));
        try {
          return (await adopted).answer;
        } catch (err) {
          held.abort(err); // no row to follow it: the call ends with this request
          throw err;
        }
      }
      if (event.kind === 'done') {
        if (event.ok) return event.value;
        throw event.err;
      }
      // The upstream asked: park the call, answer this request with the input request.
      held.follow(undefined);
      heldCallsOf(gw, gw.sealedStates).park(held.call(), settled);
      held.onJoin = (joiner) => {
        notify = joiner.sendNotification;
        held.follow(joiner.signal);
      };
      return this.askHeld(held.call(), event, { principal: this.principal, tool: name, args: args ?? {} });
    } finally {
      if (owner && this.era === 'modern') this.requests.delete(owner);
    }
  }

  /** Whether the upstream of `target` runs tasks of its own (modern-tasks.ts {@link upstreamRunsTasks}). */
  private upstreamTasks(target: ToolTarget | undefined): boolean {
    return target !== undefined && target.source !== 'local' && upstreamRunsTasks(this.gateway.registry.upstream(target.server));
  }

  /**
   * The hooks of a modern call that may become a broker task when its upstream answers with a
   * task of its own: `started` is the call's `onUpstreamTask`; `begun` resolves then (`{kind:
   * "task"}`), and from then on `asked` holds each of the upstream task's input requests in
   * `TaskEngine.inputs` under the row's id, which `adopted` is told once the row is stored
   * (tasks/get `inputRequests`, tasks/update).
   */
  private upstreamTaskHook() {
    const inputs = this.gateway.tasks.inputs;
    let begin!: (event: { kind: 'task' }) => void;
    let adopted!: (id: Promise<string>) => void;
    const rowId = new Promise<string>((resolve) => (adopted = resolve));
    rowId.catch(() => undefined); // a row never stored fails the request itself (callTool)
    const hook = {
      begun: new Promise<{ kind: 'task' }>((resolve) => (begin = resolve)),
      started: () => {
        // From the upstream's task on, its input requests wait for the row (stored a moment later).
        hook.asked = async (request, signal) => inputs.ask(await rowId, request, signal);
        begin({ kind: 'task' });
      },
      asked: undefined as ServerRequestHandler | undefined,
      adopted,
    };
    return hook;
  }

  /**
   * A modern call's held state, allocated only as far as it is used: the call's own abort
   * controller, which follows one request's signal at a time (the caller's, then each retry's),
   * is the direct lane's when the lane owns the request's signal (`extra.abort`: nothing else
   * aborts it once the request is answered); the {@link HeldCall} is made when the upstream
   * first asks. A call that is never asked allocates neither.
   */
  private newHeldCall(server: string, extra: Pick<DirectCallExtra, 'signal'> & Partial<Pick<DirectCallExtra, 'abort'>>) {
    const own = extra.abort ? undefined : new Cancellation();
    const signal: CancelSignal = own ?? extra.signal;
    const abort = own ? (reason: unknown) => own.abort(reason) : extra.abort!;
    let detach = () => {};
    let call: HeldCall | undefined;
    let onAsk: (() => void) | undefined;
    let approved = false;
    const { clock } = this.gateway;
    const boundMs = this.gateway.config.policy.askTimeoutMs;
    const state = {
      signal,
      abort,
      onJoin: undefined as ((joiner: Pick<DirectCallExtra, 'signal' | 'sendNotification'>) => void) | undefined,
      /**
       * The held call, made on first use. (A function, not a getter: on Node 20 an object literal
       * with an accessor is made in dictionary mode each time it runs, ~0.5 µs a call; issue 19.)
       */
      call: (): HeldCall => {
        if (!call) {
          call = new HeldCall({ server, clock, boundMs, abort });
          call.approved = approved;
          joiners.set(call, { join: (joiner) => state.onJoin?.(joiner), leave: () => state.follow(undefined) });
        }
        return call;
      },
      /** The call was approved at its first round (`CallRequest.onApproved`): its held states say so. */
      approve: (): void => {
        approved = true;
        if (call) call.approved = true;
      },
      /** Whether an upstream request is held for the caller's retry now (`CallRequest.awaitingCaller`). */
      holding: (): boolean => call?.holding === true,
      /** Holds an upstream request (`HeldCall.hold`), waking {@link first}. */
      hold: (request: Parameters<HeldCall['hold']>[0], upstreamSignal: AbortSignal) => {
        const answered = state.call().hold(request, upstreamSignal);
        this.gateway.logger.debug({ upstream: server, method: request.method, heldId: state.call().id }, "upstream request held for the caller's retry");
        onAsk?.();
        return answered;
      },
      /** The call's first event: its end (`settled`), or the upstream's first request. */
      first: (settled: Promise<unknown>): Promise<HeldEvent> =>
        new Promise<HeldEvent>((resolve) => {
          settled.then(
            (value) => resolve({ kind: 'done', ok: true, value }),
            (err: unknown) => resolve({ kind: 'done', ok: false, err }),
          );
          // Once: later requests are the held call's to hand on (HeldCall.next), not this wait's.
          onAsk = () => {
            onAsk = undefined;
            state.call().attach(settled);
            resolve(state.call().next());
          };
          if (call) onAsk();
        }),
      /** Cancels the call when `signal` aborts (the request following it closed its stream); undefined: none follows. */
      follow: (following: CancelSignal | undefined) => {
        detach();
        detach = () => {};
        // The lane's own signal is the call's: following it is being it.
        if (!following || following === signal) return;
        const onAbort = () => abort(following.reason ?? new Error('cancelled by the client'));
        if (following.aborted) return onAbort();
        following.addEventListener('abort', onAbort, { once: true });
        detach = () => following.removeEventListener('abort', onAbort);
      },
    };
    return state;
  }

  /** The `input_required` answer for `event`, under a fresh sealed state for its round. */
  private async askHeld(call: HeldCall, event: HeldEvent & { kind: 'asked' }, binding: HeldBinding): Promise<InputRequiredResult> {
    const states = heldCallsOf(this.gateway, this.gateway.sealedStates).states;
    return heldInputRequired(event, await states.issue(binding, call.id, event.round, event.expiresAt, call.approved));
  }

  /**
   * A modern retry with a held-request state: checked (seal, expiry, principal, tool, arguments,
   * the call still held in this process, the round not answered yet), then the held upstream
   * request is answered with the caller's `inputResponses` entry and the retry follows the call:
   * its result, or the next `input_required`. A refused retry answers nothing, is told why and
   * leaves a record (fail closed: {@link refuseHeld}); a valid state without the answer is handed
   * the same request again.
   */
  private async joinHeld(
    binding: HeldBinding,
    caller: CallerSession,
    extra: Pick<DirectCallExtra, 'signal' | 'sendNotification'>,
    refused: (reason: string) => Promise<unknown>,
    judged?: (claim: HeldClaim) => Promise<{ answer: unknown } | undefined>,
  ): Promise<unknown> {
    const gw = this.gateway;
    const table = heldCallsOf(gw, gw.sealedStates);
    const opened = await table.states.open(caller.requestState!, binding);
    if (!opened.ok) {
      gw.logger.warn({ tool: binding.tool, principal: this.principal, why: opened.why }, 'retry with a held-request state refused');
      return refused(`${opened.reason}; the held request was not answered`);
    }
    // Judged before anything is answered: a retry that may not join leaves the held request waiting.
    const verdict = await judged?.(opened.claim);
    if (verdict) return verdict.answer;
    // A call that ended while a request it handed out still waits is kept until that is answered.
    const call = table.get(opened.claim.heldId);
    if (!call) {
      return refused(
        'the call this requestState belongs to is not held by this broker process (it ended, or was held by another broker process: a retry must reach the process that answered input_required)',
      );
    }
    const now = call.held(opened.claim.round);
    if (!now) return refused('the input request this requestState belongs to was answered already; the retry did not answer anything');
    const response = caller.inputResponses?.[now.key] as Record<string, unknown> | undefined;
    if (response === undefined) {
      // MRTR: re-request what is missing.
      const again = await call.next(now.round);
      if (again.kind === 'asked') return this.askHeld(call, again, binding);
    } else if (!call.answer(now.round, response)) {
      return refused('the input request this requestState belongs to was answered already; the retry did not answer anything');
    }
    const follower = joiners.get(call);
    follower?.join(extra);
    const event = await call.next();
    if (event.kind === 'asked') {
      // Answered with the next question: this retry's stream ends here, the call does not.
      follower?.leave();
      return this.askHeld(call, event, binding);
    }
    if (event.ok) return event.value;
    throw event.err;
  }

  /**
   * A refused held retry, through the broker path so it is judged and leaves its record like any
   * refused state: outcome `invalid_arguments` with `reason`, 0 attempts, nothing sent (the judge
   * refuses it, never asking, even under `ask`: broker/judge.ts). Answered with the refusal result.
   */
  private async refuseHeld(
    request: { name: string; args: Record<string, unknown>; signal: CancelSignal },
    caller: CallerSession,
    target: ToolTarget,
    reason: string,
    /** The state opened, but the retry may not join its call now (`CallRequest.heldRetryUnapproved`). */
    unapproved = false,
  ): Promise<unknown> {
    const answer = await this.gateway.broker.call({ ...request, ...(unapproved ? { heldRetryUnapproved: reason } : { heldStateRefused: reason }) }, caller, target);
    return answer.result;
  }

  private installHandlers(): void {
    const gw = this.gateway;
    const server = this.server;

    server.setRequestHandler('tools/list', async () => {
      await gw.ready;
      await gw.registry.freshen('tools');
      // Upstream tools as pinned for this principal: a changed one as approved, or withheld.
      const rosterTool = (name: string) => gw.registry.roster.tools.get(name);
      const pinned = await listAsPinned(gw.router.list(), this.principal, {
        store: gw.store,
        clock: gw.clock,
        rosterTool,
        scrubTool: (tool) => gw.registry.scrub.tool(tool),
        logger: gw.logger,
      });
      // Less what the policy denies this principal, as configured to be presented (issue 18 §4).
      const tools = visibleTools(pinned, this.principal, gw.toolVisibility).map((t) => {
        const target = gw.router.resolve(t.name);
        // A legacy caller may make any tool of an upstream with tasks of its own a task (a modern one is answered one when the upstream does).
        return withTaskSupport(t, target, this.era === 'legacy' && this.upstreamTasks(target));
      });
      // Modern: by name, so a client's cache sees one order whatever order the upstreams came up in.
      return { tools: this.era === 'modern' ? [...tools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) : tools };
    });

    // `tools/call` is served as the fallback handler, not through `setRequestHandler`: the SDK
    // Server wraps a registered `tools/call` handler in a strict request check and a result
    // re-validation (and copy), which the broker's results must not pay (F17). Well-formed calls do
    // not reach it at all: connect() routes them straight to callTool (issue 6). A call the light
    // check refuses answers -32603 with the schema's message, as a registered handler's throw would.
    // Modern: a registered handler, so a method the broker does not serve meets the SDK's own
    // answer for the era (HTTP 404 with -32601), not a handler's in-band one; the modern call
    // goes through the SDK anyway (its envelope, stamping and cache fields).
    // Legacy: task-augmented calls and `tasks/*` (2025-11-25) are served here too (legacy-tasks.ts).
    const tasks = new LegacyTasks(
      {
        tasks: gw.tasks,
        resolve: (name) => gw.router.resolve(name),
        upstreamTasks: (target) => this.upstreamTasks(target),
        given: (id) => this.givenTasks.add(id),
        ask: this.era === 'legacy' ? this.serverRequestRoute(this.sendToSession) : undefined,
      },
      this.principal,
    );
    if (this.era === 'modern') {
      server.setRequestHandler('tools/call', (req, ctx) => {
        // A call the direct lane ran and handed back is answered from its outcome; an envelope
        // the SDK accepted here lets the lane take the next calls that carry it.
        const replay = this.lane?.takeReplay(ctx.mcpReq.id) ?? this.options.handoff?.replay();
        if (replay) return (replay.ok ? Promise.resolve(replay.value) : Promise.reject(replay.err)) as never;
        this.lane?.learn(ctx.mcpReq.envelope as Record<string, unknown> | undefined);
        this.options.handoff?.learn(ctx.mcpReq.envelope as Record<string, unknown> | undefined);
        return this.callTool(req.params, extraOf(ctx), ctx) as never;
      });
      this.installModernTasks();
    } else {
      server.fallbackRequestHandler = async (request: JSONRPCRequest, ctx: ServerContext) => {
        if (LEGACY_TASK_METHODS.has(request.method)) {
          if (!gw.readySettled) await gw.ready; // dead instances' tasks are reaped by then
          return tasks.handle(request.method, request.params, ctx.mcpReq.signal) as never;
        }
        if (request.method !== 'tools/call') throw new ProtocolError(ProtocolErrorCode.MethodNotFound, 'Method not found');
        const req = CallToolRequestLight.parse(request);
        if (req.params.task !== undefined) {
          if (!gw.readySettled) await gw.ready;
          const { progressToken: _, ...meta } = req.params._meta ?? {};
          const call = { name: req.params.name, args: req.params.arguments ?? {}, meta: hasOwnMember(meta) ? meta : undefined };
          return tasks.callAsTask(call, req.params.task, this.caller()) as never;
        }
        return this.callTool(req.params, extraOf(ctx)) as never;
      };
    }

    // Lists leave out what the policy denies this principal; gets, reads, completions and
    // subscriptions are judged and recorded by `gw.primitives` (broker/primitive-judge.ts).
    const shown = (server: string, type: 'prompt' | 'resource', name: string) => gw.primitives.visible(this.principal, { server, type, name });

    server.setRequestHandler('prompts/list', async () => {
      await gw.ready;
      await gw.registry.freshen('prompts');
      return { prompts: [...gw.registry.roster.prompts.values()].filter((p) => shown(p.server, 'prompt', p.name)).map((p) => p.definition) };
    });

    server.setRequestHandler('prompts/get', async (req, ctx) => {
      await gw.ready;
      const prompt = gw.registry.roster.prompts.get(req.params.name);
      if (!prompt) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${req.params.name}`);
      const judged = { kind: 'prompt', server: prompt.server, type: 'prompt', name: prompt.name, ownName: prompt.promptName, args: req.params.arguments ?? {} } as const;
      return this.guarded(judged, ctx, req.params._meta, ({ approved }) => this.forward(prompt.server, 'prompts/get', { ...req.params, name: prompt.promptName }, ctx, approved));
    });

    server.setRequestHandler('resources/list', async () => {
      await gw.ready;
      await gw.registry.freshen('resources');
      return { resources: [...gw.registry.roster.resources.values()].filter((r) => shown(r.server, 'resource', r.resource.uri)).map((r) => r.resource) };
    });

    server.setRequestHandler('resources/templates/list', async () => {
      await gw.ready;
      await gw.registry.freshen('resourceTemplates');
      return { resourceTemplates: gw.registry.roster.resourceTemplates.filter((t) => shown(t.server, 'resource', t.template.uriTemplate)).map((t) => t.template) };
    });

    server.setRequestHandler('resources/read', async (req, ctx) => {
      await gw.ready;
      const upstream = gw.resources.upstreamFor(req.params.uri);
      // -32602 on every revision: the v2 SDK re-codes a thrown -32002 (2025-11-25's code) as -32602 anyway.
      if (!upstream) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Resource not found: ${req.params.uri}`);
      const judged = { kind: 'resource', server: upstream.name, type: 'resource', name: req.params.uri, ownName: req.params.uri, args: {} } as const;
      return this.guarded(judged, ctx, req.params._meta, ({ approved }) => this.forward(upstream.name, 'resources/read', req.params, ctx, approved));
    });

    server.setRequestHandler('resources/subscribe', async (req, ctx) => {
      await gw.ready;
      const { uri } = req.params;
      // Judged before it counts: a refused subscription never reaches the upstream nor hears `resources/updated`.
      const upstream = gw.resources.upstreamFor(uri);
      // -32602, as for a read (above).
      if (!upstream) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Resource not found: ${uri}`);
      const judged = { kind: 'subscribe', server: upstream.name, type: 'resource', name: uri, ownName: uri, args: {} } as const;
      // Counted only once the subscription's record is written: a subscribe the upstream refused,
      // or whose record could not be written (refused `guard_error`), holds nothing.
      let added = false;
      try {
        return await this.guarded(judged, ctx, req.params._meta, async () => {
          if (!this.subscribed.has(uri)) {
            this.subscribed.add(uri);
            added = true;
            await gw.resources.subscribe(uri, this.mayHave);
          }
          return {};
        });
      } catch (err) {
        if (added && this.subscribed.delete(uri)) await gw.resources.unsubscribe(uri, this.mayHave).catch(() => undefined);
        throw err;
      }
    });

    server.setRequestHandler('resources/unsubscribe', async (req) => {
      if (this.subscribed.delete(req.params.uri)) await gw.resources.unsubscribe(req.params.uri, this.mayHave);
      return {};
    });

    server.setRequestHandler('logging/setLevel', async (req) => {
      this.level = req.params.level;
      if (this.sessionId !== null) gw.logLevel.set(this.sessionId, req.params.level);
      return {};
    });

    server.setRequestHandler('completion/complete', async (req, ctx) => {
      await gw.ready;
      const { ref, argument, context } = req.params;
      const args = context ? { argument, context } : { argument };
      if (ref.type === 'ref/prompt') {
        const prompt = gw.registry.roster.prompts.get(ref.name);
        if (!prompt) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${ref.name}`);
        const judged = { kind: 'completion', server: prompt.server, type: 'prompt', name: prompt.name, ownName: prompt.promptName, args } as const;
        return this.guarded(judged, ctx, req.params._meta, () =>
          this.forward(prompt.server, 'completion/complete', { ...req.params, ref: { ...ref, name: prompt.promptName } }, ctx),
        );
      }
      const upstream = gw.resources.upstreamForTemplate(ref.uri);
      if (!upstream) return { completion: { values: [] } };
      const judged = { kind: 'completion', server: upstream.name, type: 'resource', name: ref.uri, ownName: ref.uri, args } as const;
      return this.guarded(judged, ctx, req.params._meta, () => this.forward(upstream.name, 'completion/complete', req.params, ctx));
    });
  }

  /**
   * The tasks extension's methods on a modern instance (modern-tasks.ts): `tasks/get`,
   * `tasks/update`, `tasks/cancel`, each -32021 when its request did not declare the extension.
   */
  private installModernTasks(): void {
    const gw = this.gateway;
    const tasks = new ModernTasks(gw.tasks, this.principal);
    const gate = async (ctx: ServerContext, method: string) => {
      const capabilities = (ctx.mcpReq.envelope as Record<string, ClientCapabilities | undefined> | undefined)?.[CLIENT_CAPABILITIES_META_KEY];
      if (!declaresTasks(capabilities)) throw tasksExtensionRequired(`${method} needs the "io.modelcontextprotocol/tasks" extension, which this request did not declare`);
      if (!gw.readySettled) await gw.ready; // dead instances' tasks are reaped by then
    };
    const byId = z.looseObject({ taskId: z.string() });
    this.server.setRequestHandler('tasks/get', { params: byId }, async (params, ctx) => {
      await gate(ctx, 'tasks/get');
      return tasks.get(params.taskId) as never;
    });
    // The SDK lifts `inputResponses` out of the params (the multi-round-trip field) into `ctx.mcpReq`.
    this.server.setRequestHandler('tasks/update', { params: byId }, async (params, ctx) => {
      await gate(ctx, 'tasks/update');
      return tasks.update(params.taskId, ctx.mcpReq.inputResponses ?? {}) as never;
    });
    this.server.setRequestHandler('tasks/cancel', { params: byId }, async (params, ctx) => {
      await gate(ctx, 'tasks/cancel');
      return tasks.cancel(params.taskId) as never;
    });
  }

  /** Serves one prompt, resource or completion request through the policy and the records (broker/primitive-judge.ts). */
  private guarded<T>(
    request: Omit<PrimitiveRequest, 'signal'>,
    ctx: ServerContext,
    meta: Record<string, unknown> | undefined,
    forward: (context: { approved: boolean }) => Promise<T>,
  ): Promise<T> {
    const extra = extraOf(ctx);
    return this.gateway.primitives.serve({ ...request, signal: toAbortSignal(extra.signal) }, this.callerOf(ctx, meta, extra), forward);
  }

  /**
   * Forwards a request to an upstream; its reply and failure come back scrubbed (`Registry.request`).
   * A modern upstream is told this client's capabilities and log level, and its questions
   * (`input_required`) are put to this session on the request's stream (legacy callers), or
   * relayed to a modern caller as the broker's own `input_required` (broker/relay-input.ts: the
   * retry's `requestState` opened first, a refused one is -32602 and nothing is sent).
   * Modern: the broker's unit key stays here, and the upstream's cache fields and identity do not come back.
   */
  private async forward(server: string, method: string, params: Record<string, unknown>, ctx: ServerContext, approved = false): Promise<never> {
    const extra = extraOf(ctx);
    const gw = this.gateway;
    const modern = this.era === 'modern';
    const meta = params._meta as Record<string, unknown> | undefined;
    const sent = modern && meta ? { ...params, _meta: withoutUnitKey(meta) } : params;
    const caller = modern ? this.callerOf(ctx, meta, extra) : undefined;
    const binding: RelayBinding | undefined =
      modern && caller && (method === 'prompts/get' || method === 'resources/read')
        ? {
            principal: caller.principal,
            server,
            method,
            target: String(method === 'prompts/get' ? params.name : params.uri),
            args: method === 'prompts/get' ? (params.arguments ?? {}) : {},
          }
        : undefined;
    // A 2025-11-25 upstream asks through live requests: held and answered to this request as `input_required`.
    if (binding && caller && gw.registry.upstream(server)?.era === 'legacy') return this.forwardHeld(server, method, sent, caller, extra, binding, approved) as never;
    const opening = binding && caller ? await openRelay(gw.sealedStates, caller, binding) : undefined;
    if (opening?.kind === 'refused') throw new UnsentRefusal(opening.reason);
    const result = await gw.registry.request(server, method, sent, {
      signal: toAbortSignal(extra.signal),
      timeoutMs: gw.config.broker.timeoutMs,
      caller: modern
        ? { clientCapabilities: caller?.clientCapabilities, logLevel: caller?.logLevel }
        : { clientCapabilities: this.server.getClientCapabilities(), logLevel: this.level },
      onServerRequest: this.serverRequestRoute((request, signal) => extra.sendRequest(request as never, AnyResult, { signal, timeout: gw.config.broker.timeoutMs })),
      ...(opening && { inputRelay: opening.input }),
      principal: this.principal,
    });
    if (binding && result.resultType === 'input_required') {
      const relayed = await relayInputRequired(gw.sealedStates, result, binding, { callId: newCallId(), ttlMs: gw.config.policy.askTimeoutMs, approved });
      return ownedByUs(relayed) as never;
    }
    return (modern ? ownedByUs(result) : result) as never;
  }

  /**
   * A modern caller's `prompts/get` or `resources/read` to a 2025-11-25 upstream: as a `tools/call`
   * (held-calls.ts), the upstream's sampling, elicitation or roots request during it is held and
   * answered to this request as `input_required` (its state bound to the method, upstream, prompt
   * name or URI and arguments), and the retry answers it and gets the result (or the next
   * question). A refused retry is -32602, as a refused relay state; a capability the request did
   * not declare is -32021. Each round is judged and recorded by the caller (`guarded`).
   */
  private async forwardHeld(
    server: string,
    method: string,
    params: Record<string, unknown>,
    caller: CallerSession,
    extra: Pick<DirectCallExtra, 'signal' | 'sendNotification'>,
    relay: RelayBinding,
    /** The request was approved at its first round (a policy `ask`): its held states say so. */
    approved = false,
  ): Promise<unknown> {
    const gw = this.gateway;
    const binding: HeldBinding = { principal: caller.principal, tool: `${method}:${server}/${relay.target}`, args: relay.args };
    if (isHeldState(caller.requestState)) {
      return this.joinHeld(binding, caller, extra, async (reason) => {
        throw new UnsentRefusal(reason);
      });
    }
    let missing: string | undefined;
    const checked = () => {
      if (missing === undefined) return;
      throw new MissingRequiredClientCapabilityError({ requiredCapabilities: { [missing]: {} } }, `the ${method} needs the client capability "${missing}", which this request did not declare`);
    };
    const held = this.newHeldCall(server, extra);
    if (approved) held.approve();
    const unused: ServerRequestHandler = async (request) => {
      throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `the calling client speaks MCP 2026-07-28, which has no server-to-client "${request.method}" request`);
    };
    const route = this.serverRequestRoute(unused, null, {
      declared: caller.clientCapabilities,
      onMissing: (capability) => (missing ??= capability),
      hold: held.hold,
    });
    const settled = gw.registry
      .request(server, method, params, {
        signal: toAbortSignal(held.signal),
        timeoutMs: gw.config.broker.timeoutMs,
        caller: { clientCapabilities: caller.clientCapabilities, logLevel: caller.logLevel },
        onServerRequest: route,
        principal: caller.principal,
      })
      .then(
        (result) => (checked(), ownedByUs(result)),
        (err: unknown) => {
          checked();
          throw err;
        },
      );
    held.follow(extra.signal);
    const event = await held.first(settled);
    if (event.kind === 'done') {
      if (event.ok) return event.value;
      throw event.err;
    }
    held.follow(undefined);
    heldCallsOf(gw, gw.sealedStates).park(held.call(), settled);
    held.onJoin = (joiner) => held.follow(joiner.signal);
    return this.askHeld(held.call(), event, binding);
  }
}

export type { JSONRPCMessage };

/** Whether `declared` takes an `elicitation/create` in the mode `request` asks (`url` needs `elicitation.url`; form needs `form` or a bare `{}`). */
function elicitationModeDeclared(request: { params?: Record<string, unknown> }, declared: ClientCapabilities | undefined): boolean {
  return request.params?.mode === 'url' ? supportsUrlElicitation(declared) : supportsFormElicitation(declared);
}
