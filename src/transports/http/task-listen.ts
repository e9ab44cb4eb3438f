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
 * kinds is served by the SDK with its stream passed through {@link withTaskStatus}: its
 * acknowledgement gets the honoured `taskIds` and the task notifications are put between the
 * SDK's events (the stream stays open for them when the SDK honours none of the other kinds).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CLIENT_CAPABILITIES_META_KEY, isJsonContentType, SUBSCRIPTION_ID_META_KEY } from '@modelcontextprotocol/server';
import type { ClientCapabilities } from '@modelcontextprotocol/server';
import type { Gateway } from '../../gateway.js';
import type { TaskRow } from '../../store/store.js';
import { declaresTasks, ModernTasks, tasksExtensionRequired } from '../modern-tasks.js';
import { listenTaskIds, taskStatusNotification } from '../task-status-listens.js';
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
  // Served beside the SDK's handler, so its checks are made here: a POST body that is not JSON is 415, as the SDK answers.
  const contentType = req.headers['content-type'];
  if (!isJsonContentType((Array.isArray(contentType) ? contentType[0] : contentType) ?? null)) {
    res.writeHead(415, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Unsupported Media Type: Content-Type must be application/json' } }));
    return;
  }
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

/**
 * For a listen that asks for `taskIds` and other kinds (the SDK serves the other kinds): answers
 * -32021 (HTTP 400) as a JSON `Response` when the request did not declare the extension, else
 * the ids of `principal`'s own tasks among those asked for. Undefined for any other request.
 */
export async function mixedTaskListen(gateway: Gateway, principal: string, body: unknown): Promise<{ refused: Response } | { id: string | number; honoured: string[] } | undefined> {
  const asked = listenTaskIds(body);
  if (!asked || isTaskListen(body)) return undefined;
  const capabilities = (body as ListenBody).params._meta?.[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities | undefined;
  if (!declaresTasks(capabilities)) {
    const err = tasksExtensionRequired('subscriptions/listen for taskIds needs the "io.modelcontextprotocol/tasks" extension, which this request did not declare');
    const refused = new Response(JSON.stringify({ jsonrpc: '2.0', id: asked.id, error: { code: err.code, message: err.message, data: err.data } }), { status: 400, headers: { 'content-type': 'application/json' } });
    return { refused };
  }
  if (!gateway.readySettled) await gateway.ready;
  const honoured: string[] = [];
  for (const id of new Set(asked.taskIds)) if (typeof id === 'string' && (await gateway.tasks.get(id, principal))) honoured.push(id);
  return { id: asked.id, honoured };
}

/**
 * The SDK's listen `response` with task status added (see the module doc): the acknowledgement
 * of listen `id` gets `notifications.taskIds: honoured`, then each change of one of those tasks
 * is one `notifications/tasks` event. Other responses are answered as they are.
 */
export function withTaskStatus(response: Response, gateway: Gateway, principal: string, id: string | number, honoured: string[]): Response {
  if (!response.body || !response.headers.get('content-type')?.includes('text/event-stream')) return response;
  const tasks = new ModernTasks(gateway.tasks, principal);
  const ids = new Set(honoured);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let detach: (() => void) | undefined;
  let ended = false;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      const enqueue = (text: string) => !ended && controller.enqueue(encoder.encode(text));
      const notify = () => {
        const onStatus = (row: TaskRow) => {
          if (ids.has(row.id)) enqueue(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', ...taskStatusNotification(tasks, row, id) })}\n\n`);
        };
        const onInputs = (taskId: string) => {
          if (ids.has(taskId)) void gateway.tasks.get(taskId, principal).then((row) => row && onStatus(row), () => undefined);
        };
        gateway.tasks.on('status', onStatus);
        gateway.tasks.inputs.on('changed', onInputs);
        detach = () => {
          gateway.tasks.off('status', onStatus);
          gateway.tasks.inputs.off('changed', onInputs);
        };
      };
      void (async () => {
        let buffered = '';
        // Whether the SDK honoured none of the other kinds: it ends its stream at once, ours stays open for the tasks.
        let sdkIdle = false;
        try {
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buffered += decoder.decode(value, { stream: true });
            for (let i; (i = buffered.indexOf('\n\n')) >= 0; ) {
              const event = buffered.slice(0, i + 2);
              buffered = buffered.slice(i + 2);
              const rewritten = rewriteEvent(event, id, honoured);
              if (rewritten.acknowledged) sdkIdle = rewritten.acknowledged.idle;
              if (rewritten.closing && sdkIdle && ids.size) continue;
              enqueue(rewritten.text);
              if (rewritten.acknowledged && !detach && ids.size) notify();
            }
          }
          if (sdkIdle && ids.size) return; // open until the client closes it (cancel)
          detach?.();
          if (!ended) controller.close();
          ended = true;
        } catch (err) {
          detach?.();
          if (!ended) controller.error(err);
          ended = true;
        }
      })();
    },
    cancel(reason) {
      ended = true;
      detach?.();
      return reader.cancel(reason).catch(() => undefined);
    },
  });
  return new Response(stream, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** One SSE event of the SDK's listen stream, with listen `id`'s acknowledgement given `taskIds`. */
function rewriteEvent(event: string, id: string | number, honoured: string[]): { text: string; acknowledged?: { idle: boolean }; closing?: boolean } {
  const lines = event.split('\n');
  const at = lines.findIndex((l) => l.startsWith('data: '));
  if (at < 0) return { text: event };
  let message: { id?: unknown; method?: unknown; result?: unknown; params?: { notifications?: Record<string, unknown>; _meta?: Record<string, unknown> } };
  try {
    message = JSON.parse(lines[at]!.slice(6));
  } catch {
    return { text: event };
  }
  if (message.id === id && message.result !== undefined) return { text: event, closing: true };
  if (message.method !== 'notifications/subscriptions/acknowledged' || message.params?._meta?.[SUBSCRIPTION_ID_META_KEY] !== id) return { text: event };
  const sdk = message.params.notifications ?? {};
  lines[at] = `data: ${JSON.stringify({ ...message, params: { ...message.params, notifications: { ...sdk, taskIds: honoured } } })}`;
  return { text: lines.join('\n'), acknowledged: { idle: Object.keys(sdk).length === 0 } };
}
