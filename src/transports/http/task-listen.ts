/**
 * `subscriptions/listen` for task status (the tasks extension, SEP-2663 "Task Status
 * Notifications") on the modern face of `/mcp`: a listen whose `notifications` asks for
 * `taskIds` only. The SDK's listen router knows the core notification kinds only, so this one is
 * served here, in the router's shape: an SSE stream opening with
 * `notifications/subscriptions/acknowledged` (`notifications.taskIds`: the requested ids that are
 * this principal's tasks), then one `notifications/tasks` per change of one of them, carrying the
 * task as `tasks/get` would answer it, each tagged `_meta["io.modelcontextprotocol/subscriptionId"]`
 * (the listen request's id); it ends when the client closes it. A listen asking for `taskIds`
 * without declaring the extension is -32021 (HTTP 400). A listen asking for `taskIds` and other
 * kinds is left to the SDK, which honours the other kinds only.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CLIENT_CAPABILITIES_META_KEY, SUBSCRIPTION_ID_META_KEY } from '@modelcontextprotocol/server';
import type { ClientCapabilities } from '@modelcontextprotocol/server';
import type { Gateway } from '../../gateway.js';
import type { TaskRow } from '../../store/store.js';
import { declaresTasks, ModernTasks, tasksExtensionRequired } from '../modern-tasks.js';
import { whenClosed } from './context.js';

interface ListenBody {
  id: string | number;
  params: { notifications: Record<string, unknown> & { taskIds: unknown[] }; _meta?: Record<string, unknown> };
}

/** Whether `body` is a listen this module serves: `notifications.taskIds` and nothing else asked for. */
export function isTaskListen(body: unknown): body is ListenBody {
  const b = body as { method?: unknown; id?: unknown; params?: { notifications?: Record<string, unknown> } } | null;
  if (typeof b !== 'object' || b === null || b.method !== 'subscriptions/listen') return false;
  const notifications = b.params?.notifications;
  if (typeof notifications !== 'object' || notifications === null || !Array.isArray(notifications.taskIds)) return false;
  return Object.entries(notifications).every(([key, value]) => key === 'taskIds' || value === undefined || value === false || (Array.isArray(value) && value.length === 0));
}

/** Serves a task listen (see the module doc) for `principal` until the client closes it. */
export async function serveTaskListen(gateway: Gateway, principal: string, body: ListenBody, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const capabilities = body.params._meta?.[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities | undefined;
  if (!declaresTasks(capabilities)) {
    const err = tasksExtensionRequired('subscriptions/listen for taskIds needs the "io.modelcontextprotocol/tasks" extension, which this request did not declare');
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id: body.id, error: { code: err.code, message: err.message, data: err.data } }));
    return;
  }
  if (!gateway.readySettled) await gateway.ready;
  const tasks = new ModernTasks(gateway.tasks, principal);
  const wanted = [...new Set(body.params.notifications.taskIds.filter((id): id is string => typeof id === 'string'))];
  const honoured: string[] = [];
  for (const id of wanted) if (await gateway.tasks.get(id, principal)) honoured.push(id);
  const tag = { [SUBSCRIPTION_ID_META_KEY]: body.id };
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  const write = (method: string, params: Record<string, unknown>) => {
    if (!res.destroyed) res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method, params })}\n\n`);
  };
  write('notifications/subscriptions/acknowledged', { notifications: { taskIds: honoured }, _meta: tag });
  const ids = new Set(honoured);
  const onStatus = (row: TaskRow) => {
    if (!ids.has(row.id)) return;
    const { _meta, resultType: _rt, ...task } = tasks.detailed(row);
    write('notifications/tasks', { ...task, _meta: { ...(_meta as Record<string, unknown>), ...tag } });
  };
  const onInputs = (id: string) => {
    if (ids.has(id)) void gateway.tasks.get(id, principal).then((row) => row && onStatus(row), () => undefined);
  };
  gateway.tasks.on('status', onStatus);
  gateway.tasks.inputs.on('changed', onInputs);
  whenClosed(res, () => {
    gateway.tasks.off('status', onStatus);
    gateway.tasks.inputs.off('changed', onInputs);
  });
  void req;
}
