/**
 * The 2026-07-28 tasks extension `io.modelcontextprotocol/tasks` (SEP-2663) for modern callers,
 * over the broker's {@link TaskEngine}: the same durable rows, broker path and A2A state as the
 * 2025-11-25 tasks (legacy-tasks.ts), on the extension's wire.
 *
 * - Server-directed: a modern `tools/call` whose request declares the extension
 *   (`_meta["io.modelcontextprotocol/clientCapabilities"].extensions`) runs as a task when the
 *   tool's `execution.taskSupport` (the upstream's own) is `optional` or `required`, and is
 *   answered a flat `CreateTaskResult` (`resultType: "task"`, `taskId`, `status`, `createdAt`,
 *   `lastUpdatedAt`, `ttlMs`, `pollIntervalMs`) once its row is stored. The broker's own tools
 *   (function tools, `broker__*`, `estate__*`) are `optional`, so they run as tasks too. A
 *   `required` tool called without the extension is -32021 with
 *   `data.requiredCapabilities.extensions`; a legacy `params.task` hint is ignored.
 * - A tool of an upstream with tasks of its own ({@link upstreamRunsTasks}) is called plainly
 *   instead, the extension offered upstream; only when the upstream answers with a task is the
 *   running call made a broker task ({@link ModernTasks.adopt}), which follows the upstream's
 *   (upstream/modern-call.ts): the caller sees the broker's id, the upstream's input requests as
 *   this task's, and its cancel reaches the upstream.
 * - `tasks/get` answers the `DetailedTask`: `result` on `completed`, `error` on `failed`,
 *   `inputRequests` on `input_required`; `tasks/update` takes `inputResponses` for the keys
 *   outstanding (others ignored) and `tasks/cancel` asks the call to stop; both answer an empty
 *   result, a cancel of a settled task too. Each of the three is -32021 for a request that did
 *   not declare the extension, and -32602 for a task id that is unknown, expired or another
 *   principal's. `tasks/result` and `tasks/list` are not served (-32601). Over HTTP the SDK
 *   checks `Mcp-Name` against `params.taskId` (-32020, HTTP 400).
 * - Status, from the row: `running` is `working`, or `input_required` while the call waits on
 *   an upstream's elicitation, sampling or roots request (held in {@link TaskEngine.inputs}, answered
 *   through `tasks/update`); `parked` (an `ask`) is `input_required` with one approval question
 *   (`elicitation/create`, key `mcp-broker/approval`): the caller's accept approves it (as a
 *   modern ask's answer does), decline or cancel rejects it, and the operator inbox can decide
 *   it too; under `policy.askMode` `park` only the inbox decides (no question, `working`). A
 *   settled call is `completed` with its tool result, refusals included (they are results), except an upstream's protocol fault (`upstream_error`), a broker fault
 *   (`guard_error`) and a rejected approval (`approval_required`: declined by the caller, rejected
 *   in the inbox), which are `failed` with a JSON-RPC `error` (-32603, `data.outcome`) and the
 *   reason as `statusMessage`, as the 2025-11-25 status and the A2A state (`failed`) read the same
 *   row; killed by the caller is `cancelled`, by the system `failed`. The A2A state rides in `_meta["mcp-broker/a2a"]`.
 */
