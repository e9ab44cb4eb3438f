/**
 * The JSON admin API and health probes of the HTTP face (same bearer auth as `/mcp`; the
 * probes need none):
 *
 *  - `POST /api/v1/mcp/call {subject, args?}`: runs one call through the whole broker path for a
 *    caller without an MCP session (a worker). `subject` is an advertised tool name or
 *    `server/tool`. The caller is the principal, its unit `api:<principal>` (its budget, renewed
 *    every `broker.budgetWindowMs`), with no
 *    elicitation (an `ask` is `approval_required`). Answered with the outcome's HTTP status
 *    (`OUTCOME_STATUS`, DESIGN.md "Contract") and `{callId, outcome, result?, reason?}`;
 *    `result` only for `ok` and `tool_error`. A client that disconnects cancels the call.
 *  - `GET /api/v1/calls?outcome=&tool=&since=&limit=`: records from the records file
 *    (`{calls: [...]}`, oldest first); a `user` sees only its own principal's records.
 *  - `GET /api/v1/events`: a server-sent event stream, one `event: record` per published
 *    record (same visibility rule), keep-alive comments every `http.keepAliveMs`; counted
 *    against the stream caps (`http.maxStreamsPerPrincipal` 429, `http.maxStreams` 503).
 *    Both answer each record as shown (broker/record.ts `shownRecord`): a secret a reload added
 *    after a record was written is neither shown nor told by what a `tool=` pattern matches.
 *  - `GET /healthz` → 200 `{status: "ok"}` while the process serves.
 *  - `GET /readyz` → 200 `{ready: true}` when every upstream marked `required` is `ready`,
 *    else 503 `{ready: false, waiting: <count>}`.
 *  - `POST /v1/sessions/:id/mcp/reconnect`: see reconnect-route.ts.
 *  - `GET /api/v1/tasks`, `GET /api/v1/tasks/:id`, `POST /api/v1/approvals/:id`: see tasks-api.ts.
 */
import type { Express, Request, Response } from 'express';
import { carriesResult } from '../../broker/outcomes.js';
import type { CallerSession, CallRecord, ToolTarget } from '../../broker/types.js';
import { newSessionId } from '../../shared/ids.js';
import type { Gateway } from '../../gateway.js';
import { parseCallsQuery, queryCalls, matchesCallsQuery } from './calls-query.js';
import { answerOverCap } from './caps.js';
import { jsonBody, keepStreamAlive, whenClosed, type HttpContext } from './context.js';
import { principalOf } from './guards.js';
import { mountReconnectRoute } from './reconnect-route.js';
import { mountTasksApi } from './tasks-api.js';

export const API_PREFIX = '/api/v1';

