/**
 * Following a 2026-07-28 upstream's own task from `callModern` (issue 15 §2), with the upstream
 * stood in for by a scripted `Client.request` (this tests the broker's side of the wire, not the
 * SDK): the caller is told once, `tasks/get` waits follow the upstream's pollIntervalMs bounded to
 * 50..5000 ms, an input_required poll is put to the caller and answered with `tasks/update`, a
 * failed task is its JSON-RPC error, and an abort sends `tasks/cancel`.
 */
import type { Client } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { callModern } from '../../src/upstream/modern-call.js';
import { UPSTREAM_POLL_DEFAULT_MS, UPSTREAM_POLL_MAX_MS, UPSTREAM_POLL_MIN_MS, UPSTREAM_TASK_KEY } from '../../src/upstream/upstream-task.js';
import type { UpstreamTaskStarted } from '../../src/upstream/types.js';

type Sent = { method: string; params: Record<string, unknown> };

/** A client whose answers are `script(method, params)`; every request it was sent is in `sent`. */
function scripted(script: (sent: Sent) => Record<string, unknown>) {
  const sent: Sent[] = [];
  const client = {
    request: async (req: Sent) => {
      sent.push(req);
      return script(req);
    },
  } as unknown as Client;
  return { client, sent };
}

const created = (pollIntervalMs?: number) => ({ resultType: 'complete', content: [], [UPSTREAM_TASK_KEY]: { taskId: 'up-1', status: 'working', ...(pollIntervalMs !== undefined && { pollIntervalMs }) } });
const params = { name: 'job', arguments: {} };

describe('callModern following an upstream task', () => {
  it('tells onUpstreamTask once, polls at the bounded interval, relays an input request with tasks/update, answers the result', async () => {
    const polls = [{ status: 'working', pollIntervalMs: 60_000 }, { status: 'input_required', inputRequests: { q: { method: 'elicitation/create', params: { message: 'Sure?' } } } }, { status: 'input_required', inputRequests: { q: { method: 'elicitation/create', params: { message: 'Sure?' } } } }, { status: 'completed', result: { content: [{ type: 'text', text: 'done' }] } }];
    const { client, sent } = scripted(({ method }) => (method === 'tools/call' ? created(1) : method === 'tasks/get' ? polls.shift()! : {}));
    const waits: number[] = [];
    const told: UpstreamTaskStarted[] = [];
    const asked: unknown[] = [];
    const result = await callModern(
      client,
      'u',
      'tools/call',
      params,
      {
        sleep: async (ms) => void waits.push(ms),
        onUpstreamTask: (task) => told.push(task),
        onServerRequest: async (request) => (asked.push(request), { action: 'accept', content: { ok: true } }),
      },
      10_000,
      undefined,
    );
    expect(result).toEqual({ content: [{ type: 'text', text: 'done' }] });
    expect(told).toEqual([{ taskId: 'up-1', status: 'working', pollIntervalMs: 1 }]);
    expect(waits).toEqual([UPSTREAM_POLL_MIN_MS, UPSTREAM_POLL_MAX_MS, UPSTREAM_POLL_MAX_MS, UPSTREAM_POLL_MAX_MS]);
    expect(asked).toEqual([{ method: 'elicitation/create', params: { message: 'Sure?' } }]);
    expect(sent.map((s) => s.method)).toEqual(['tools/call', 'tasks/get', 'tasks/get', 'tasks/update', 'tasks/get', 'tasks/get']);
    expect(sent.find((s) => s.method === 'tasks/update')!.params).toEqual({ taskId: 'up-1', inputResponses: { q: { action: 'accept', content: { ok: true } } } });
  });

  it('a failed upstream task rejects with its JSON-RPC error; no interval given polls at the default', async () => {
    const { client } = scripted(({ method }) => (method === 'tools/call' ? created() : { status: 'failed', error: { code: -32603, message: 'boom' } }));
    const waits: number[] = [];
    await expect(callModern(client, 'u', 'tools/call', params, { sleep: async (ms) => void waits.push(ms) }, 10_000, undefined)).rejects.toMatchObject({ code: -32603, message: expect.stringContaining('boom') });
    expect(waits).toEqual([UPSTREAM_POLL_DEFAULT_MS]);
  });

  it('aborting the call sends tasks/cancel for the upstream task and rejects', async () => {
    const { client, sent } = scripted(({ method }) => (method === 'tools/call' ? created() : { status: 'working' }));
    const controller = new AbortController();
    const sleep = (_ms: number, signal?: AbortSignal) =>
      new Promise<void>((_, reject) => {
        signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
        controller.abort(new Error('cancelled by the client'));
      });
    await expect(callModern(client, 'u', 'tools/call', params, { signal: controller.signal, sleep }, 10_000, undefined)).rejects.toThrow('cancelled by the client');
    expect(sent.filter((s) => s.method === 'tasks/cancel').map((s) => s.params)).toEqual([{ taskId: 'up-1' }]);
  });
});
