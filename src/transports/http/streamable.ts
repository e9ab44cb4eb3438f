/**
 * Streamable HTTP at `/mcp`, both eras, decided per request (`../era.ts`): a `POST` carrying the
 * 2026-07-28 `_meta` envelope claim (and no `Mcp-Session-Id`) is served statelessly by the modern
 * handler (`modern.ts`); a modern client's `GET` or `DELETE` (no session, an
 * `MCP-Protocol-Version` header naming 2026-07-28 or later) is answered 405. Everything else is
 * the legacy face (spec 2025-03-26 to 2025-11-25), as below: one SDK
 * `WebStandardStreamableHTTPServerTransport` (served by {@link serveWebTransport}) and one
 * {@link DownstreamSession} per session.
 *
 * - `POST` without `Mcp-Session-Id` must be `initialize`: it opens a session (its id is the
 *   session id everywhere: records, the admin API). Anything else without the header → 400.
 * - An id that is unknown, expired, ended or owned by another principal → 404, so the client
 *   re-initializes (case F11).
 * - `DELETE` ends the session and frees everything it held (subscriptions, listeners, streams).
 * - A second `GET` stream on one session is answered 409 by the SDK; nothing else is touched.
 * - An `initialize` past `http.maxSessionsPerPrincipal` or `http.maxSessions` ends the oldest
 *   idle session to make room, or gets 429 / 503 (`SessionTable.admit`); a `GET` stream past
 *   `http.maxStreamsPerPrincipal` or `http.maxStreams` gets 429 / 503 (`StreamCaps`).
 * - Streams are resumable with `Last-Event-ID` (a {@link BoundedEventStore} per session; an event
 *   stored before a reload added a secret is replayed scrubbed again) and carry a keep-alive
 *   comment every `http.keepAliveMs`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { WebStandardStreamableHTTPServerTransport, isInitializeRequest } from '@modelcontextprotocol/server';
import { CALL_TIMING, markCall } from '../../shared/call-timing.js';
import { newSessionId } from '../../shared/ids.js';
import { messageOf } from '../../shared/errors.js';
import { isModernPost, isModernSessionOperation } from '../era.js';
import { malformedBodyErrors, withWellFormedResponses } from '../request-shape.js';
import { requestIdInFlight } from '../request-ids.js';
import { DownstreamSession } from '../session.js';
import type { Principal } from './auth.js';
import { answerRequestError, hasBody, readBody } from './body.js';
import { answerOverCap } from './caps.js';
import { whenClosed, type HttpContext } from './context.js';
import { BoundedEventStore, DEFAULT_RESUME_BYTES } from './event-store.js';
import { authenticateRequest, jsonRpcError, refuseHostOrigin, sendJson } from './guards.js';
import { sessionTag } from './session-table.js';
import type { ModernHttp } from './modern.js';
import { serveLegacyCall } from './legacy-call-lane.js';
import { writeResultsAsArrived } from './raw-sse.js';
import { serveWebTransport } from './web-adapter.js';

/** The path of the Streamable HTTP endpoint. */
export const MCP_PATH = '/mcp';

/** Whether a request path ({@link pathOf}) is {@link MCP_PATH}: any case, one trailing slash allowed (as express routes match). */
export function isMcpPath(path: string): boolean {
  return /^\/mcp\/?$/i.test(path);
}

/**
 * The handler of {@link MCP_PATH}: guards, the body read within `http.maxBodyBytes`, then
 * `POST`, `GET` or `DELETE` (any other method, `HEAD` too → 405 with `Allow`). A `POST` body
 * that is not JSON → 400 `-32700`. Never rejects: a failure is answered by
 * {@link answerRequestError}.
 */
