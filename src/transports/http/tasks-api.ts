/**
 * The tasks and approvals routes of the HTTP admin API (same bearer auth as `/mcp`):
 *
 *  - `GET /api/v1/tasks[?status=running|completed|failed|parked|killed][&cursor=…]` → 200
 *    `{tasks: [...], nextCursor?}`, newest first: the caller's own tasks (an operator's: every
 *    principal's), a page of `TASK_LIST_LIMIT` at a time; `nextCursor` (absent on the last page)
 *    passed back as `cursor` reads the next. 400 `bad_request` for another status, or a cursor no
 *    page gave.
 *  - `GET /api/v1/tasks/:id` → 200 one task, or 404 `not_found` for an id that is unknown,
 *    expired or another principal's (the same answer, so ids cannot be probed).
 *  - `POST /api/v1/approvals/:id {approve: boolean, reason?: string}` (operators only; 403
 *    `forbidden` otherwise) → 200 the task after the decision; 404 when `id` is not a parked call
 *    waiting for a decision; 400 for another body, or a `reason` over
 *    `MAX_REJECTION_REASON_CHARS` (300) characters (as `broker__approvals_decide` refuses it).
 *
 * A task here is `{id, status, stoppedBy, principal, tool, subject, createdAt, updatedAt, ttlMs,
 * reason, args, result, _meta: {"mcp-broker/a2a": <A2A state>}}`: the durable row (arguments and
 * result as stored, scrubbed) with its state in the read projection (seed 001_0e634786582ab9c8.txt).
 */
import type { Express, Request, Response } from 'express';
import { BrokerError } from '../../shared/errors.js';
import type { ListPage } from '../../store/list-cursor.js';
import type { TaskRow, TaskStatus } from '../../store/store.js';
import { A2A_META_KEY, rejectionReasonProblem } from '../../tasks/index.js';
import type { Gateway } from '../../gateway.js';
import { jsonBody, type HttpContext } from './context.js';
import { principalOf } from './guards.js';

const STATUSES: readonly TaskStatus[] = ['running', 'completed', 'failed', 'parked', 'killed'];

export function mountTasksApi(app: Express, ctx: HttpContext, prefix: string): void {
  const { gateway } = ctx;

  app.get(`${prefix}/tasks`, async (req: Request, res: Response) => {
    const principal = principalOf(res);
    const status = req.query.status;
    if (status !== undefined && !STATUSES.includes(status as TaskStatus)) {
      return void res.status(400).json({ error: { code: 'bad_request', message: `status must be one of ${STATUSES.join(', ')}` } });
    }
    const cursor = req.query.cursor;
    if (cursor !== undefined && typeof cursor !== 'string') {
      return void res.status(400).json({ error: { code: 'bad_request', message: 'cursor must be given once, as a nextCursor this list gave' } });
    }
    await gateway.ready;
    let page: ListPage<TaskRow>;
    try {
      page = await gateway.tasks.list(principal.role === 'operator' ? undefined : principal.name, { status: status as TaskStatus | undefined, cursor });
    } catch (err) {
      if (err instanceof BrokerError && err.code === 'invalid_arguments') return void res.status(400).json({ error: { code: 'bad_request', message: err.message } });
      throw err;
    }
    res.json({ tasks: page.items.map((r) => taskJson(gateway, r)), ...(page.nextCursor !== undefined && { nextCursor: page.nextCursor }) });
  });

  app.get(`${prefix}/tasks/:id`, async (req: Request, res: Response) => {
    const principal = principalOf(res);
    await gateway.ready;
    const row = await gateway.tasks.get(String(req.params.id), principal.role === 'operator' ? undefined : principal.name);
    if (!row) return void res.status(404).json({ error: { code: 'not_found', message: 'no such task' } });
    res.json(taskJson(gateway, row));
  });

  app.post(`${prefix}/approvals/:id`, async (req: Request, res: Response) => {
    const principal = principalOf(res);
    if (principal.role !== 'operator') return void res.status(403).json({ error: { code: 'forbidden', message: 'deciding approvals needs the operator role' } });
    let body: { approve?: unknown; reason?: unknown } | undefined;
    try {
      body = jsonBody(req) as typeof body;
    } catch {
      body = undefined;
    }
    if (typeof body?.approve !== 'boolean' || (body.reason !== undefined && typeof body.reason !== 'string')) {
      return void res.status(400).json({ error: { code: 'bad_request', message: 'the body must be {"approve": true|false, "reason"?: "…"}' } });
    }
    const tooLong = typeof body.reason === 'string' ? rejectionReasonProblem(body.reason) : undefined;
    if (tooLong) return void res.status(400).json({ error: { code: 'bad_request', message: `reason ${tooLong}` } });
    await gateway.ready;
    const row = await gateway.tasks.decide(String(req.params.id), { approve: body.approve, by: principal.name, reason: body.reason as string | undefined });
    if (!row) return void res.status(404).json({ error: { code: 'not_found', message: 'no parked call with that id waits for a decision' } });
    res.json(taskJson(gateway, row));
  });
}

/** A task row as the API answers it. */
export function taskJson(gateway: Gateway, r: TaskRow): Record<string, unknown> {
  return {
    id: r.id,
    status: r.status,
    stoppedBy: r.stoppedBy,
    principal: r.principal,
    tool: r.name,
    subject: r.subject,
    callId: r.callId || undefined,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    ttlMs: r.ttlMs,
    reason: r.reason,
    args: r.args,
    result: r.result,
    _meta: { [A2A_META_KEY]: gateway.tasks.a2a(r) },
  };
}
