/**
 * Legacy SSE (spec 2024-11-05): `GET /sse` opens a stream and a session (its own SDK `Server`
 * through {@link DownstreamSession}); the stream's first event names
 * `POST /messages?sessionId=<id>`, where the client sends its messages. Any number of
 * connections at once, up to the stream caps (`http.maxStreamsPerPrincipal`, `http.maxStreams`:
 * 429 / 503) and the session caps (`http.maxSessionsPerPrincipal`, `http.maxSessions`: an idle
 * Streamable HTTP session is ended to make room, else 429 / 503; an SSE session always has its
 * stream open, so it is never idle); a reconnect is a new `GET /sse` and a new session. The
 * session ends when its stream closes.
 *
 * A POST with no `sessionId` → 400; an unknown, ended or foreign one → 404; a body that is not
 * JSON or not a JSON-RPC message → 400 with a JSON-RPC error; too large → 413. None of these
 * touches any session, and the process keeps serving. Open streams carry a keep-alive comment
 * every `http.keepAliveMs`.
 *
 * The transport is `SSEServerTransport` from `@modelcontextprotocol/server-legacy` (2.3.1), the
 * frozen copy of SDK v1's: the v2 server package has no HTTP+SSE server transport (the
 * transport is deprecated since spec 2025-03-26), and older IDEs still connect over it. It
 * implements the same `Transport` contract, so its sessions are `DownstreamSession`s like any
 * other; it brings its own `@modelcontextprotocol/core` 2.3.1 (exact pin) for its message types.
 * That package (with its own zod and core: ~190 ms of a start on a 2-core VM) loads at the first
 * `GET /sse` ({@link loadLegacySse}), not with the HTTP face (issue 19: cold start).
 */
import type { Express, NextFunction, Request, Response } from 'express';
import { JSONRPCMessageSchema } from '@modelcontextprotocol/core';
import type { SSEServerTransport } from '@modelcontextprotocol/server-legacy/sse';
import { messageOf } from '../../shared/errors.js';
import { malformedBodyErrors, withWellFormedResponses } from '../request-shape.js';
import { DownstreamSession } from '../session.js';
import { answerOverCap } from './caps.js';
import { jsonBody, keepStreamAlive, whenClosed, type HttpContext } from './context.js';
import { jsonRpcError, principalOf } from './guards.js';
import { sessionTag } from './session-table.js';

export const SSE_PATH = '/sse';
export const MESSAGES_PATH = '/messages';

/** Transport of each SSE session. */
const transports = new WeakMap<DownstreamSession, SSEServerTransport>();

/** The legacy SDK's SSE transport, once {@link loadLegacySse} has loaded it. */
let SseTransport: typeof SSEServerTransport | undefined;
let loading: Promise<void> | undefined;

/**
 * Express middleware for `GET /sse`, mounted before the auth guard: loads the legacy SDK's SSE
 * transport at the first such request, so that the route awaits nothing between a request's
 * authentication and its session's admission (a reload that revokes the principal meanwhile
 * could not end a session not yet admitted). A failed load goes to the error handler (500), and
 * the next `GET /sse` tries again.
 */
export function loadLegacySse(_req: Request, _res: Response, next: NextFunction): void {
  if (SseTransport) return next();
  loading ??= import('@modelcontextprotocol/server-legacy/sse').then(
    (loaded) => {
      SseTransport = loaded.SSEServerTransport;
    },
    (err: unknown) => {
      loading = undefined;
      throw err;
    },
  );
  loading.then(() => next(), next);
}

export function mountLegacySse(app: Express, ctx: HttpContext): void {
  app.get(SSE_PATH, async (req: Request, res: Response) => {
    const principal = principalOf(res);
    if (!SseTransport) throw new Error('legacy SSE transport not loaded (loadLegacySse runs before this route)');
    if (res.destroyed) return;
    // The stream caps first: a refused stream must not end an idle session for nothing.
    const stream = ctx.streams.acquire(principal, 'legacy', () => res.destroy());
    if (!stream.ok) return answerOverCap(res, stream.refusal, principal, ctx.logger);
    const refusal = ctx.sessions.admit(principal);
    if (refusal) {
      stream.release();
      return answerOverCap(res, refusal, principal, ctx.logger);
    }
    const transport = new SseTransport(MESSAGES_PATH, res);
    const id = transport.sessionId;
    const session = new DownstreamSession(ctx.gateway, { principal: principal.name, sessionId: id, experimental: ctx.experimental });
    transports.set(session, transport);
    transport.onerror = (err) => ctx.logger.debug({ session: sessionTag(id), err: messageOf(err) }, 'sse transport error');
    // Taken at once (nothing awaited since admit), so concurrent streams cannot pass a cap.
    const entry = ctx.sessions.add({ id, kind: 'sse', principal, session });
    const done = ctx.sessions.begin(entry);
    whenClosed(res, () => {
      stream.release();
      done();
      void ctx.sessions.end(id, 'disconnected');
    });
    await session.connect(transport);
    const previous = session.server.onclose;
    session.server.onclose = () => {
      previous?.();
      void ctx.sessions.end(id, 'disconnected');
    };
    keepStreamAlive(res, ctx.settings.keepAliveMs);
  });

  app.post(MESSAGES_PATH, async (req: Request, res: Response) => {
    const principal = principalOf(res);
    const sessionId = typeof req.query.sessionId === 'string' ? req.query.sessionId : undefined;
    if (!sessionId) {
      res.status(400).json(jsonRpcError(-32000, 'Bad Request: the sessionId query parameter is required'));
      return;
    }
    const entry = ctx.sessions.get(sessionId, principal);
    const transport = entry && transports.get(entry.session);
    if (!entry || entry.kind !== 'sse' || !transport) {
      res.status(404).json(jsonRpcError(-32001, 'Session not found'));
      return;
    }
    // The SDK's transport refuses any other content type with a plain-text 400: answered here, as JSON.
    if (mediaType(req.headers['content-type']) !== 'application/json') {
      res.status(415).json(jsonRpcError(-32600, 'Invalid Request: Content-Type must be application/json'));
      return;
    }
    let body: unknown;
    try {
      body = jsonBody(req);
    } catch {
      res.status(400).json(jsonRpcError(-32700, 'Parse error: Invalid JSON'));
      return;
    }
    // A malformed request is answered with its id (request-shape.ts).
    const malformed = malformedBodyErrors(body);
    if (malformed) {
      res.status(400).json(malformed);
      return;
    }
    body = withWellFormedResponses(body);
    if (!JSONRPCMessageSchema.safeParse(body).success) {
      res.status(400).json(jsonRpcError(-32600, 'Invalid Request: the body is not a JSON-RPC message'));
      return;
    }
    const done = ctx.sessions.begin(entry);
    whenClosed(res, done);
    try {
      await transport.handlePostMessage(req, res, body);
    } catch (err) {
      // The stream went away between lookup and delivery; the transport has answered already.
      ctx.logger.debug({ session: sessionTag(sessionId), err: messageOf(err) }, 'sse message not delivered');
      if (!res.headersSent) res.status(404).json(jsonRpcError(-32001, 'Session not found'));
    }
  });
}

/** The media type of a Content-Type header, lower case, without parameters (what the SDK's SSE transport compares). */
function mediaType(header: string | undefined): string | undefined {
  return header?.split(';', 1)[0]!.trim().toLowerCase();
}
