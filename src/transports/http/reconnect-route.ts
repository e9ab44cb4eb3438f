/**
 * `POST /v1/sessions/:id/mcp/reconnect {server}`: re-dial ONE named upstream on behalf of a
 * session (seed 004_359de2f3ce5e2188.txt), the same transaction as the `broker__reconnect` tool
 * (`reconnectServer` in src/builtins/reconnect.ts), over the admin API.
 *
 * Answers, in the order they are checked:
 *  - 404 `{error: {code: "session_not_found"}}` for a session that does not exist AND for one
 *    owned by another principal (same status, same body: no oracle). An `operator` may act on
 *    any principal's session.
 *  - 409 `{error: {code: "not_running"}}` when the session exists but is not running (ended,
 *    or not initialized yet).
 *  - 400 for a body without a `server` string.
 *  - 429 (with `Retry-After`, in seconds) past `http.reconnectsPerMinute` for the principal.
 *  - 200 `{sessionId, server, outcome: "accepted" | "refused" | "unsupported", status: {state,
 *    errorCode?, httpStatus?}, reason?, toolNames?}` for all three outcomes: `outcome` is the
 *    only discriminant, never the HTTP status; act on `status`, never parse `reason`.
 */
import type { Express, Request, Response } from 'express';
import { reconnectServer } from '../../builtins/reconnect.js';
import { jsonBody, type HttpContext } from './context.js';
import { principalOf } from './guards.js';
import { SlidingWindowLimit } from './rate-limit.js';
import { sessionTag } from './session-table.js';

export const RECONNECT_PATH = '/v1/sessions/:id/mcp/reconnect';

/** The one body for an unknown session and for another principal's session. */
const NOT_FOUND = { error: { code: 'session_not_found', message: 'no such session' } } as const;

export function mountReconnectRoute(app: Express, ctx: HttpContext): void {
  const limit = new SlidingWindowLimit(ctx.gateway.clock, ctx.settings.reconnectsPerMinute, 60_000);
  app.post(RECONNECT_PATH, async (req: Request, res: Response) => {
    const principal = principalOf(res);
    const sessionId = String(req.params.id);
    const found = ctx.sessions.find(sessionId, principal);
    if (found.state === 'unknown') return void res.status(404).json(NOT_FOUND);
    const running = found.state === 'live' && !found.entry.session.isClosed && found.entry.session.server.getClientVersion() !== undefined;
    if (!running) {
      return void res.status(409).json({ error: { code: 'not_running', message: 'the session is not running (ended, or not initialized yet)' } });
    }
    let body: unknown;
    try {
      body = jsonBody(req);
    } catch {
      return void res.status(400).json({ error: { code: 'bad_request', message: 'the body is not JSON' } });
    }
    const server = (body as { server?: unknown } | undefined)?.server;
    if (typeof server !== 'string' || server === '') {
      return void res.status(400).json({ error: { code: 'bad_request', message: 'the body must be {"server": "<servers.json key>"}' } });
    }
    const waitMs = limit.take(principal.name);
    if (waitMs > 0) {
      return void res
        .status(429)
        .set('Retry-After', String(Math.ceil(waitMs / 1000)))
        .json({ error: { code: 'rate_limited', message: `at most ${ctx.settings.reconnectsPerMinute} reconnects per minute` } });
    }
    const answer = await reconnectServer({ registry: ctx.gateway.registry, scrubber: ctx.gateway.scrubber }, server);
    ctx.logger.info({ session: sessionTag(sessionId), principal: principal.name, server, outcome: answer.outcome, state: answer.status.state }, 'reconnect via admin api');
    res.status(200).json({ sessionId, ...answer });
  });
}
