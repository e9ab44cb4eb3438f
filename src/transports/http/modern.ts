/**
 * Modern (2026-07-28) requests at `POST /mcp` (spec `basic/transports/streamable-http.mdx`): the
 * SDK's `createMcpHandler` in its strict posture (`legacy: 'reject'`), behind the era routing of
 * `streamable.ts` (`era.ts`), which keeps the sessionful legacy face for 2025 clients.
 *
 * - Stateless: no `Mcp-Session-Id`; each request gets its own instance (`DownstreamSession`,
 *   era `modern`) for the authenticated principal, so any broker process can answer it.
 * - The SDK validates the envelope (-32602 missing field, -32022 unknown version with the
 *   supported list, HTTP 400) and the standard headers against the body (`Mcp-Method`,
 *   `Mcp-Name`, `MCP-Protocol-Version`, and `Mcp-Param-*` against the tool's `x-mcp-header`
 *   arguments: -32020, HTTP 400). `Mcp-Param-*` mirror arguments the call carries in its body,
 *   so the upstream gets their values with the arguments; the headers themselves are not sent on.
 * - Closing the response stream aborts the request (the web `Request`'s signal), which cancels
 *   the call upstream (recorded `cancelled`).
 * - `subscriptions/listen`: the handler's notifier carries the gateway's `list_changed` and
 *   `resources/updated` to open listen streams; each stream holds one `http.maxStreams` slot
 *   and subscribes the broker upstream for its `resourceSubscriptions` (`subscriptions.ts`). A
 *   listen for `taskIds` only (the tasks extension's status notifications) is served by
 *   `task-listen.ts`, in the same slot.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createMcpHandler, type McpHttpHandler } from '@modelcontextprotocol/server';
import { messageOf } from '../../shared/errors.js';
import type { ListKind } from '../../upstream/registry.js';
import { DownstreamSession } from '../session.js';
import { ListenSubscriptions } from '../subscriptions.js';
import type { Principal } from './auth.js';
import { answerOverCap } from './caps.js';
import { whenClosed, type HttpContext } from './context.js';
import { isTaskListen, mixedTaskListen, serveTaskListen, withTaskStatus } from './task-listen.js';
import { serveWeb } from './web-adapter.js';

/** The modern face of `/mcp`: {@link ModernHttp.serve} one request; {@link ModernHttp.close} ends open streams. */
export interface ModernHttp {
  serve(principal: Principal, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void>;
  close(): Promise<void>;
}

export function modernHttp(ctx: HttpContext): ModernHttp {
  const { gateway } = ctx;
  const handler: McpHttpHandler = createMcpHandler(
    ({ authInfo }) =>
      new DownstreamSession(gateway, { principal: authInfo?.clientId ?? 'local', era: 'modern', relayEvents: false, experimental: ctx.experimental }).server,
    {
      legacy: 'reject',
      keepAliveMs: ctx.settings.keepAliveMs,
      maxRequestBodySize: ctx.settings.maxBodyBytes,
      onerror: (err) => ctx.logger.debug({ err: messageOf(err) }, 'modern http request refused or failed'),
    },
  );
  const onList = (kind: ListKind) =>
    kind === 'tools' ? handler.notify.toolsChanged() : kind === 'prompts' ? handler.notify.promptsChanged() : handler.notify.resourcesChanged();
  const onUpdated = (uri: string) => handler.notify.resourceUpdated(uri);
  gateway.on('listChanged', onList);
  gateway.on('resourceUpdated', onUpdated);

  return {
    async serve(principal, req, res, body) {
      const listens = new ListenSubscriptions(gateway, principal.name);
      listens.observe(body);
      // Every listen holds a stream slot while it is open, whatever it listens for.
      const listen = typeof body === 'object' && body !== null && (body as { method?: unknown }).method === 'subscriptions/listen';
      if (listen) {
        const stream = ctx.streams.acquire(principal, 'modern');
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
      const authInfo = { token: '', clientId: principal.name, scopes: [] };
      // A listen for tasks and other kinds: the SDK's stream, with the task status added.
      const mixed = listen ? await mixedTaskListen(gateway, principal.name, body) : undefined;
      if (mixed && 'refused' in mixed) return serveWeb(async () => mixed.refused, req, res);
      await serveWeb(async (request) => {
        const response = await handler.fetch(request, { parsedBody: body, authInfo });
        return mixed ? withTaskStatus(response, gateway, principal.name, mixed.id, mixed.honoured) : response;
      }, req, res);
    },
    async close() {
      gateway.off('listChanged', onList);
      gateway.off('resourceUpdated', onUpdated);
      await handler.close();
    },
  };
}