export function mountAdminApi(app: Express, ctx: HttpContext): void {
  const { gateway } = ctx;

  app.get('/healthz', (_req, res) => void res.json({ status: 'ok' }));

  app.get('/readyz', (_req, res) => {
    const waiting = requiredNotReady(gateway);
    if (waiting === 0) return void res.json({ ready: true });
    res.status(503).json({ ready: false, waiting });
  });

  app.post(`${API_PREFIX}/mcp/call`, async (req: Request, res: Response) => {
    const principal = principalOf(res);
    let body: { subject?: unknown; args?: unknown } | undefined;
    try {
      body = jsonBody(req) as typeof body;
    } catch {
      return void res.status(400).json({ error: { code: 'bad_request', message: 'the body is not JSON' } });
    }
    const subject = body?.subject;
    const args = body?.args ?? {};
    if (typeof subject !== 'string' || subject === '' || typeof args !== 'object' || args === null || Array.isArray(args)) {
      return void res.status(400).json({ error: { code: 'bad_request', message: 'the body must be {"subject": "<tool or server/tool>", "args": {…}}' } });
    }
    if (subject.length > MAX_SUBJECT_CHARS) {
      return void res.status(400).json({ error: { code: 'bad_request', message: `subject is ${subject.length} characters; no tool name is longer than ${MAX_SUBJECT_CHARS}` } });
    }
    await gateway.ready;
    const target = resolveSubject(gateway, subject);
    const aborter = new AbortController();
    let answered = false;
    res.once('close', () => {
      if (!answered) aborter.abort(new Error('the HTTP client disconnected'));
    });
    const caller: CallerSession = {
      sessionId: newSessionId(),
      principal: principal.name,
      unit: `api:${principal.name}`,
      sessionless: true,
      isLive: () => !aborter.signal.aborted,
    };
    const answer = await gateway.broker.call(
      { name: target?.name ?? subject, args: args as Record<string, unknown>, signal: aborter.signal },
      caller,
      target,
    );
    answered = true;
    const out: Record<string, unknown> = { callId: answer.callId, outcome: answer.outcome };
    if (carriesResult(answer.outcome)) out.result = answer.result;
    if (answer.reason !== undefined && answer.outcome !== 'ok') out.reason = answer.reason;
    if (!res.writableEnded && !res.destroyed) res.status(answer.status).json(out);
  });

  app.get(`${API_PREFIX}/calls`, async (req: Request, res: Response) => {
    const principal = principalOf(res);
    const query = parseCallsQuery(req.query as Record<string, unknown>);
    if ('error' in query) return void res.status(400).json({ error: { code: 'bad_request', message: query.error } });
    if (principal.role !== 'operator') query.principal = principal.name;
    const { path, maxFiles } = gateway.config.broker.records;
    res.json({ calls: await queryCalls(path, maxFiles, query, gateway.scrubber) });
  });

  app.get(`${API_PREFIX}/events`, (req: Request, res: Response) => {
    const principal = principalOf(res);
    const query = parseCallsQuery(req.query as Record<string, unknown>);
    if ('error' in query) return void res.status(400).json({ error: { code: 'bad_request', message: query.error } });
    if (principal.role !== 'operator') query.principal = principal.name;
    const stream = ctx.streams.acquire(principal, 'legacy', () => res.destroy());
    if (!stream.ok) return answerOverCap(res, stream.refusal, principal, ctx.logger);
    whenClosed(res, stream.release);
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache, no-transform', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' });
    res.write(': subscribed\n\n');
    const unsubscribe = gateway.publisher.subscribe((record: CallRecord) => {
      // Published as shown (broker/record.ts): scrubbed again there if a reload added a secret while it was written.
      if (!matchesCallsQuery(record, query) || res.writableEnded || res.destroyed) return;
      res.write(`event: record\nid: ${record.callId}\ndata: ${JSON.stringify(record)}\n\n`);
      // A reader that does not read would hold every record published in our memory: closed
      // instead (it can reconnect and catch up with GET /api/v1/calls?since=).
      if (res.writableLength > EVENTS_MAX_PENDING_BYTES) {
        ctx.logger.warn({ principal: principal.name, pendingBytes: res.writableLength }, 'events stream closed: its reader fell behind');
        res.destroy();
      }
    });
    keepStreamAlive(res, ctx.settings.keepAliveMs);
    whenClosed(res, unsubscribe);
  });

  mountReconnectRoute(app, ctx);
  mountTasksApi(app, ctx, API_PREFIX);
}

/** How many upstreams marked `required` (and not disabled) are not `ready`. */
export function requiredNotReady(gateway: Gateway): number {
  let waiting = 0;
  for (const [name, server] of Object.entries(gateway.config.mcpServers)) {
    if (!server.required || server.disabled) continue;
    if (gateway.registry.upstream(name)?.status.state !== 'ready') waiting++;
  }
  return waiting;
}

/** Bytes of an events stream written and not yet taken by its reader past which the stream is closed (8 MiB). */
export const EVENTS_MAX_PENDING_BYTES = 8 * 1024 * 1024;

/** Longest `subject` `POST /api/v1/mcp/call` takes, in characters (an advertised name, or a server key, `/` and a tool's own name). */
export const MAX_SUBJECT_CHARS = 512;

/** An advertised tool name, or `server/tool` (the record's `subject`), as a call target. */
export function resolveSubject(gateway: Gateway, subject: string): ToolTarget | undefined {
  const byName = gateway.router.resolve(subject);
  if (byName) return byName;
  const slash = subject.indexOf('/');
  if (slash <= 0) return undefined;
  const server = subject.slice(0, slash);
  const toolName = subject.slice(slash + 1);
  for (const tool of gateway.router.list()) {
    const target = gateway.router.resolve(tool.name);
    if (target && target.server === server && target.toolName === toolName) return target;
  }
  return undefined;
}
