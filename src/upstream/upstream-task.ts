/**
 * A 2026-07-28 upstream's own tasks (the extension `io.modelcontextprotocol/tasks`, SEP-2663;
 * server-directed): what the broker needs to follow one from `McpUpstream.callTool`.
 *
 * SDK 2.4.0's client refuses a `resultType: "task"` answer before any schema sees it
 * (`decodeResult`: "Unsupported result type 'task'"; no request option or result schema lets it
 * through). {@link acceptTaskResults} wraps the upstream's transport, the SDK's public seam
 * (docs/advanced/custom-transports.md), so that such an answer reaches the client as a complete
 * result: `{ resultType: "complete", content: [], [UPSTREAM_TASK_KEY]: <the CreateTaskResult> }`.
 * modern-call.ts reads it back with {@link upstreamTaskOf} and follows the task with
 * `tasks/get`, `tasks/update` and `tasks/cancel` (the custom-method form of `client.request`).
 */
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/client';
import type { UpstreamTaskStarted } from './types.js';

/** The extension's identifier (as modern-tasks.ts declares it to callers). */
export const UPSTREAM_TASKS_EXTENSION_ID = 'io.modelcontextprotocol/tasks';

/** The key under which a rewritten answer carries the upstream's `CreateTaskResult`. */
export const UPSTREAM_TASK_KEY = 'mcp-broker/upstreamTask';

/** Polling bounds for an upstream task, in ms: its `pollIntervalMs` clamped to these; the default when it gives none. */
export const UPSTREAM_POLL_MIN_MS = 50;
export const UPSTREAM_POLL_MAX_MS = 5_000;
export const UPSTREAM_POLL_DEFAULT_MS = 500;

/** An upstream's task as it answered it (the fields the broker reads). */
export type UpstreamTask = UpstreamTaskStarted;

/**
 * `transport` with every incoming response whose `result.resultType` is `"task"` rewritten as
 * described in the module doc; everything else passes unchanged. The same object (a proxy of
 * it): `onmessage` set on it is wrapped, every other member is the transport's own.
 */
export function acceptTaskResults<T extends Transport>(transport: T): T {
  return new Proxy(transport, {
    set(target, key, value) {
      if (key === 'onmessage' && typeof value === 'function') {
        const handler = value as NonNullable<Transport['onmessage']>;
        const wrapped: Transport['onmessage'] = (message, extra) => handler(rewriteTask(message), extra);
        return Reflect.set(target, key, wrapped);
      }
      return Reflect.set(target, key, value);
    },
    get(target, key) {
      const value = Reflect.get(target, key, target);
      return typeof value === 'function' && key !== 'onmessage' && key !== 'onclose' && key !== 'onerror' ? value.bind(target) : value;
    },
  });
}

function rewriteTask<M extends JSONRPCMessage>(message: M): M {
  const result = (message as { result?: unknown }).result as Record<string, unknown> | undefined;
  if (!result || typeof result !== 'object' || result.resultType !== 'task') return message;
  return { ...message, result: { resultType: 'complete', content: [], [UPSTREAM_TASK_KEY]: result } };
}

/** The upstream task a rewritten answer carries, or undefined for any other result. */
export function upstreamTaskOf(result: Record<string, unknown>): UpstreamTask | undefined {
  const task = result[UPSTREAM_TASK_KEY] as Record<string, unknown> | undefined;
  if (!task || typeof task !== 'object' || typeof task.taskId !== 'string') return undefined;
  return {
    taskId: task.taskId,
    ...(typeof task.status === 'string' && { status: task.status }),
    ...(typeof task.pollIntervalMs === 'number' && { pollIntervalMs: task.pollIntervalMs }),
  };
}

/** Whether capabilities (a server's, or a request's client capabilities) declare the tasks extension. */
export function declaresTasksExtension(capabilities: object | undefined): boolean {
  const extensions = (capabilities as { extensions?: Record<string, unknown> } | undefined)?.extensions;
  return typeof extensions === 'object' && extensions !== null && extensions[UPSTREAM_TASKS_EXTENSION_ID] !== undefined;
}

/** The wait before the next `tasks/get`, in ms: the upstream's suggestion, bounded. */
export function pollDelayMs(suggested: unknown): number {
  if (typeof suggested !== 'number' || !Number.isFinite(suggested)) return UPSTREAM_POLL_DEFAULT_MS;
  return Math.min(UPSTREAM_POLL_MAX_MS, Math.max(UPSTREAM_POLL_MIN_MS, suggested));
}
