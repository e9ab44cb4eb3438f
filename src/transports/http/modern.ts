/**
 * Modern (2026-07-28) requests at `POST /mcp` (spec `basic/transports/streamable-http.mdx`): the
 * SDK's `createMcpHandler` in its strict posture (`legacy: 'reject'`), behind the era routing of
 * `streamable.ts` (`era.ts`), which keeps the sessionful legacy face for 2025 clients.
 *
 * - Stateless: no `Mcp-Session-Id`; each request gets its own instance (`DownstreamSession`,
 *   era `modern`) for the authenticated principal, so any broker process can answer it.
 * - The SDK validates the envelope (-32602 missing field, -32022 unknown version with the
 *   supported list, HTTP 400) and the standard headers against the body (`Mcp-Method`,
 *   `Mcp-Name`, `MCP-Protocol-Version`: -32020, HTTP 400). `Mcp-Param-*` headers are checked here,
 *   before the lane and the SDK (whose own check runs only for an `McpServer`), against the
 *   `x-mcp-header` marks of the tool as the roster advertises it (-32020, HTTP 400). They mirror
 *   arguments the call carries in its body, so the upstream gets their values with the arguments;
 *   the headers themselves are not sent on (the upstream leg makes its own).
 * - Closing the response stream aborts the request (the web `Request`'s signal), which cancels
 *   the call upstream (recorded `cancelled`).
 * - A plain `tools/call` whose envelope the SDK accepted before for the principal is answered by
 *   the HTTP lane (`wire/direct-modern-http.ts`) as the SDK would, on one long-lived instance per
 *   principal, without the per-request instance; anything else it hands back to the SDK here.
 * - `subscriptions/listen`: the handler's bus (`listen-bus.ts`) carries the gateway's
 *   `list_changed` and `resources/updated` to open listen streams, each update judged again for
 *   the stream's principal; each stream holds one `http.maxStreams` slot and subscribes the
 *   broker upstream for its `resourceSubscriptions` (`subscriptions.ts`). A
 *   listen for `taskIds` only (the tasks extension's status notifications) is served by
 *   `task-listen.ts`, in the same slot.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createMcpHandler, type McpHttpHandler } from '@modelcontextprotocol/server';
import { visibleTools } from '../../broker/visible-tools.js';
import { messageOf } from '../../shared/errors.js';
import { paramHeaderMismatch, scanMcpHeaders, type McpHeaderDeclaration } from '../../upstream/mcp-param-headers.js';
import type { ListKind } from '../../upstream/registry.js';
import { modernHttpLane } from '../../wire/direct-modern-http.js';
import { DownstreamSession, SERVER_INFO } from '../session.js';
import { ListenSubscriptions } from '../subscriptions.js';
import type { Principal } from './auth.js';
import { answerOverCap } from './caps.js';
import { whenClosed, type HttpContext } from './context.js';
import { acceptsBoth, jsonRpcError, sendJson } from './guards.js';
import { ListenBus } from './listen-bus.js';
import { isTaskListen, mixedTaskListen, serveTaskListen, withTaskStatus } from './task-listen.js';
import { serveWeb } from './web-adapter.js';

/** The modern face of `/mcp`: {@link ModernHttp.serve} one request; {@link ModernHttp.close} ends open streams. */
export interface ModernHttp {
  serve(principal: Principal, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void>;
  close(): Promise<void>;
}

/** -32020 HeaderMismatch (2026-07-28). */
const HEADER_MISMATCH = -32020;

/** A tool definition's valid `x-mcp-header` marks (none when they break the rules: a client leaves such a tool out), by definition. */
const marks = new WeakMap<object, readonly McpHeaderDeclaration[]>();
function markedHeaders(definition: { inputSchema?: unknown }): readonly McpHeaderDeclaration[] {
  let found = marks.get(definition);
  if (!found) {
    const scan = scanMcpHeaders(definition.inputSchema);
    marks.set(definition, (found = scan.valid ? scan.declarations : []));
  }
  return found;
}

export function modernHttp(ctx: HttpContext): ModernHttp {
  const { gateway } = ctx;
  /** Each SDK-served request's Node request, by the web `Request` the SDK's factory is handed. */
  const nodeRequests = new WeakMap<Request, { req: IncomingMessage; body: unknown }>();
  /** The HTTP lane's instance of each principal (never connected; closed with the face). */
  const laneSessions = new Map<string, DownstreamSession>();
  const newSession = (principal: string, handoff?: ConstructorParameters<typeof DownstreamSession>[1]['handoff']) =>
    new DownstreamSession(gateway, { principal, era: 'modern', relayEvents: false, experimental: ctx.experimental, handoff });
  const lane = modernHttpLane({
    serverInfo: SERVER_INFO,
    sessionFor(principal) {
      let session = laneSessions.get(principal);
      if (!session) laneSessions.set(principal, (session = newSession(principal)));
      return session;
    },
    handOff: (principal, req, res, body) => serveSdk(principal, req, res, body, false),
    onerror: (err) => ctx.logger.debug({ err: messageOf(err) }, 'modern http lane: answer not written'),
  });
  const bus = new ListenBus(
    (principal, uri, server) => gateway.primitives.allowedOutright(principal, { server, type: 'resource', name: uri }),
    (err) => ctx.logger.debug({ err: messageOf(err) }, 'modern http listen stream: notification not written'),
  );
  const handler: McpHttpHandler = createMcpHandler(
    ({ authInfo, requestInfo }) => {
      const principal = authInfo?.clientId ?? 'local';
      const from = requestInfo && nodeRequests.get(requestInfo);
      const handoff = from && { replay: () => lane.takeReplay(from.req), learn: (envelope: Record<string, unknown> | undefined) => lane.learn(principal, from.req, from.body, envelope) };
      return newSession(principal, handoff).server;
    },
    {
      legacy: 'reject',
      bus,
      keepAliveMs: ctx.settings.keepAliveMs,
      maxRequestBodySize: ctx.settings.maxBodyBytes,
      onerror: (err) => ctx.logger.debug({ err: messageOf(err) }, 'modern http request refused or failed'),
    },
  );
  const onList = (kind: ListKind) =>
    kind === 'tools' ? handler.notify.toolsChanged() : kind === 'prompts' ? handler.notify.promptsChanged() : handler.notify.resourcesChanged();
  const onUpdated = (uri: string, server: string) => bus.resourceUpdated(uri, server);
  gateway.on('listChanged', onList);
  gateway.on('resourceUpdated', onUpdated);

  /**
   * Serves one request through the SDK's handler (`listen`: a `subscriptions/listen`, whose stream
   * the bus ties to `principal`; `mixed`: a listen for tasks and other kinds, with the task status added).
   */
  const serveSdk = (principal: string, req: IncomingMessage, res: ServerResponse, body: unknown, listen: boolean, mixed?: { id: string | number; honoured: string[] }) => {
    const authInfo = { token: '', clientId: principal, scopes: [] };
    return serveWeb(async (request) => {
      nodeRequests.set(request, { req, body });
      const fetch = () => handler.fetch(request, { parsedBody: body, authInfo });
      const response = await (listen ? bus.serving(principal, fetch) : fetch());
      return mixed ? withTaskStatus(response, gateway, principal, mixed.id, mixed.honoured) : response;
    }, req, res);
  };

  /**
   * Answers 406 / -32000, as the SDK's transport answers a 2025-11-25 POST, when a request's
   * `Accept` does not list both `application/json` and `text/event-stream` (spec
   * `streamable-http.mdx`, "Sending Messages"): either may answer it (a call with progress or
   * logs is a stream). True when it did. A notification passes: 2026-07-28 sets no header
   * requirements for one.
   */
  const refusedAccept = (req: IncomingMessage, res: ServerResponse, body: unknown): boolean => {
    const id = typeof body === 'object' && body !== null ? (body as { id?: unknown }).id : undefined;
    if ((typeof id !== 'string' && typeof id !== 'number') || acceptsBoth(req.headers.accept)) return false;
    sendJson(res, 406, jsonRpcError(-32000, 'Not Acceptable: Client must accept both application/json and text/event-stream', id));
    return true;
  };

  /**
   * Answers 400 / -32020 (HeaderMismatch) when a `tools/call`'s `Mcp-Param-*` headers disagree
   * with its arguments, for the tool's `x-mcp-header` marks as the roster advertises them; true
   * when it did. The SDK's own check runs only for an `McpServer`, and ours is a `Server`.
   */
  const refusedParamHeaders = (principal: string, req: IncomingMessage, res: ServerResponse, body: unknown): boolean => {
    if (typeof body !== 'object' || body === null) return false;
    const { method, params, id } = body as { method?: unknown; params?: { name?: unknown; arguments?: unknown }; id?: unknown };
    if (method !== 'tools/call' || typeof params?.name !== 'string') return false;
    const tool = gateway.registry.roster.tools.get(params.name);
    if (!tool) return false;
    const declarations = markedHeaders(tool.definition);
    if (!declarations.length) return false;
    const mismatch = paramHeaderMismatch(declarations, params.arguments, (name) => {
      const value = req.headers[name];
      return Array.isArray(value) ? value.join(', ') : value;
    });
    if (!mismatch) return false;
    // A tool the caller's policy hides is answered as the broker path answers any call to it
    // (denied), so that the header check tells nothing about its arguments.
    if (!visibleTools([{ ...tool.definition, name: params.name }], principal, gateway.toolVisibility).length) return false;
    const answer = {
      jsonrpc: '2.0',
      id: typeof id === 'string' || typeof id === 'number' ? id : null,
      error: { code: HEADER_MISMATCH, message: `Bad Request: the request headers and body disagree: ${mismatch.problem}`, data: { mismatch: { header: mismatch.header, body: mismatch.problem } } },
    };
    res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    return true;
  };

  return {
    async serve(principal, req, res, body) {
      if (refusedAccept(req, res, body)) return;
      if (refusedParamHeaders(principal.name, req, res, body)) return;
      const direct = lane.take(principal.name, req, res, body);
      if (direct) return direct;
      const listens = new ListenSubscriptions(gateway, principal.name);
      listens.observe(body);
      // Every listen holds a stream slot while it is open, whatever it listens for.
      const listen = typeof body === 'object' && body !== null && (body as { method?: unknown }).method === 'subscriptions/listen';
      if (listen) {
        const stream = ctx.streams.acquire(principal, 'modern', () => res.destroy());
        if (!stream.ok) {
          await listens.close();
          return answerOverCap(res, stream.refusal, principal, ctx.logger);
        }
        whenClosed(res, () => {
          stream.release();
          void listens.close();
        });
      }
      // Task status (the tasks extension) is served beside the SDK's listen router (task-listen.ts).
      if (isTaskListen(body)) return serveTaskListen(gateway, principal.name, body, req, res);
      // A listen for tasks and other kinds: the SDK's stream, with the task status added.
      const mixed = listen ? await mixedTaskListen(gateway, principal.name, body) : undefined;
      if (mixed && 'refused' in mixed) return serveWeb(async () => mixed.refused, req, res);
      await serveSdk(principal.name, req, res, body, listen, mixed);
    },
    async close() {
      gateway.off('listChanged', onList);
      gateway.off('resourceUpdated', onUpdated);
      lane.close();
      await Promise.all([...laneSessions.values()].map((session) => session.close()));
      laneSessions.clear();
      await handler.close();
    },
  };
}
