/**
 * The 2025-11-25 task methods of one downstream session, over the broker's {@link TaskEngine}:
 * a task-augmented `tools/call` (`params.task`), `tasks/get`, `tasks/result` (waits until the
 * task is done, then answers what the call answered), `tasks/list` (the caller's own tasks,
 * newest first, a page of `TASK_LIST_LIMIT` at a time: `nextCursor`, absent on the last page,
 * passed back as `cursor` reads the next), `tasks/cancel`, and `notifications/tasks/status` to
 * the session that created a task.
 *
 * Our own handlers, served as the session's fallback: SDK 2.4.0 keeps the 2025-11-25 task wire
 * types but has no task runtime and no typed handler registration for these methods
 * (upgrade-to-v2.md "Experimental tasks interception removed").
 *
 * Errors, as the revision says: an unknown, expired or foreign task id, cancelling a settled
 * task, and a `tasks/list` cursor no page gave, are -32602; a task-augmented call of a tool whose
 * `execution.taskSupport` is absent or `forbidden` is -32601. The broker's own tools (function tools, built-ins) are `optional`.
 */
import { ProtocolError, ProtocolErrorCode, RELATED_TASK_META_KEY } from '@modelcontextprotocol/server';
import type { ServerCapabilities, Tool } from '@modelcontextprotocol/server';
import type { CallerSession, CallRequest, ToolTarget } from '../broker/types.js';
import { A2A_META_KEY, TaskError, type TaskEngine } from '../tasks/index.js';
import type { TaskRow } from '../store/store.js';
import { BrokerError } from '../shared/errors.js';

/** The `tasks` server capability a session declares. */
export const TASKS_CAPABILITY: NonNullable<ServerCapabilities['tasks']> = {
  list: {},
  cancel: {},
  requests: { tools: { call: {} } },
};

/**
 * The `execution.taskSupport` of a target: the upstream's own, `optional` for the broker's tools
 * and, when none is listed, for a tool whose upstream runs tasks of its own (`upstreamTasks`: a
 * 2026-07-28 upstream declaring the tasks extension, whose era lists no `execution`; any of its
 * tools may answer a task, which the broker's task then follows).
 */
export function taskSupportOf(target: ToolTarget, upstreamTasks = false): 'forbidden' | 'optional' | 'required' {
  if (target.source === 'local') return 'optional';
  return target.definition?.execution?.taskSupport ?? (upstreamTasks ? 'optional' : 'forbidden');
}

/** A tool definition as listed to a legacy caller: `execution.taskSupport` as {@link taskSupportOf} says, when not `forbidden`. */
export function withTaskSupport(tool: Tool, target: ToolTarget | undefined, upstreamTasks = false): Tool {
  if (!target || tool.execution?.taskSupport) return tool;
  const support = taskSupportOf(target, upstreamTasks);
  return support === 'forbidden' ? tool : { ...tool, execution: { ...tool.execution, taskSupport: support } };
}

/** The task methods this module serves. */
export const LEGACY_TASK_METHODS: ReadonlySet<string> = new Set(['tasks/get', 'tasks/result', 'tasks/list', 'tasks/cancel']);

export interface LegacyTasksHost {
  readonly tasks: TaskEngine;
  resolve(name: string): ToolTarget | undefined;
  /** Whether the upstream of `target` runs tasks of its own ({@link taskSupportOf}); default never. */
  upstreamTasks?(target: ToolTarget): boolean;
  /** Told each task id handed to the client, once its row is stored (before its call starts). */
  given?(id: string): void;
  /**
   * How a task's call puts the upstream's input requests (elicitation, sampling, roots) to this
   * caller: live, on its session (`TaskEngine.create`'s `ask`). Absent: such a request fails the call.
   */
  ask?: NonNullable<CallRequest['onServerRequest']>;
}

export class LegacyTasks {
  constructor(
    private readonly host: LegacyTasksHost,
    private readonly principal: string,
  ) {}

  /**
   * A task-augmented `tools/call`: answers `CreateTaskResult` at once (with the A2A state in
   * `_meta`); the call runs through the broker path in the background.
   */
  async callAsTask(request: Omit<CallRequest, 'signal' | 'abort'>, task: unknown, session: CallerSession): Promise<Record<string, unknown>> {
    const target = this.host.resolve(request.name);
    if (!target) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${request.name}`);
    if (taskSupportOf(target, this.host.upstreamTasks?.(target)) === 'forbidden') {
      throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `tool "${request.name}" cannot be called as a task (its execution.taskSupport is not "optional" or "required")`);
    }
    const ttl = (task as { ttl?: unknown } | undefined)?.ttl;
    const row = await this.host.tasks.create(request, session, target, typeof ttl === 'number' && ttl > 0 ? Math.floor(ttl) : undefined, {
      given: (id) => this.host.given?.(id),
      ask: this.host.ask,
    });
    const { _meta, ...wire } = this.host.tasks.toMcpTask(row);
    return { task: wire, _meta };
  }

  /** Serves one `tasks/*` request. */
  async handle(method: string, params: Record<string, unknown> | undefined, signal: AbortSignal): Promise<Record<string, unknown>> {
    const tasks = this.host.tasks;
    const taskId = typeof params?.taskId === 'string' ? params.taskId : undefined;
    try {
      switch (method) {
        case 'tasks/list': {
          const cursor = params?.cursor;
          if (cursor !== undefined && typeof cursor !== 'string') throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'tasks/list: params.cursor must be a string');
          const page = await tasks.list(this.principal, { cursor });
          return { tasks: page.items.map((r) => tasks.toMcpTask(r)), ...(page.nextCursor !== undefined && { nextCursor: page.nextCursor }) };
        }
        case 'tasks/get':
          return tasks.toMcpTask(await this.own(need(taskId, method)));
        case 'tasks/cancel':
          return tasks.toMcpTask(await tasks.cancel(need(taskId, method), this.principal));
        case 'tasks/result': {
          const row = await tasks.settled(need(taskId, method), this.principal, signal);
          return resultOf(row, tasks.a2a(row));
        }
      }
    } catch (err) {
      if (err instanceof TaskError) throw new ProtocolError(ProtocolErrorCode.InvalidParams, err.message);
      if (err instanceof BrokerError && err.code === 'invalid_arguments') throw new ProtocolError(ProtocolErrorCode.InvalidParams, err.message);
      throw err;
    }
    throw new ProtocolError(ProtocolErrorCode.MethodNotFound, 'Method not found');
  }

  private async own(id: string): Promise<TaskRow> {
    const row = await this.host.tasks.get(id, this.principal);
    if (!row) throw new TaskError('not_found', `no task "${id}"`);
    return row;
  }
}

function need(taskId: string | undefined, method: string): string {
  if (taskId === undefined) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `${method}: params.taskId must be a string`);
  return taskId;
}

/**
 * What `tasks/result` answers: the call's own result, tagged with its task. A row with none (a
 * task killed before it answered) reads as its status does: `cancelled: …` when its caller
 * stopped it (A2A `canceled`), `failed: …` when the broker did (A2A and MCP `failed`).
 */
function resultOf(row: TaskRow, state: string): Record<string, unknown> {
  const word = state === 'canceled' ? 'cancelled' : 'failed';
  const stored = (row.result ?? {
    content: [{ type: 'text', text: `${word}: ${row.reason ?? 'the task was stopped before it finished'}` }],
    isError: true,
  }) as Record<string, unknown>;
  const meta = (stored._meta ?? {}) as Record<string, unknown>;
  return { ...stored, _meta: { ...meta, [RELATED_TASK_META_KEY]: { taskId: row.id }, [A2A_META_KEY]: state } };
}
