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
 * Era: the SDK v2 `Server` here serves the 2025-11-25 (legacy) era only, as before: it is built
 * with the SDK's default `supportedProtocolVersions` (`initialize` revisions 2024-10-07 to
 * 2025-11-25, no modern one), so it installs no `server/discover` handler and a 2026-07-28
 * client falls back to `initialize`. One `Server` per session stays the unit for legacy
 * sessions when the modern era is served beside it.
 */
import { ElicitResultSchema, LoggingLevelSchema } from '@modelcontextprotocol/core';
import { ProtocolError, ProtocolErrorCode, Server } from '@modelcontextprotocol/server';
import type {
  ClientCapabilities,
  JSONRPCMessage,
  JSONRPCRequest,
  LoggingLevel,
  ServerCapabilities,
  ServerContext,
  Transport,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import { listAsPinned } from '../broker/pins.js';
import { unprefixErrors } from './error-prefix.js';
import { visibleTools } from '../broker/visible-tools.js';
import type { PrimitiveRequest } from '../broker/primitive-judge.js';
import type { CallerSession } from '../broker/types.js';
import type { TaskRow } from '../store/store.js';
import { VERSION, type Gateway } from '../gateway.js';
import { messageOf } from '../shared/errors.js';
import { newSessionId } from '../shared/ids.js';
import type { ListKind } from '../upstream/registry.js';
import type { ServerRequestHandler } from '../upstream/types.js';
import { routeToolsCallDirectly, type DirectCallExtra } from './direct-tools-call.js';
import { guardRequestIds } from './request-ids.js';
import { guardRequestShapes } from './request-shape.js';
import { LEGACY_TASK_METHODS, LegacyTasks, TASKS_CAPABILITY, withTaskSupport } from './legacy-tasks.js';

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

/** The client capability each upstream→client request needs. */
const CAPABILITY_FOR_REQUEST: Record<string, 'sampling' | 'elicitation' | 'roots'> = {
  'sampling/createMessage': 'sampling',
  'elicitation/create': 'elicitation',
  'roots/list': 'roots',
};

export interface SessionOptions {
  /** `local` for stdio; a configured principal over HTTP. */
  principal: string;
  /** Session id; default a new UUID (Streamable HTTP passes its `Mcp-Session-Id`). */
  sessionId?: string;
  /** Called with the client's capabilities as its `initialize` request arrives. */
  onInitialize?: (capabilities: ClientCapabilities) => void;
  /** Extra capabilities (the broker's experimental ones). */
  experimental?: Gateway['experimental'];
}

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

export class DownstreamSession {
  readonly sessionId: string;
  readonly principal: string;
  readonly server: Server;
  private level: LoggingLevel | undefined;
  private readonly subscribed = new Set<string>();
  private closed = false;
  private readonly detach: () => void;

  constructor(
    private readonly gateway: Gateway,
    private readonly options: SessionOptions,
  ) {
    this.sessionId = options.sessionId ?? newSessionId();
    this.principal = options.principal;
    this.server = new Server(
      { name: 'mcp-broker', version: VERSION },
      {
        // The gateway's experimental capabilities (builtins: `mcp-broker/reconnect`), then the transport's.
        capabilities: { ...SERVER_CAPABILITIES, experimental: experimentalOf(gateway.experimental, options.experimental) },
        debouncedNotificationMethods: [
          'notifications/tools/list_changed',
          'notifications/prompts/list_changed',
          'notifications/resources/list_changed',
        ],
      },
    );
    this.server.onerror = (err) => gateway.logger.debug({ sessionId: this.sessionId, err: messageOf(err) }, 'downstream protocol error');
    this.installHandlers();
    const onList = (kind: ListKind) => this.sendListChanged(kind);
    const onUpdated = (uri: string) => {
      if (this.subscribed.has(uri)) void this.server.sendResourceUpdated({ uri }).catch(() => undefined);
    };
    const privileged = options.principal === 'local' || gateway.config.principals[options.principal]?.role === 'operator';
    const onLog = (params: { level: LoggingLevel; logger?: string; data?: unknown }, owner: string | undefined) => {
      // Tied to a call: its session only. Tied to none: privileged sessions only.
      if (owner !== undefined ? owner === this.sessionId : privileged) this.sendLog(params.level, params.data, params.logger);
    };
    gateway.on('listChanged', onList);
    gateway.on('resourceUpdated', onUpdated);
    gateway.on('log', onLog);
    // notifications/tasks/status to the session that created the task (2025-11-25).
    const onTask = (row: TaskRow) => {
      if (row.sessionId !== this.sessionId || this.closed) return;
      const { _meta, ...task } = gateway.tasks.toMcpTask(row);
      void this.server.notification({ method: 'notifications/tasks/status', params: { ...task, _meta } } as never).catch(() => undefined);
    };
    gateway.tasks.on('status', onTask);
    this.detach = () => {
      gateway.off('listChanged', onList);
      gateway.off('resourceUpdated', onUpdated);
      gateway.off('log', onLog);
      gateway.tasks.off('status', onTask);
    };
  }

  /** Connects the session to a transport and starts serving it. */
  async connect(transport: Transport): Promise<void> {
    const onclose = () => void this.close();
    const send = transport.send.bind(transport);
    await this.server.connect(transport);
    unprefixErrors(transport);
    routeToolsCallDirectly(this.server, transport, (params, extra) => this.callTool(params, extra));
    guardRequestIds(transport, {
      onInitialize: (caps) => this.options.onInitialize?.(caps),
    });
    guardRequestShapes(transport, send);
    const previous = this.server.onclose;
    this.server.onclose = () => {
      previous?.();
      onclose();
    };
  }

  /** The caller as the broker sees it, bound to one request's `sendRequest` so approvals ride its stream. */
  caller(sendRequest?: (req: { method: string; params?: unknown }, schema: typeof AnyResult, opts?: { signal?: AbortSignal; timeout?: number }) => Promise<Record<string, unknown>>): CallerSession {
    const capabilities = this.server.getClientCapabilities();
    const session = this;
    return {
      sessionId: this.sessionId,
      principal: this.principal,
      unit: this.sessionId,
      clientCapabilities: capabilities,
      logLevel: this.level,
      elicit: capabilities?.elicitation
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
   * and tagged with the session id so an upstream can tell calls of different sessions apart.
   */
  private serverRequestRoute(send: ServerRequestHandler): ServerRequestHandler {
    const route = async (request: Parameters<ServerRequestHandler>[0], signal: AbortSignal) => {
      const needed = CAPABILITY_FOR_REQUEST[request.method];
      const declared = this.server.getClientCapabilities();
      if (needed && !declared?.[needed]) {
        throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `the calling client did not declare the "${needed}" capability`);
      }
      return send(request, signal);
    };
    return Object.assign(route, { sessionId: this.sessionId });
  }

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
    this.gateway.budgets.release(this.sessionId);
    this.gateway.setLogLevel(this.sessionId, undefined);
    for (const uri of this.subscribed) await this.gateway.unsubscribe(uri);
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

  /** Serves one `tools/call` through the broker; the SDK handler and the direct lane both land here. */
  private async callTool(
    params: z.infer<typeof CallToolRequestLight>['params'],
    extra: Pick<DirectCallExtra, 'signal' | 'sendNotification' | 'sendRequest'> & Partial<Pick<DirectCallExtra, 'abort'>>,
  ): Promise<unknown> {
    const gw = this.gateway;
    // Once ready, no await before the upstream write: over HTTP, any turn given up here is spent
    // on the SDK's response setup while the upstream waits (issue 6, bench/README.md).
    if (!gw.readySettled) await gw.ready;
    const { name, arguments: args, _meta } = params;
    const target = gw.router.resolve(name);
    if (!target) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${name}${gw.registry.unknownToolHint()}`);
    const { progressToken, ...meta } = _meta ?? {};
    let last = -Infinity;
    const answer = await gw.broker.call(
      {
        name,
        args: args ?? {},
        meta: Object.keys(meta).length ? meta : undefined,
        signal: extra.signal,
        abort: extra.abort,
        onProgress:
          progressToken === undefined
            ? undefined
            : (update) => {
                if (update.progress < last) return;
                last = update.progress;
                void extra.sendNotification({ method: 'notifications/progress', params: { ...update, progressToken } }).catch(() => undefined);
              },
        // Bounded by the broker's hard cap, never the SDK's hidden 60 s default (F18); the call's deadline aborts it sooner.
        onServerRequest: this.serverRequestRoute((request, signal) =>
          extra.sendRequest(request as never, AnyResult, { signal, timeout: gw.config.broker.maxTotalTimeoutMs }),
        ),
      },
      this.caller((r, s, o) => extra.sendRequest(r as never, s, o)),
      target,
    );
    return answer.result;
  }

  private installHandlers(): void {
    const gw = this.gateway;
    const server = this.server;

    server.setRequestHandler('tools/list', async () => {
      await gw.ready;
      // Upstream tools as pinned for this principal: a changed one as approved, or withheld.
      const rosterTool = (name: string) => gw.registry.roster.tools.get(name);
      const pinned = await listAsPinned(gw.router.list(), this.principal, { store: gw.store, clock: gw.clock, rosterTool, logger: gw.logger });
      // Less what the policy denies this principal, as configured to be presented (issue 18 §4).
      return { tools: visibleTools(pinned, this.principal, gw.toolVisibility).map((t) => withTaskSupport(t, gw.router.resolve(t.name))) };
    });

    // `tools/call` is served as the fallback handler, not through `setRequestHandler`: the SDK
    // Server wraps a registered `tools/call` handler in a strict request check and a result
    // re-validation (and copy), which the broker's results must not pay (F17). Well-formed calls do
    // not reach it at all: connect() routes them straight to callTool (issue 6). A call the light
    // check refuses answers -32603 with the schema's message, as a registered handler's throw would.
    // Task-augmented calls and `tasks/*` (2025-11-25) are served here too (legacy-tasks.ts).
    const tasks = new LegacyTasks({ tasks: gw.tasks, resolve: (name) => gw.router.resolve(name) }, this.principal);
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
        const call = { name: req.params.name, args: req.params.arguments ?? {}, meta: Object.keys(meta).length ? meta : undefined };
        return tasks.callAsTask(call, req.params.task, this.caller()) as never;
      }
      return this.callTool(req.params, extraOf(ctx)) as never;
    };

    // Lists leave out what the policy denies this principal; gets, reads, completions and
    // subscriptions are judged and recorded by `gw.primitives` (broker/primitive-judge.ts).
    const shown = (server: string, type: 'prompt' | 'resource', name: string) => gw.primitives.visible(this.principal, { server, type, name });

    server.setRequestHandler('prompts/list', async () => {
      await gw.ready;
      return { prompts: [...gw.registry.roster.prompts.values()].filter((p) => shown(p.server, 'prompt', p.name)).map((p) => p.definition) };
    });

    server.setRequestHandler('prompts/get', async (req, ctx) => {
      await gw.ready;
      const prompt = gw.registry.roster.prompts.get(req.params.name);
      if (!prompt) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${req.params.name}`);
      const judged = { kind: 'prompt', server: prompt.server, type: 'prompt', name: prompt.name, ownName: prompt.promptName, args: req.params.arguments ?? {} } as const;
      return this.guarded(judged, ctx, () => this.forward(prompt.server, 'prompts/get', { ...req.params, name: prompt.promptName }, ctx));
    });

    server.setRequestHandler('resources/list', async () => {
      await gw.ready;
      return { resources: [...gw.registry.roster.resources.values()].filter((r) => shown(r.server, 'resource', r.resource.uri)).map((r) => r.resource) };
    });

    server.setRequestHandler('resources/templates/list', async () => {
      await gw.ready;
      return { resourceTemplates: gw.registry.roster.resourceTemplates.filter((t) => shown(t.server, 'resource', t.template.uriTemplate)).map((t) => t.template) };
    });

    server.setRequestHandler('resources/read', async (req, ctx) => {
      await gw.ready;
      const upstream = gw.upstreamForResource(req.params.uri);
      // -32602 on every revision: the v2 SDK re-codes a thrown -32002 (2025-11-25's code) as -32602 anyway.
      if (!upstream) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Resource not found: ${req.params.uri}`);
      const judged = { kind: 'resource', server: upstream.name, type: 'resource', name: req.params.uri, ownName: req.params.uri, args: {} } as const;
      return this.guarded(judged, ctx, () => this.forward(upstream.name, 'resources/read', req.params, ctx));
    });

    server.setRequestHandler('resources/subscribe', async (req, ctx) => {
      await gw.ready;
      const { uri } = req.params;
      // Judged before it counts: a refused subscription never reaches the upstream nor hears `resources/updated`.
      const upstream = gw.upstreamForResource(uri);
      // -32602, as for a read (above).
      if (!upstream) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Resource not found: ${uri}`);
      const judged = { kind: 'subscribe', server: upstream.name, type: 'resource', name: uri, ownName: uri, args: {} } as const;
      return this.guarded(judged, ctx, async () => {
        if (!this.subscribed.has(uri)) {
          this.subscribed.add(uri);
          await gw.subscribe(uri);
        }
        return {};
      });
    });

    server.setRequestHandler('resources/unsubscribe', async (req) => {
      if (this.subscribed.delete(req.params.uri)) await gw.unsubscribe(req.params.uri);
      return {};
    });

    server.setRequestHandler('logging/setLevel', async (req) => {
      this.level = req.params.level;
      gw.setLogLevel(this.sessionId, req.params.level);
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
        return this.guarded(judged, ctx, () =>
          this.forward(prompt.server, 'completion/complete', { ...req.params, ref: { ...ref, name: prompt.promptName } }, ctx),
        );
      }
      const upstream = gw.upstreamForTemplate(ref.uri);
      if (!upstream) return { completion: { values: [] } };
      const judged = { kind: 'completion', server: upstream.name, type: 'resource', name: ref.uri, ownName: ref.uri, args } as const;
      return this.guarded(judged, ctx, () => this.forward(upstream.name, 'completion/complete', req.params, ctx));
    });
  }

  /** Serves one prompt, resource or completion request through the policy and the records (broker/primitive-judge.ts). */
  private guarded<T>(request: Omit<PrimitiveRequest, 'signal'>, ctx: ServerContext, forward: () => Promise<T>): Promise<T> {
    const extra = extraOf(ctx);
    return this.gateway.primitives.serve({ ...request, signal: extra.signal }, this.caller((r, s, o) => extra.sendRequest(r as never, s, o)), forward);
  }

  /**
   * Forwards a request to an upstream; its reply and failure come back scrubbed (`Registry.request`).
   * A modern upstream is told this client's capabilities and log level, and its questions
   * (`input_required`) are put to this session on the request's stream.
   */
  private async forward(server: string, method: string, params: Record<string, unknown>, ctx: ServerContext): Promise<never> {
    const extra = extraOf(ctx);
    const gw = this.gateway;
    return (await gw.registry.request(server, method, params, {
      signal: extra.signal,
      timeoutMs: gw.config.broker.timeoutMs,
      caller: { clientCapabilities: this.server.getClientCapabilities(), logLevel: this.level },
      onServerRequest: this.serverRequestRoute((request, signal) => extra.sendRequest(request as never, AnyResult, { signal, timeout: gw.config.broker.timeoutMs })),
    })) as never;
  }
}

export type { JSONRPCMessage };
