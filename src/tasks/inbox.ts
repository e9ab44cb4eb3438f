/**
 * The approval inbox over the store alone (no running broker needed): list parked calls and
 * decide one. `mcp-broker approvals` uses it directly; a serving broker's {@link TaskEngine}
 * uses it too and then acts at once. An approval written by another process is taken up by a
 * serving broker on its next tick (`TASK_POLL_MS`).
 */
import type { CallToolResult } from '@modelcontextprotocol/server';
import { listKeyOf, pageOf, type ListPage } from '../store/list-cursor.js';
import type { Store, TaskRow } from '../store/store.js';
import { TASK_LIST_LIMIT } from './constants.js';

/**
 * Longest reason a rejection takes, in characters (UTF-16 code units, as `String.length`): it is
 * shown to the caller, stored in the row and written in the record. Every face refuses a longer
 * one (`broker__approvals_decide`, `POST /api/v1/approvals/:id`, `approvals reject --reason`).
 */
export const MAX_REJECTION_REASON_CHARS = 300;

/** Why `reason` cannot be a rejection's reason (too long), or undefined when it can. */
export function rejectionReasonProblem(reason: string): string | undefined {
  return reason.length > MAX_REJECTION_REASON_CHARS ? `is ${reason.length} characters; at most ${MAX_REJECTION_REASON_CHARS}` : undefined;
}

/** An operator's decision on one parked call. */
export interface InboxDecision {
  /** `true`: the call resumes through the rest of the path; `false`: it fails with `reason`. */
  readonly approve: boolean;
  /** Who decided: `cli`, or a principal name. */
  readonly by: string;
  /** Why, for a rejection (one line, at most {@link MAX_REJECTION_REASON_CHARS} characters; shown to the caller). */
  readonly reason?: string;
}

/** Which page of the inbox {@link listParked} reads. */
export interface InboxPageOptions {
  /** A `nextCursor` of the page before; absent: the first page (the newest calls). */
  readonly cursor?: string;
  /** Most rows on a page; default {@link TASK_LIST_LIMIT}. */
  readonly limit?: number;
  /** Only this principal's parked calls; absent: every principal's. */
  readonly principal?: string;
}

/**
 * One page of the parked calls not yet decided, newest first (every principal's, or one's), and the
 * cursor of the next page when more follow (store/list-cursor.ts). Throws
 * `BrokerError('invalid_arguments')` for a cursor no page gave.
 */
export async function listParked(store: Store, now: number, page: InboxPageOptions = {}): Promise<ListPage<TaskRow>> {
  const limit = page.limit ?? TASK_LIST_LIMIT;
  const after = listKeyOf(page.cursor, 'the approval inbox');
  const principal = page.principal !== undefined ? { principal: page.principal } : {};
  return pageOf(await store.listTasks({ status: 'parked', approved: false, ...principal, ...(after && { after }), now, limit: limit + 1 }), limit);
}

/**
 * Decides parked call `id`. Approve: the row is marked approved (still `parked` until a broker
 * takes it up). Reject: the row becomes `failed`, its result an `approval_required` refusal
 * naming the reason. Answers the row after, or undefined when `id` is not a parked call waiting
 * for a decision (unknown, expired, already decided).
 */
export async function decideParked(store: Store, id: string, decision: InboxDecision, now: number): Promise<TaskRow | undefined> {
  const row = await store.getTask(id, now);
  if (!row || row.status !== 'parked' || row.approvedBy !== null) return undefined;
  const updatedAt = new Date(now).toISOString();
  if (decision.approve) {
    if (!(await store.updateTask(id, ['parked'], { status: 'parked', approvedBy: decision.by, updatedAt }))) return undefined;
  } else {
    const reason = rejectionReason(decision);
    const result: CallToolResult = {
      content: [{ type: 'text', text: `approval_required: ${reason}` }],
      isError: true,
      _meta: { 'mcp-broker/outcome': 'approval_required' },
    };
    if (!(await store.updateTask(id, ['parked'], { status: 'failed', reason, result, updatedAt }))) return undefined;
  }
  return store.getTask(id, now);
}

/** The one-line reason a rejected call fails with. */
export function rejectionReason(decision: InboxDecision): string {
  return `rejected by ${decision.by}${decision.reason ? `: ${decision.reason}` : ''}`;
}
