/**
 * `POST /v1/sessions/:id/mcp/reconnect {server}`: re-dial ONE named upstream on behalf of a
 * session (seed 004_359de2f3ce5e2188.txt), over the admin API. It is the `broker__reconnect`
 * call itself: the route runs that tool through the broker (`Broker.call`: judge with run mode,
 * principal rules and the shared-upstream rule, budget, deadline, record, publish), so an
 * attempt that reaches the broker is judged and recorded exactly like the tool, once.
 *
 * Answers, in the order they are checked (the first four before the broker, and not recorded:
 * they are not calls):
 *  - 404 `{error: {code: "session_not_found"}}` for a session that does not exist AND for one
 *    owned by another principal (same status, same body: no oracle). An `operator` may act on
 *    any principal's session.
 *  - 409 `{error: {code: "not_running"}}` when the session exists but is not running (ended,
 *    or not initialized yet).
 *  - 400 for a body without a `server` string.
 *  - 429 (with `Retry-After`, in seconds) past `http.reconnectsPerMinute` for the principal.
 *  - The call did not end with a re-dial answer: the broker's outcome and its status (DESIGN.md
 *    "Contract") with `{sessionId, server, callId, outcome, reason}`. A refusal (`denied` 403
 *    for a principal without the operator role or an explicit allow, or in run mode `locked`;
 *    `approval_required` 403; `budget_exhausted` 429; …) re-dialled nothing; after `cancelled`
 *    or `timeout` the re-dial may still complete. An `ok` whose answer does not match
 *    `ReconnectAnswerSchema` is answered 500 `guard_error` (fail closed).
 *  - 200 `{sessionId, server, callId, outcome: "accepted" | "refused" | "unsupported", status:
 *    {state, errorCode?, httpStatus?}, reason?, toolNames?}` when the re-dial ran, for all three
 *    outcomes: `outcome` is the only discriminant, never the HTTP status; act on `status`, never
 *    parse `reason`.
 *
 * The call's principal is the caller; its `sessionId` the session in the path; its unit that
 * session when the caller owns it, else (an operator acting on another's session) `api:<principal>`.
 *
 * `POST /v1/mcp/reconnect {server, unit?}` is the same for a modern (2026-07-28) caller, which has
 * no session: no 404/409 checks, `sessionId` null in the record and the answer, the unit
 * `modern:<principal>/<unit>` when `unit` is given (as `_meta["mcp-broker/unit"]` in its requests,
 * `transports/unit.ts`; a malformed one is 400), else `modern:<principal>`.
 * No elicitation: a policy `ask` is `approval_required`. A client that disconnects cancels the call.
 */
import type { Express, Request, Response } from 'express';
import { RECONNECT_TOOL, ReconnectAnswerSchema } from '../../builtins/reconnect.js';
import type { CallerSession } from '../../broker/types.js';
import { jsonBody, type HttpContext } from './context.js';
import { principalOf } from './guards.js';
import { cut } from '../../shared/cut.js';
import { messageOf } from '../../shared/errors.js';
import { modernUnit, UNIT_META_KEY } from '../unit.js';
import { SlidingWindowLimit } from './rate-limit.js';
import { sessionTag } from './session-table.js';

export const RECONNECT_PATH = '/v1/sessions/:id/mcp/reconnect';
/** The same for a modern (sessionless) caller. */
export const MODERN_RECONNECT_PATH = '/v1/mcp/reconnect';

/**
 * Most characters of the `server` a caller named that the route's log line shows, counted after
 * scrubbing (`…` marking a cut): the value is the caller's, any string up to `http.maxBodyBytes`.
 */
export const SHOWN_SERVER_MAX_CHARS = 200;

/** The one body for an unknown session and for another principal's session. */
const NOT_FOUND = { error: { code: 'session_not_found', message: 'no such session' } } as const;