import { MissingRequiredClientCapabilityError, ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import type { ClientCapabilities } from '@modelcontextprotocol/server';
import { APPROVAL_INPUT_KEY } from '../broker/ask-input.js';
import { approvalRequestParams } from '../router/ask.js';
import type { CallerSession, CallRequest, ToolTarget } from '../broker/types.js';
import type { TaskRow } from '../store/store.js';
import type { Upstream } from '../upstream/types.js';
import { declaresTasksExtension, UPSTREAM_TASKS_EXTENSION_ID } from '../upstream/upstream-task.js';
import { A2A_META_KEY, mcpTaskStatus, TaskError, type TaskEngine } from '../tasks/index.js';
import { taskSupportOf } from './legacy-tasks.js';

/** The extension's identifier, as declared in capabilities. */
export const TASKS_EXTENSION_ID = UPSTREAM_TASKS_EXTENSION_ID;

/** The `extensions` entry the broker declares in `server/discover` (no settings defined). */
export const TASKS_EXTENSION = { [TASKS_EXTENSION_ID]: {} } as const;

/** Whether a request's client capabilities declare the tasks extension. */
export function declaresTasks(capabilities: ClientCapabilities | undefined): boolean {
  return declaresTasksExtension(capabilities);
}

/**
 * Whether `upstream` runs tasks of its own: a 2026-07-28 upstream that declares the extension.
 * Its calls offer it the extension, and a task it answers is followed by the broker
 * (upstream/modern-call.ts), for a modern caller as a broker task of its own ({@link ModernTasks.adopt}).
 */
export function upstreamRunsTasks(upstream: Pick<Upstream, 'era' | 'capabilities'> | undefined): boolean {
  return upstream?.era === 'modern' && declaresTasks(upstream.capabilities as ClientCapabilities | undefined);
}

/** The -32021 error for a request that needs the extension and did not declare it. */
export function tasksExtensionRequired(message: string): MissingRequiredClientCapabilityError {
  return new MissingRequiredClientCapabilityError({ requiredCapabilities: { extensions: TASKS_EXTENSION } } as never, message);
}

/**
 * Outcomes that are `failed` + `error` on the extension's wire: a protocol-level fault, and a
 * rejected approval (the call never ran: MCP `failed` in both eras, A2A `failed`). Every other
 * answer is a result (`completed`).
 */
const FAULT_OUTCOMES: ReadonlySet<string> = new Set(['upstream_error', 'guard_error', 'approval_required']);

/** The tasks extension for one principal's modern requests; see the module doc. */
export class ModernTasks {
  constructor(
    private readonly tasks: TaskEngine,
    private readonly principal: string,
  ) {}

  /**
   * Whether a modern call of `target` runs as a broker task from the start for a request
   * declaring `capabilities`. Throws -32021 for a tool that requires tasks when the extension is
   * not declared. `upstreamTasks`: the tool's upstream runs tasks of its own (a 2026-07-28
   * upstream declaring the extension): the call is sent plainly, the extension offered, and
   * becomes a broker task only if the upstream answers with one ({@link adopt}); false here.
   */
  runsAsTask(target: ToolTarget, capabilities: ClientCapabilities | undefined, upstreamTasks = false): boolean {
    const support = taskSupportOf(target);
    const declared = declaresTasks(capabilities);
    if (support === 'required' && !declared) {
      throw tasksExtensionRequired(`tool "${target.name}" runs only as a task, and this request did not declare the "${TASKS_EXTENSION_ID}" extension`);
    }
    return declared && support !== 'forbidden' && !upstreamTasks;
  }

  /** Starts the call as a task and answers the extension's `CreateTaskResult`, once the row is stored. */
  async create(request: Omit<CallRequest, 'signal' | 'abort' | 'taskId'>, session: CallerSession, target: ToolTarget): Promise<Record<string, unknown>> {
    return this.created(await this.tasks.create(request, session, target, undefined, { holdInputs: true }));
  }

  /**
   * Makes a running call a task, its upstream having answered with a task of its own
   * ({@link TaskEngine.adopt}): answers the broker's `CreateTaskResult` (the broker's id, never
   * the upstream's), once the row is stored. The upstream task's input requests are to be held
   * in `TaskEngine.inputs` under the row's id from then on.
   */
  async adopt(
    request: Pick<CallRequest, 'name' | 'args'>,
    session: CallerSession,
    target: ToolTarget,
    running: Parameters<TaskEngine['adopt']>[3],
  ): Promise<{ row: TaskRow; answer: Record<string, unknown> }> {
    const row = await this.tasks.adopt(request, session, target, running);
    return { row, answer: this.created(row) };
  }

  /** The extension's `CreateTaskResult` for a new row. */
  private created(row: TaskRow): Record<string, unknown> {
    // `content: []` keeps the result valid against the core CallToolResult schema the SDK checks.
    return { ...this.base(row), resultType: 'task', content: [] };
  }

  /** `tasks/get`: the task as it is now. */
  async get(taskId: string): Promise<Record<string, unknown>> {
    return this.detailed(await this.own(taskId));
  }

  /** `tasks/update`: answers the outstanding input requests named; an empty acknowledgement. */
  async update(taskId: string, inputResponses: Record<string, unknown>): Promise<Record<string, unknown>> {
    const row = await this.own(taskId);
    if (this.asksCaller(row)) {
      const answer = inputResponses[APPROVAL_INPUT_KEY] as { action?: unknown } | undefined;
      if (answer && typeof answer === 'object') {
        const approve = answer.action === 'accept';
        // The reason names the action only when it is one an elicitation answer has: caller text of any length never reaches the row or the record.
        const action = answer.action === 'decline' || answer.action === 'cancel' ? answer.action : 'no known action (not accept)';
        await this.tasks.decide(row.id, { approve, by: this.principal, ...(!approve && { reason: `the caller answered ${action}` }) });
      }
    } else if (row.status === 'running') {
      this.tasks.inputs.answer(row.id, inputResponses);
    }
    return {};
  }

  /** `tasks/cancel`: asks the call to stop; an empty acknowledgement, for a settled task too. */
  async cancel(taskId: string): Promise<Record<string, unknown>> {
    await this.own(taskId);
    try {
      await this.tasks.cancel(taskId, this.principal);
    } catch (err) {
      if (!(err instanceof TaskError && err.code === 'terminal')) throw err;
    }
    return {};
  }

  /**
   * Whether the caller is asked to approve its parked row: only while it waits for a decision and
   * `policy.askMode` is `elicit`. Under `park` the decision is an operator's (the inbox), so the
   * question is not offered and an answer to it is ignored.
   */
  private asksCaller(row: TaskRow): boolean {
    return row.status === 'parked' && row.approvedBy === null && this.tasks.askMode === 'elicit';
  }

  /** The row of `taskId` if this principal owns it, else -32602. */
  private async own(taskId: string): Promise<TaskRow> {
    const row = await this.tasks.get(taskId, this.principal);
    if (!row) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Failed to retrieve task: Task not found ("${taskId}")`);
    return row;
  }

  /** The fields every task answer carries (`Task`), with the A2A state in `_meta`. */
  private base(row: TaskRow): Record<string, unknown> {
    return {
      taskId: row.id,
      status: 'working',
      createdAt: row.createdAt,
      lastUpdatedAt: row.updatedAt,
      ttlMs: row.ttlMs,
      pollIntervalMs: this.tasks.timing.pollMs,
      _meta: { [A2A_META_KEY]: this.tasks.a2a(row) },
    };
  }

  /** The extension's `DetailedTask` for `row`. */
  detailed(row: TaskRow): Record<string, unknown> {
    const base = this.base(row);
    const status = mcpTaskStatus(this.tasks.a2a(row));
    const message = row.reason ? { statusMessage: row.reason } : {};
    if (row.status === 'parked') {
      const inputRequests = this.asksCaller(row)
        ? { [APPROVAL_INPUT_KEY]: { method: 'elicitation/create', params: approvalRequestParams(`Allow the broker to run "${row.name}" (${row.subject})?`) } }
        : undefined;
      return inputRequests ? { ...base, ...message, status: 'input_required', inputRequests } : { ...base, ...message, status: 'working' };
    }
    if (row.status === 'running') {
      const inputRequests = this.tasks.inputs.pending(row.id);
      return inputRequests ? { ...base, ...message, status: 'input_required', inputRequests } : { ...base, ...message, status };
    }
    if (row.status === 'killed') {
      if (status === 'cancelled') return { ...base, ...message, status: 'cancelled' };
      return { ...base, ...message, status: 'failed', error: { code: ProtocolErrorCode.InternalError, message: row.reason ?? 'the broker instance running the task stopped' } };
    }
    const result = (row.result ?? { content: [], isError: true }) as Record<string, unknown>;
    const outcome = (result._meta as Record<string, unknown> | undefined)?.['mcp-broker/outcome'];
    if (row.status === 'failed' && typeof outcome === 'string' && FAULT_OUTCOMES.has(outcome)) {
      return { ...base, ...message, status: 'failed', error: { code: ProtocolErrorCode.InternalError, message: row.reason ?? outcome, data: { outcome } } };
    }
    return { ...base, ...message, status: 'completed', result };
  }
}
