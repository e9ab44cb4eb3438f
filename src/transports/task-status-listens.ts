/**
 * Task status on a modern `subscriptions/listen` over one stdio connection (the tasks extension,
 * SEP-2663 "Task Status Notifications"), beside the SDK's listen router, which knows the core
 * notification kinds only (it acknowledges and tags `toolsListChanged`, `resourceSubscriptions`,
 * … and drops `taskIds`):
 *
 * - A listen whose `notifications.taskIds` is a non-empty array, alone or with other kinds, is
 *   held back until the ids are looked up: those that are this principal's tasks are honoured.
 *   Declared without the extension (`_meta["io.modelcontextprotocol/clientCapabilities"]
 *   .extensions`), it is answered -32021 and never reaches the SDK.
 * - The SDK's `notifications/subscriptions/acknowledged` for that listen gets
 *   `notifications.taskIds`: the honoured ids (so a listen asking only for tasks is acknowledged
 *   with them). From then on each change of one of them is one `notifications/tasks` carrying
 *   the task as `tasks/get` answers it, tagged `_meta["io.modelcontextprotocol/subscriptionId"]`.
 * - It ends on `notifications/cancelled` naming the listen's id, or {@link TaskStatusListens.close}
 *   (the connection ended).
 *
 * HTTP serves a listen for `taskIds` only in `http/task-listen.ts`.
 */
import { SUBSCRIPTION_ID_META_KEY } from '@modelcontextprotocol/server';
import type { ClientCapabilities, JSONRPCMessage } from '@modelcontextprotocol/server';
import type { Gateway } from '../gateway.js';
import type { TaskRow } from '../store/store.js';
import { envelopeCapabilities, hasModernClaim } from './era.js';
import { declaresTasks, ModernTasks, tasksExtensionRequired } from './modern-tasks.js';

type Id = string | number;

interface Listen {
  readonly id: Id;
  readonly honoured: string[];
  /** Detaches its task listeners once acknowledged; undefined before. */
  detach?: () => void;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * `message`'s requested `taskIds` when it is a modern (enveloped) `subscriptions/listen` naming
 * some, else undefined.
 */
export function listenTaskIds(message: unknown): { id: Id; taskIds: unknown[] } | undefined {
  if (!isObject(message) || message.method !== 'subscriptions/listen' || !hasModernClaim(message)) return undefined;
  if (typeof message.id !== 'string' && typeof message.id !== 'number') return undefined;
  const notifications = isObject(message.params) ? message.params.notifications : undefined;
  const taskIds = isObject(notifications) ? notifications.taskIds : undefined;
  return Array.isArray(taskIds) && taskIds.length > 0 ? { id: message.id, taskIds } : undefined;
}

/** The `notifications/tasks` for `row` on listen `id`: the task as `tasks/get` answers it, tagged. */
export function taskStatusNotification(tasks: ModernTasks, row: TaskRow, id: Id): { method: 'notifications/tasks'; params: Record<string, unknown> } {
  const { _meta, resultType: _rt, ...task } = tasks.detailed(row);
  return { method: 'notifications/tasks', params: { ...task, _meta: { ...(_meta as Record<string, unknown>), [SUBSCRIPTION_ID_META_KEY]: id } } };
}

/** The task listens of one stdio connection, for `principal`; see the module doc. */
export class TaskStatusListens {
  private readonly listens = new Map<Id, Listen>();
  private readonly tasks: ModernTasks;

  /** `send` writes one message to the client (after the SDK's own, in order). */
  constructor(
    private readonly gateway: Gateway,
    private readonly principal: string,
    private readonly send: (message: JSONRPCMessage) => void,
  ) {
    this.tasks = new ModernTasks(gateway.tasks, principal);
  }

  /** Looks at one inbound message: a `notifications/cancelled` naming an open listen ends it. */
  observe(message: JSONRPCMessage): void {
    const m = message as { method?: unknown; params?: { requestId?: unknown } };
    if (m.method !== 'notifications/cancelled') return;
    const id = m.params?.requestId;
    if (typeof id === 'string' || typeof id === 'number') this.end(id);
  }

  /**
   * Takes a listen naming `taskIds` ({@link listenTaskIds}) before the SDK sees it: looks its ids
   * up. Answers `false` when it must not reach the SDK (refused here; its error is sent).
   */
  async admit(message: JSONRPCMessage): Promise<boolean> {
    const asked = listenTaskIds(message);
    if (!asked) return true;
    if (!declaresTasks(envelopeCapabilities(message) as ClientCapabilities | undefined)) {
      const err = tasksExtensionRequired('subscriptions/listen for taskIds needs the "io.modelcontextprotocol/tasks" extension, which this request did not declare');
      this.send({ jsonrpc: '2.0', id: asked.id, error: { code: err.code, message: err.message, data: err.data } } as JSONRPCMessage);
      return false;
    }
    if (!this.gateway.readySettled) await this.gateway.ready.catch(() => undefined);
    const honoured: string[] = [];
    for (const id of new Set(asked.taskIds)) if (typeof id === 'string' && (await this.gateway.tasks.get(id, this.principal))) honoured.push(id);
    this.end(asked.id);
    this.listens.set(asked.id, { id: asked.id, honoured });
    return true;
  }

  /**
   * Looks at one outbound message before it is written: the SDK's acknowledgement of a task
   * listen gets its honoured `taskIds`, and the listen starts notifying once it is written
   * (`written`). Answers the message to write.
   */
  outbound(message: JSONRPCMessage): { message: JSONRPCMessage; written?: () => void } {
    const m = message as { method?: unknown; params?: { notifications?: Record<string, unknown>; _meta?: Record<string, unknown> } };
    if (m.method !== 'notifications/subscriptions/acknowledged') return { message };
    const id = m.params?._meta?.[SUBSCRIPTION_ID_META_KEY];
    const listen = typeof id === 'string' || typeof id === 'number' ? this.listens.get(id) : undefined;
    if (!listen || listen.detach) return { message };
    const acknowledged = { ...m, params: { ...m.params, notifications: { ...m.params?.notifications, taskIds: listen.honoured } } } as unknown as JSONRPCMessage;
    return { message: acknowledged, written: () => this.start(listen) };
  }

  /** Ends every listen (the connection closed). */
  close(): void {
    for (const id of [...this.listens.keys()]) this.end(id);
  }

  private start(listen: Listen): void {
    if (this.listens.get(listen.id) !== listen || listen.detach) return;
    const ids = new Set(listen.honoured);
    const onStatus = (row: TaskRow) => {
      if (ids.has(row.id) && this.listens.get(listen.id) === listen) this.send({ jsonrpc: '2.0', ...taskStatusNotification(this.tasks, row, listen.id) } as JSONRPCMessage);
    };
    const onInputs = (taskId: string) => {
      if (ids.has(taskId)) void this.gateway.tasks.get(taskId, this.principal).then((row) => row && onStatus(row), () => undefined);
    };
    this.gateway.tasks.on('status', onStatus);
    this.gateway.tasks.inputs.on('changed', onInputs);
    listen.detach = () => {
      this.gateway.tasks.off('status', onStatus);
      this.gateway.tasks.inputs.off('changed', onInputs);
    };
  }

  private end(id: Id): void {
    const listen = this.listens.get(id);
    if (!listen) return;
    this.listens.delete(id);
    listen.detach?.();
  }
}