export function mountReconnectRoute(app: Express, ctx: HttpContext): void {
  const { gateway } = ctx;
  const limit = new SlidingWindowLimit(gateway.clock, ctx.settings.reconnectsPerMinute, 60_000);
  app.post(RECONNECT_PATH, async (req: Request, res: Response) => {
    const principal = principalOf(res);
    const sessionId = String(req.params.id);
    const found = ctx.sessions.find(sessionId, principal);
    if (found.state === 'unknown') return void res.status(404).json(NOT_FOUND);
    const running = found.state === 'live' && !found.entry.session.isClosed && found.entry.session.server.getClientVersion() !== undefined;
    if (!running) {
      return void res.status(409).json({ error: { code: 'not_running', message: 'the session is not running (ended, or not initialized yet)' } });
    }
    const unit = found.entry.principal.name === principal.name ? sessionId : `api:${principal.name}`;
    await redial(req, res, principal, sessionId, () => unit);
  });

  // A modern (2026-07-28) caller has no session: the unit its body names (`unit`, as its requests'
  // `_meta["mcp-broker/unit"]`), else its principal's own; the record's `sessionId` is null.
  app.post(MODERN_RECONNECT_PATH, async (req: Request, res: Response) => {
    const principal = principalOf(res);
    await redial(req, res, principal, null, (body) => modernUnit(principal.name, { [UNIT_META_KEY]: (body as { unit?: unknown } | undefined)?.unit }));
  });

  /** The shared part of both routes: the body, the rate limit, then the `broker__reconnect` call. */
  async function redial(req: Request, res: Response, principal: ReturnType<typeof principalOf>, sessionId: string | null, unitOf: (body: unknown) => string): Promise<void> {
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
    let unit: string;
    try {
      unit = unitOf(body);
    } catch (err) {
      return void res.status(400).json({ error: { code: 'bad_request', message: messageOf(err) } });
    }
    const waitMs = limit.take(principal.name);
    if (waitMs > 0) {
      return void res
        .status(429)
        .set('Retry-After', String(Math.ceil(waitMs / 1000)))
        .json({ error: { code: 'rate_limited', message: `at most ${ctx.settings.reconnectsPerMinute} reconnects per minute` } });
    }

    if (!gateway.readySettled) await gateway.ready;
    const aborter = new AbortController();
    let answered = false;
    res.once('close', () => {
      if (!answered) aborter.abort(new Error('the HTTP client disconnected'));
    });
    const caller: CallerSession = {
      sessionId,
      principal: principal.name,
      unit,
      // A unit that is not the session's own (a modern caller's, or `api:<principal>` for an
      // operator on another's session) has no session to end it: its budget is per window.
      sessionless: unit !== sessionId,
      ...(sessionId === null && { era: 'modern' as const }),
      isLive: () => !aborter.signal.aborted,
    };
    const answer = await gateway.broker.call(
      { name: RECONNECT_TOOL, args: { server }, signal: aborter.signal },
      caller,
      gateway.router.resolve(RECONNECT_TOOL),
    );
    answered = true;
    const redial = answer.outcome === 'ok' ? ReconnectAnswerSchema.safeParse(answer.result.structuredContent) : undefined;
    // Scrubbed whole before the cut: the logger's own scrub comes after it, where a secret across the cut goes unrecognised.
    const shownServer = cut(gateway.scrubber.text(server), SHOWN_SERVER_MAX_CHARS);
    ctx.logger.info(
      { session: sessionId === null ? null : sessionTag(sessionId), principal: principal.name, server: shownServer, callId: answer.callId, outcome: redial?.success ? redial.data.outcome : answer.outcome },
      'reconnect via admin api',
    );
    if (res.writableEnded || res.destroyed) return;
    if (redial?.success) return void res.status(200).json({ sessionId, callId: answer.callId, ...redial.data });
    // The re-dial did not run (or its answer is not one): the broker's outcome and status.
    const outcome = redial ? 'guard_error' : answer.outcome;
    const reason = redial ? 'the reconnect answer did not match its schema' : answer.reason;
    res.status(redial ? 500 : answer.status).json({ sessionId, server, callId: answer.callId, outcome, ...(reason !== undefined ? { reason } : {}) });
  }
}
