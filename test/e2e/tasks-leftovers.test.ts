/**
 * Issue 15 leftovers, end to end through the real CLI on stdio: the broker's own tools run as
 * tasks for a 2026-07-28 caller that declares the tasks extension (they are `optional`, as the
 * 2025-11-25 list says; a 2026-07-28 list carries no `execution`); a declined or rejected approval reads `failed` in both eras' MCP
 * status and in A2A, from the same row.
 */
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { ResultSchema } from '@modelcontextprotocol/core';
import { CLI, fixture, isAlive, nodeServer, readNdjson, spawnRawBroker, waitFor, writeConfig, type RecordLine } from './helpers.js';
import { runCli } from './broker-support.js';
import { http, MCP_POST_HEADERS, startHttpBroker } from '../transports/harness.js';

const TASKS = 'io.modelcontextprotocol/tasks';
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type Answer = Record<string, any>;
const conformance = () => ({ c: { command: 'node', args: [fixture('conformance-server.mjs'), '--legacy'] } });
const terminal = (t: Answer) => ['completed', 'failed', 'cancelled'].includes(t.status);

/** A 2026-07-28 caller on the CLI's raw stdio, declaring the tasks extension. */
function modern(servers: Record<string, unknown>, extra?: Record<string, unknown>) {
  const raw = spawnRawBroker({ servers, extra });
  cleanups.push(() => raw.close());
  const clientCapabilities = { elicitation: { form: {} }, extensions: { [TASKS]: {} } };
  let id = 0;
  const request = async (method: string, params: Record<string, unknown>): Promise<Answer> => {
    const _meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': clientCapabilities, 'io.modelcontextprotocol/clientInfo': { name: 'tasks-leftovers', version: '1.0.0' } };
    const answer = (await raw.request(++id, method, { ...params, _meta }, 30_000)) as Answer;
    if (answer.error) throw answer.error;
    return answer.result;
  };
  const poll = async (taskId: string, until: (t: Answer) => boolean): Promise<Answer> => {
    for (;;) {
      const task = await request('tasks/get', { taskId });
      if (until(task)) return task;
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return { raw, request, poll, records: () => readNdjson<RecordLine>(raw.recordsPath) };
}

/** A 2025-11-25 SDK client on the CLI's stdio (principal `local`); `c` to serve a config again. */
async function legacy(servers: Record<string, unknown>, extra: Record<string, unknown> = {}, again?: ReturnType<typeof writeConfig>) {
  const c = again ?? writeConfig(servers, extra);
  if (!again) cleanups.push(() => rmSync(c.dir, { recursive: true, force: true }));
  const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', c.configPath], env: process.env as Record<string, string>, cwd: c.dir, stderr: 'pipe' });
  const client = new Client({ name: 'tasks-leftovers', version: '1.0.0' });
  const notifications: Array<{ method: string; params: Record<string, any> }> = [];
  client.fallbackNotificationHandler = async (n) => void notifications.push({ method: n.method, params: n.params as Record<string, any> });
  await client.connect(transport, { timeout: 20_000 });
  cleanups.push(() => client.close().catch(() => undefined));
  const request = (method: string, params: Record<string, unknown>, timeout = 20_000) =>
    client.request({ method, params } as never, ResultSchema.loose(), { timeout }) as Promise<Answer>;
  return { ...c, client, notifications, request, pid: transport.pid! };
}

describe("the broker's own tools as tasks for a modern caller", () => {
  it('issue 15: broker__approvals_list (taskSupport optional, as ours are) runs as a task when the extension is declared: tasks/get completes with its result, one record', async () => {
    const b = modern(conformance());
    const created = await b.request('tools/call', { name: 'broker__approvals_list', arguments: {} });
    expect(created).toMatchObject({ resultType: 'task', status: 'working', _meta: { 'mcp-broker/a2a': 'working' } });
    const done = await b.poll(created.taskId, terminal);
    expect(done).toMatchObject({ status: 'completed', _meta: { 'mcp-broker/a2a': 'completed' }, result: { structuredContent: { approvals: [] } } });
    expect(b.records().filter((r) => r.name === 'broker__approvals_list').map((r) => r.outcome)).toEqual(['ok']);
  });
});

describe('a declined or rejected approval is failed in MCP and A2A alike', () => {
  it("issue 15: a modern task's approval declined by its caller reads failed (error -32603, statusMessage the reason), A2A failed", async () => {
    const b = modern(conformance(), { policy: { rules: [{ tools: ['c__slow_compute'], action: 'ask' }] } });
    const created = await b.request('tools/call', { name: 'c__slow_compute', arguments: { seconds: 0, label: 'declined' } });
    await b.poll(created.taskId, (t) => t.status === 'input_required');
    await b.request('tasks/update', { taskId: created.taskId, inputResponses: { 'mcp-broker/approval': { action: 'decline' } } });
    const done = await b.poll(created.taskId, terminal);
    expect(done).toMatchObject({
      status: 'failed',
      statusMessage: 'rejected by local: the caller answered decline',
      error: { code: -32603, message: 'rejected by local: the caller answered decline', data: { outcome: 'approval_required' } },
      _meta: { 'mcp-broker/a2a': 'failed' },
    });
    expect(done).not.toHaveProperty('result');
    expect(b.records().filter((r) => r.name === 'c__slow_compute').map((r) => r.outcome)).toEqual(['approval_required']);
  });

  it("a modern task's approval answered with an action of no known kind is rejected naming none of the caller's text (regression: 10,000 characters reached the row and the record)", async () => {
    const b = modern(conformance(), { policy: { rules: [{ tools: ['c__slow_compute'], action: 'ask' }] } });
    const created = await b.request('tools/call', { name: 'c__slow_compute', arguments: { seconds: 0, label: 'odd' } });
    await b.poll(created.taskId, (t) => t.status === 'input_required');
    await b.request('tasks/update', { taskId: created.taskId, inputResponses: { 'mcp-broker/approval': { action: 'x'.repeat(10_000) } } });
    const done = await b.poll(created.taskId, terminal);
    expect(done).toMatchObject({ status: 'failed', statusMessage: 'rejected by local: the caller answered no known action (not accept)' });
    const record = b.records().find((r) => r.name === 'c__slow_compute');
    expect(record?.outcome).toBe('approval_required');
    expect(JSON.stringify(record)).not.toContain('xxxxxxxxxx');
  });

  it('issue 15: a modern task rejected in the inbox (CLI) reads failed with the reason; a legacy task rejected so reads failed too, both A2A failed', async () => {
    const policy = { policy: { rules: [{ tools: ['c__slow_compute'], action: 'ask' }] } };
    const b = modern(conformance(), policy);
    const created = await b.request('tools/call', { name: 'c__slow_compute', arguments: { seconds: 0, label: 'rejected' } });
    await b.poll(created.taskId, (t) => t.status === 'input_required');
    const configPath = `${b.raw.dir}/servers.json`;
    expect((await runCli(['approvals', 'reject', created.taskId, '--config', configPath, '--reason', 'not today'])).code).toBe(0);
    const done = await b.poll(created.taskId, terminal);
    expect(done).toMatchObject({ status: 'failed', statusMessage: 'rejected by cli: not today', error: { message: 'rejected by cli: not today' }, _meta: { 'mcp-broker/a2a': 'failed' } });

    const s = await legacy(conformance(), policy);
    const task = (await s.request('tools/call', { name: 'c__slow_compute', arguments: { seconds: 0 }, task: {} })).task as Answer;
    await waitFor(async () => (await s.request('tasks/get', { taskId: task.taskId })).status === 'input_required', 'the legacy task to park');
    expect((await runCli(['approvals', 'reject', task.taskId, '--config', s.configPath, '--reason', 'not today'])).code).toBe(0);
    const got = await waitFor(async () => {
      const t = await s.request('tasks/get', { taskId: task.taskId });
      return t.status !== 'input_required' ? t : undefined;
    }, 'the legacy task to settle');
    expect(got).toMatchObject({ status: 'failed', statusMessage: 'rejected by cli: not today', _meta: { 'mcp-broker/a2a': 'failed' } });
  });
});

describe('a parked call settled with no call waiting on it leaves one record', () => {
  const park = { policy: { askMode: 'park', rules: [{ tools: ['c__slow_compute'], action: 'ask' }] } };
  const calls = (recordsPath: string) => readNdjson<RecordLine>(recordsPath).filter((r) => r.name === 'c__slow_compute').map((r) => [r.outcome, r.reason]);

  it('issue 15: a plain parked call whose caller cancelled, rejected with the CLI: one approval_required record with the reason', async () => {
    const s = await legacy(conformance(), park);
    const left = new AbortController();
    const call = s.client.callTool({ name: 'c__slow_compute', arguments: { seconds: 0 } }, { timeout: 60_000, signal: left.signal }).catch((e: unknown) => e);
    const parked = await waitFor(async () => {
      const r = (await s.client.callTool({ name: 'broker__approvals_list', arguments: {} })) as { structuredContent: { approvals: Array<{ id: string }> } };
      return r.structuredContent.approvals[0];
    }, 'the call to park');
    left.abort('the caller left');
    await call;
    await waitFor(async () => (await s.request('tasks/get', { taskId: parked.id })).status === 'input_required', 'the row to stay parked');
    expect(calls(s.recordsPath)).toEqual([]);
    expect((await runCli(['approvals', 'reject', parked.id, '--config', s.configPath, '--reason', 'not today'])).code).toBe(0);
    await waitFor(() => calls(s.recordsPath).length > 0, 'the record of the rejected call');
    await s.request('tasks/list', {});
    expect(calls(s.recordsPath)).toEqual([['approval_required', 'rejected by cli: not today']]);
  });

  it('issue 15: a task parked when its broker stopped, rejected with the CLI while none runs: the next broker writes its one record', async () => {
    const first = await legacy(conformance(), park);
    const task = (await first.request('tools/call', { name: 'c__slow_compute', arguments: { seconds: 0 }, task: {} })).task as Answer;
    await waitFor(async () => (await first.request('tasks/get', { taskId: task.taskId })).status === 'input_required', 'the task to park');
    process.kill(first.pid, 'SIGTERM');
    await waitFor(() => !isAlive(first.pid), 'the broker to exit');
    expect(calls(first.recordsPath)).toEqual([]);
    expect((await runCli(['approvals', 'reject', task.taskId, '--config', first.configPath, '--reason', 'no'])).code).toBe(0);
    const second = await legacy(conformance(), park, first);
    await waitFor(() => calls(first.recordsPath).length > 0, 'the record of the rejected task');
    expect(await second.request('tasks/get', { taskId: task.taskId })).toMatchObject({ status: 'failed', statusMessage: 'rejected by cli: no' });
    expect(calls(first.recordsPath)).toEqual([['approval_required', 'rejected by cli: no']]);
  });
});

describe('task status notifications on stdio (the tasks extension)', () => {
  it('issue 15: a modern stdio listen naming taskIds, alone or with other kinds, is acknowledged with its own tasks and gets notifications/tasks per change; -32021 without the extension', async () => {
    const b = modern(conformance());
    const created = await b.request('tools/call', { name: 'c__slow_compute', arguments: { seconds: 60 } });
    const taskId = created.taskId as string;
    const _meta = (extensions: Record<string, unknown>) => ({
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': { extensions },
      'io.modelcontextprotocol/clientInfo': { name: 'tasks-leftovers', version: '1.0.0' },
    });
    const listen = (id: string, notifications: Record<string, unknown>, extensions: Record<string, unknown> = { [TASKS]: {} }) =>
      b.raw.send({ jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { notifications, _meta: _meta(extensions) } });
    const acked = (id: string) =>
      b.raw.waitForMessage((m: Answer) => m.method === 'notifications/subscriptions/acknowledged' && m.params?._meta?.['io.modelcontextprotocol/subscriptionId'] === id, `the acknowledgement of ${id}`) as Promise<Answer>;

    listen('mixed', { taskIds: [taskId], toolsListChanged: true });
    expect((await acked('mixed')).params.notifications).toEqual({ toolsListChanged: true, taskIds: [taskId] });
    listen('only', { taskIds: [taskId, 'not-a-task'] });
    expect((await acked('only')).params.notifications).toEqual({ taskIds: [taskId] });
    listen('undeclared', { taskIds: [taskId] }, {});
    const refused = (await b.raw.waitForMessage((m: Answer) => m.id === 'undeclared', 'the refusal')) as Answer;
    expect(refused.error).toMatchObject({ code: -32021 });

    await b.request('tasks/cancel', { taskId });
    for (const id of ['mixed', 'only']) {
      const note = (await b.raw.waitForMessage(
        (m: Answer) => m.method === 'notifications/tasks' && m.params?._meta?.['io.modelcontextprotocol/subscriptionId'] === id && m.params.status === 'cancelled',
        `notifications/tasks on ${id}`,
      )) as Answer;
      expect(note).toMatchObject({ jsonrpc: '2.0', params: { taskId, status: 'cancelled', _meta: { 'mcp-broker/a2a': 'canceled' } } });
    }
  });
});

describe('task status notifications on a listen that also asks other kinds, over HTTP', () => {
  it('issue 15: a listen for taskIds with toolsListChanged, or with a kind the SDK does not serve, is acknowledged with the tasks and gets notifications/tasks; -32021 without the extension', async () => {
    const broker = await startHttpBroker({ servers: conformance() });
    cleanups.push(() => broker.close());
    const _meta = (extensions: Record<string, unknown>) => ({
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': { extensions },
      'io.modelcontextprotocol/clientInfo': { name: 'tasks-leftovers', version: '1' },
    });
    const headers = (method: string, name?: string) => ({ ...MCP_POST_HEADERS, 'mcp-protocol-version': '2026-07-28', 'mcp-method': method, ...(name !== undefined && { 'mcp-name': name }) });
    const post = (id: number, method: string, params: Record<string, unknown>, name?: string) =>
      http(`${broker.url}/mcp`, { headers: headers(method, name), body: { jsonrpc: '2.0', id, method, params: { ...params, _meta: _meta({ [TASKS]: {} }) } } });
    const created = await post(1, 'tools/call', { name: 'c__slow_compute', arguments: { seconds: 60 } }, 'c__slow_compute');
    const taskId = created.body.result.taskId as string;

    const listen = async (id: string, notifications: Record<string, unknown>, extensions: Record<string, unknown> = { [TASKS]: {} }) => {
      const controller = new AbortController();
      cleanups.push(() => controller.abort());
      const res = await fetch(`${broker.url}/mcp`, {
        method: 'POST',
        signal: controller.signal,
        headers: headers('subscriptions/listen'),
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { notifications, _meta: _meta(extensions) } }),
      });
      const messages: Answer[] = [];
      let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
      let buffered = '';
      const next = async (pred: (m: Answer) => boolean): Promise<Answer> => {
        for (;;) {
          const found = messages.find(pred);
          if (found) return found;
          const { value, done } = await (reader ??= res.body!.getReader()).read();
          if (done) throw new Error(`the listen stream ${id} ended`);
          buffered += new TextDecoder().decode(value);
          for (let i; (i = buffered.indexOf('\n\n')) >= 0; buffered = buffered.slice(i + 2)) {
            const data = buffered.slice(0, i).split('\n').find((l) => l.startsWith('data: '));
            if (data) messages.push(JSON.parse(data.slice(6)));
          }
        }
      };
      return { res, next };
    };
    const refused = await listen('undeclared', { taskIds: [taskId], toolsListChanged: true }, {});
    expect(refused.res.status).toBe(400);
    expect((await refused.res.json()).error.code).toBe(-32021);

    const tools = await listen('tools', { taskIds: [taskId, 'not-a-task'], toolsListChanged: true });
    const acked = (m: Answer) => m.method === 'notifications/subscriptions/acknowledged';
    expect((await tools.next(acked)).params.notifications).toEqual({ toolsListChanged: true, taskIds: [taskId] });
    const idle = await listen('idle', { taskIds: [taskId], 'example.com/other': true });
    expect((await idle.next(acked)).params.notifications).toEqual({ taskIds: [taskId] });

    await post(2, 'tasks/cancel', { taskId }, taskId);
    for (const [id, stream] of [['tools', tools], ['idle', idle]] as const) {
      const note = await stream.next((m) => m.method === 'notifications/tasks' && m.params.status === 'cancelled');
      expect(note.params).toMatchObject({ taskId, _meta: { 'io.modelcontextprotocol/subscriptionId': id, 'mcp-broker/a2a': 'canceled' } });
    }
  });
});
