/**
 * Streamable HTTP at `/mcp` (spec 2025-03-26 and later): one SDK
 * `WebStandardStreamableHTTPServerTransport` (served by {@link serveWebTransport}) and one
 * {@link DownstreamSession} per session.
 *
 * - `POST` without `Mcp-Session-Id` must be `initialize`: it opens a session (its id is the
 *   session id everywhere: records, the admin API). Anything else without the header → 400.
 * - An id that is unknown, expired, ended or owned by another principal → 404, so the client
 *   re-initializes (case F11).
 * - `DELETE` ends the session and frees everything it held (subscriptions, listeners, streams).
 * - A second `GET` stream on one session is answered 409 by the SDK; nothing else is touched.
 * - Streams are resumable with `Last-Event-ID` (a {@link BoundedEventStore} per session) and
 *   carry a keep-alive comment every `http.keepAliveMs`.
 */
import type { Express, Request, Response } from 'express';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { newSessionId } from '../../shared/ids.js';
import { messageOf } from '../../shared/errors.js';
import { DownstreamSession } from '../session.js';
import { jsonBody, type HttpContext } from './context.js';
import { BoundedEventStore } from './event-store.js';
import { jsonRpcError, principalOf } from './guards.js';
import { sessionTag } from './session-table.js';
import { serveWebTransport } from './web-adapter.js';

/** The path of the Streamable HTTP endpoint. */
export const MCP_PATH = '/mcp';

export function mountStreamableHttp(app: Express, ctx: HttpContext): void {
  const handle = async (req: Request, res: Response) => {
    const principal = principalOf(res);
    let body: unknown;
    if (req.method === 'POST') {
      try {
        body = jsonBody(req);
      } catch {
        res.status(400).json(jsonRpcError(-32700, 'Parse error: Invalid JSON'));
        return;
      }
    }
    const sessionId = req.header('mcp-session-id');
    if (!sessionId) {
      if (req.method === 'POST' && containsInitialize(body)) return openSession(ctx, req, res, body);
      res.status(400).json(jsonRpcError(-32000, 'Bad Request: Mcp-Session-Id header is required'));
      return;
    }
    const entry = ctx.sessions.get(sessionId, principal);
    const transport = entry && transports.get(entry.session);
    if (!entry || entry.kind !== 'streamable' || !transport) {
      res.status(404).json(jsonRpcError(-32001, 'Session not found'));
      return;
    }
    const done = ctx.sessions.begin(entry);
    res.once('close', done);
    await serveWebTransport(transport, req, res, body);
  };
  app.post(MCP_PATH, handle);
  app.get(MCP_PATH, handle);
  app.delete(MCP_PATH, handle);
  app.all(MCP_PATH, (_req, res) => {
    res.status(405).set('Allow', 'GET, POST, DELETE').json(jsonRpcError(-32000, 'Method not allowed.'));
  });
}

/** Transport of each Streamable HTTP session. */
const transports = new WeakMap<DownstreamSession, WebStandardStreamableHTTPServerTransport>();

async function openSession(ctx: HttpContext, req: Request, res: Response, body: unknown): Promise<void> {
  const principal = principalOf(res);
  const id = newSessionId();
  const { settings } = ctx;
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => id,
    eventStore: settings.resumeEvents > 0 ? new BoundedEventStore(settings.resumeEvents) : undefined,
    keepAliveMs: settings.keepAliveMs,
    maxRequestBodySize: settings.maxBodyBytes,
    onsessionclosed: () => void ctx.sessions.end(id, 'deleted'),
  });
  transport.onerror = (err) => ctx.logger.debug({ session: sessionTag(id), err: messageOf(err) }, 'streamable http transport error');
  const session = new DownstreamSession(ctx.gateway, { principal: principal.name, sessionId: id, experimental: ctx.experimental });
  transports.set(session, transport);
  await session.connect(transport);
  const previous = session.server.onclose;
  session.server.onclose = () => {
    previous?.();
    void ctx.sessions.end(id, 'closed');
  };
  const entry = ctx.sessions.add({ id, kind: 'streamable', principal, session });
  const done = ctx.sessions.begin(entry);
  res.once('close', done);
  await serveWebTransport(transport, req, res, body);
  // An initialize the transport refused (bad version, batch) leaves a session nobody can use.
  if (transport.sessionId === undefined) await ctx.sessions.end(id, 'closed');
}

function containsInitialize(body: unknown): boolean {
  return Array.isArray(body) ? body.some((m) => isInitializeRequest(m)) : isInitializeRequest(body);
}