export function streamableHttpHandler(ctx: HttpContext, modern: ModernHttp): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const origins = { allowedHosts: ctx.settings.allowedHosts, allowedOrigins: ctx.settings.allowedOrigins };
  const scrub = (text: string) => ctx.gateway.scrubber.text(text);
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (CALL_TIMING) {
      markCall('request in');
      res.once('finish', () => markCall('response end', 'end'));
    }
    if (refuseHostOrigin(req, res, origins, ctx.logger, scrub)) return;
    const principal = authenticateRequest(req, res, ctx.auth, ctx.logger, scrub);
    if (!principal) return;
    const method = req.method;
    // Every body is read within the limit, as on the express routes (413 on every route); only
    // a POST's is used.
    const bytes = method === 'POST' || hasBody(req) ? await readBody(req, ctx.settings.maxBodyBytes) : undefined;
    if (CALL_TIMING) markCall('body read');
    if (method !== 'POST' && method !== 'GET' && method !== 'DELETE') {
      sendJson(res, 405, jsonRpcError(-32000, 'Method not allowed.'), { allow: 'GET, POST, DELETE' });
      return;
    }
    let body: unknown;
    if (method === 'POST' && bytes) {
      try {
        body = bytes.length === 0 ? undefined : JSON.parse(bytes.toString('utf8'));
      } catch {
        sendJson(res, 400, jsonRpcError(-32700, 'Parse error: Invalid JSON'));
        return;
      }
      if (CALL_TIMING) markCall('parse', 'begin');
      // A malformed request is answered with its id (request-shape.ts), not the SDK's id-less -32700.
      const malformed = malformedBodyErrors(body);
      if (malformed) return sendJson(res, 400, malformed);
      body = withWellFormedResponses(body);
      if (await isModernPost(req.headers, body)) return modern.serve(principal, req, res, body);
    } else if (isModernSessionOperation(req.headers)) {
      // 2026-07-28 has no standalone stream and no session to end.
      sendJson(res, 405, jsonRpcError(-32000, 'Method not allowed.'), { allow: 'POST' });
      return;
    }
    const sessionId = req.headers['mcp-session-id'];
    if (typeof sessionId !== 'string' || sessionId === '') {
      if (method === 'POST' && containsInitialize(body)) return openSession(ctx, principal, req, res, body);
      sendJson(res, 400, jsonRpcError(-32000, 'Bad Request: Mcp-Session-Id header is required'));
      return;
    }
    const entry = ctx.sessions.get(sessionId, principal);
    const transport = entry && transports.get(entry.session);
    if (!entry || entry.kind !== 'streamable' || !transport) {
      sendJson(res, 404, jsonRpcError(-32001, 'Session not found'));
      return;
    }
    if (method === 'GET') {
      const stream = ctx.streams.acquire(principal, 'legacy', () => res.destroy());
      if (!stream.ok) return answerOverCap(res, stream.refusal, principal, ctx.logger);
      whenClosed(res, stream.release);
    }
    if (method === 'POST') {
      const duplicate = duplicateRequestId(transport, body);
      if (duplicate !== undefined) {
        // Refused here, never dispatched: the transport would have mapped the id to this POST.
        sendJson(res, Array.isArray(body) ? 400 : 200, jsonRpcError(-32600, `Invalid Request: request id ${JSON.stringify(duplicate)} is already in flight on this session`, Array.isArray(body) ? null : duplicate));
        return;
      }
    }
    const done = ctx.sessions.begin(entry);
    whenClosed(res, done);
    // A plain tools/call: answered on its stream without the web-standard adaptation (legacy-call-lane.ts).
    await ((method === 'POST' ? serveLegacyCall(transport, req, res, body) : undefined) ?? serveWebTransport(transport, req, res, body));
  };
  return async (req, res) => {
    try {
      await handle(req, res);
    } catch (err) {
      answerRequestError(err, req, res, ctx);
    }
  };
}

/** Transport of each Streamable HTTP session. */
const transports = new WeakMap<DownstreamSession, WebStandardStreamableHTTPServerTransport>();

async function openSession(ctx: HttpContext, principal: Principal, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
  const refusal = ctx.sessions.admit(principal);
  if (refusal) return answerOverCap(res, refusal, principal, ctx.logger);
  const id = newSessionId();
  const { settings } = ctx;
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => id,
    eventStore: settings.resumeEvents > 0 ? new BoundedEventStore(settings.resumeEvents, DEFAULT_RESUME_BYTES, ctx.gateway.scrubber) : undefined,
    keepAliveMs: settings.keepAliveMs,
    maxRequestBodySize: settings.maxBodyBytes,
    onsessionclosed: () => void ctx.sessions.end(id, 'deleted'),
  });
  transport.onerror = (err) => ctx.logger.debug({ session: sessionTag(id), err: messageOf(err) }, 'streamable http transport error');
  writeResultsAsArrived(transport);
  const session = new DownstreamSession(ctx.gateway, { principal: principal.name, sessionId: id, experimental: ctx.experimental });
  transports.set(session, transport);
  // Taken at once (nothing awaited since admit), so concurrent initializes cannot pass a cap.
  const entry = ctx.sessions.add({ id, kind: 'streamable', principal, session });
  const done = ctx.sessions.begin(entry);
  whenClosed(res, done);
  try {
    await session.connect(transport);
  } catch (err) {
    await ctx.sessions.end(id, 'closed');
    throw err;
  }
  const previous = session.server.onclose;
  session.server.onclose = () => {
    previous?.();
    void ctx.sessions.end(id, 'closed');
  };
  await serveWebTransport(transport, req, res, body);
  // An initialize the transport refused (bad version, batch) leaves a session nobody can use.
  if (transport.sessionId === undefined) await ctx.sessions.end(id, 'closed');
}

function containsInitialize(body: unknown): boolean {
  return Array.isArray(body) ? body.some((m) => isInitializeRequest(m)) : isInitializeRequest(body);
}

/**
 * The id of a request in `body` (one message or a batch) that is in flight on the session
 * already, or repeated within the batch; undefined when there is none.
 */
function duplicateRequestId(transport: WebStandardStreamableHTTPServerTransport, body: unknown): string | number | undefined {
  const seen = new Set<unknown>();
  for (const m of Array.isArray(body) ? body : [body]) {
    const message = m as { id?: unknown; method?: unknown } | null;
    if (typeof message !== 'object' || message === null || typeof message.method !== 'string') continue;
    const id = message.id;
    if (typeof id !== 'string' && typeof id !== 'number') continue;
    if (seen.has(id) || requestIdInFlight(transport, id)) return id;
    seen.add(id);
  }
  return undefined;
}
