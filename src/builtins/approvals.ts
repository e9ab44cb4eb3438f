/**
 * The approval inbox as built-in tools (issue 15 §5), for operators (`requiresPrivilege`: `local`
 * or role `operator`, or a `policy.rules` entry naming the tool):
 *
 *  - `broker__approvals_list {cursor?}` → `{approvals: [{id, tool, subject, principal, createdAt, reason, args}], nextCursor?}`:
 *    parked calls waiting for a decision, newest first, every principal's (arguments as stored,
 *    scrubbed), a page of {@link ApprovalsDeps.pageSize} at a time; `nextCursor` (absent on the
 *    last page) passed back as `cursor` reads the next page. A cursor no page gave is `invalid_arguments`.
 *  - `broker__approvals_decide {id, approve, reason?}` → `{id, decided: true, status, a2a}`, or
 *    `{id, decided: false}` when `id` is not a parked call waiting for a decision. Approve: the
 *    call resumes through the rest of the broker path; reject: it fails with the reason.
 */
import { z } from 'zod';
import { cursorParameter } from './cursor-parameter.js';
import { defineFunctionTool, type FunctionTool } from '../router/function-tool.js';
import type { Clock } from '../shared/clock.js';
import { listParked, MAX_REJECTION_REASON_CHARS, type TaskEngine } from '../tasks/index.js';
import type { Store } from '../store/store.js';

export const APPROVALS_LIST_TOOL = 'broker__approvals_list';
export const APPROVALS_DECIDE_TOOL = 'broker__approvals_decide';

export interface ApprovalsDeps {
  /** The gateway's task engine (set once the gateway is built; read at call time). */
  tasks: () => TaskEngine | undefined;
  store: () => Store;
  clock: Clock;
  /** Most parked calls on one page of `broker__approvals_list`; default `TASK_LIST_LIMIT` (500). */
  pageSize?: number;
}

const Parked = z.object({
  id: z.string(),
  tool: z.string(),
  subject: z.string(),
  principal: z.string(),
  createdAt: z.string(),
  reason: z.string().nullable(),
  args: z.unknown(),
});

export function approvalsTools(deps: ApprovalsDeps): FunctionTool[] {
  const list = defineFunctionTool({
    name: APPROVALS_LIST_TOOL,
    title: 'List parked calls',
    description:
      'Lists the calls parked in the approval inbox (an "ask" that waits for an operator), newest first, one page at a time. Answer: {approvals: [{id, tool, subject, principal, createdAt, reason, args}], nextCursor?}; pass nextCursor back as cursor for the next page (absent on the last). Decide one with broker__approvals_decide.',
    parameters: z.object({ cursor: cursorParameter }),
    output: z.object({ approvals: z.array(Parked), nextCursor: z.string().optional() }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    requiresPrivilege: true,
    privilegeReason: "shows every principal's parked calls (the approval inbox)",
    async handler({ cursor }) {
      const page = await listParked(deps.store(), deps.clock.now(), { cursor, limit: deps.pageSize });
      const approvals = page.items.map((r) => ({ id: r.id, tool: r.name, subject: r.subject, principal: r.principal, createdAt: r.createdAt, reason: r.reason, args: r.args }));
      const answer = { approvals, ...(page.nextCursor !== undefined && { nextCursor: page.nextCursor }) };
      return { content: [{ type: 'text', text: JSON.stringify(answer) }], structuredContent: answer };
    },
  });
  const decide = defineFunctionTool({
    name: APPROVALS_DECIDE_TOOL,
    title: 'Approve or reject a parked call',
    description:
      'Approves (the call resumes through the rest of the broker path) or rejects (it fails with the reason) one call parked in the approval inbox. Answer: {id, decided, status?, a2a?}; decided is false when the id is not a parked call waiting for a decision.',
    parameters: z.object({
      id: z.string().min(1).describe('The parked call id (broker__approvals_list)'),
      approve: z.boolean(),
      reason: z.string().max(MAX_REJECTION_REASON_CHARS).optional().describe('Why, for a rejection; shown to the caller'),
    }),
    output: z.object({ id: z.string(), decided: z.boolean(), status: z.string().optional(), a2a: z.string().optional() }),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    requiresPrivilege: true,
    privilegeReason: "decides every principal's parked calls (the approval inbox)",
    async handler({ id, approve, reason }, ctx) {
      const tasks = deps.tasks();
      const row = tasks ? await tasks.decide(id, { approve, by: ctx.session.principal, reason }) : undefined;
      const answer = row && tasks ? { id, decided: true, status: row.status, a2a: tasks.a2a(row) } : { id, decided: false };
      return { content: [{ type: 'text', text: JSON.stringify(answer) }], structuredContent: answer };
    },
  });
  return [list, decide];
}
