/**
 * The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`) end to end through the real
 * CLI (issue 15): an SDK v2 client in the modern era declaring the extension gets a task for
 * server-everything's `simulate-research-query` (taskSupport "required") and polls `tasks/get`
 * to its result; the same tool without the extension is -32021; an upstream's elicitation
 * during a task is the task's `input_required` with `inputRequests`, answered by `tasks/update`;
 * a parked approval is `input_required` with the broker's question; `tasks/cancel` reaches the
 * upstream; over HTTP `Mcp-Name` must be the task id and one principal cannot read another's task.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { fixture, nodeServer, npmServer, readNdjson, spawnRawBroker, type RecordLine } from './helpers.js';
import { http, MCP_POST_HEADERS, startHttpBroker } from '../transports/harness.js';

const TASKS = 'io.modelcontextprotocol/tasks';
const RESEARCH = 'everything__simulate-research-query';
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type Answer = Record<string, any>;

/**
 * A 2026-07-28 caller on the CLI's raw stdio (the SDK v2 client refuses a `resultType: "task"`
 * answer to `tools/call`: it does not implement the extension), declaring the tasks extension
 * unless `tasks: false`. `request` answers the result, or rejects with the JSON-RPC error.
 */
function modern(servers: Record<string, unknown>, options: { tasks?: boolean; extra?: Record<string, unknown> } = {}) {
  const raw = spawnRawBroker({ servers, extra: options.extra });
  cleanups.push(() => raw.close());
  const clientCapabilities = { elicitation: { form: {} }, ...(options.tasks !== false && { extensions: { [TASKS]: {} } }) };
  let id = 0;
  const request = async (method: string, params: Record<string, unknown>): Promise<Answer> => {
    const _meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': clientCapabilities, 'io.modelcontextprotocol/clientInfo': { name: 'modern-tasks', version: '1.0.0' } };
    const answer = (await raw.request(++id, method, { ...params, _meta }, 30_000)) as Answer;
    if (answer.error) throw answer.error;
    return answer.result;
  };
  /** Polls `tasks/get` until `until` holds of the task (at the broker's suggested interval). */
  const poll = async (taskId: string, until: (t: Answer) => boolean): Promise<Answer> => {
    for (;;) {
      const task = await request('tasks/get', { taskId });
      if (until(task)) return task;
      await new Promise((r) => setTimeout(r, Math.min(task.pollIntervalMs ?? 100, 200)));
    }
  };
  return { request, poll, records: () => readNdjson<RecordLine>(raw.recordsPath) };
}

const terminal = (t: Answer) => ['completed', 'failed', 'cancelled'].includes(t.status);

describe('tasks extension (2026-07-28) through the broker', () => {
  it('simulate-research-query runs as a task for a modern client: resultType task, tasks/get to completed with the result, one record', async () => {
    const b = modern({ everything: nodeServer(npmServer('server-everything')) });
    const { capabilities: caps } = await b.request('server/discover', {});
    expect(caps.extensions?.[TASKS]).toEqual({});
    expect(caps.tasks).toBeUndefined();

    const created = await b.request('tools/call', { name: RESEARCH, arguments: { topic: 'tides' } });
    expect(created).toMatchObject({ resultType: 'task', status: 'working', ttlMs: expect.any(Number), pollIntervalMs: 1000 });
    expect(created._meta['mcp-broker/a2a']).toBe('working');
    expect(created).not.toHaveProperty('task');
    const taskId = created.taskId as string;
    const done = await b.poll(taskId, terminal);
    expect(done).toMatchObject({ taskId, status: 'completed', resultType: 'complete', _meta: { 'mcp-broker/a2a': 'completed' } });
    expect(done.result.content[0].text).toContain('# Research Report: tides');
    expect(done.result._meta?.['io.modelcontextprotocol/related-task']).toBeUndefined();
    expect(b.records().filter((r) => r.name === RESEARCH).map((r) => [r.outcome, r.sessionId])).toEqual([['ok', null]]);
    // The 2025-11-25 methods are not served to a modern caller.
    await expect(b.request('tasks/list', {})).rejects.toMatchObject({ code: -32601 });
  });

  it('a tool that requires tasks, called without the extension, is -32021 naming it; tasks/get without it is -32021 too', async () => {
    const b = modern({ everything: nodeServer(npmServer('server-everything')) }, { tasks: false });
    await expect(b.request('tools/call', { name: RESEARCH, arguments: { topic: 'tides' } })).rejects.toMatchObject({
      code: -32021,
      data: { requiredCapabilities: { extensions: { [TASKS]: {} } } },
    });
    await expect(b.request('tasks/get', { taskId: 'nope' })).rejects.toMatchObject({ code: -32021 });
    // An optional one runs as a plain call.
    const plain = await b.request('tools/call', { name: 'everything__echo', arguments: { message: 'hi' } });
    expect(plain).not.toHaveProperty('taskId');
  });

  it("an upstream's elicitations during a task are its input_required inputRequests; tasks/update answers them one by one", async () => {
    const b = modern({ c: { command: 'node', args: [fixture('conformance-server.mjs'), '--legacy'] } });
    const created = await b.request('tools/call', { name: 'c__multi_input', arguments: {} });
    const taskId = created.taskId as string;
    const asking = await b.poll(taskId, (t) => Object.keys(t.inputRequests ?? {}).length === 2);
    expect(asking.status).toBe('input_required');
    const [first, second] = Object.keys(asking.inputRequests);
    expect(asking.inputRequests[first!]).toMatchObject({ method: 'elicitation/create', params: { message: expect.any(String) } });
    expect(await b.request('tasks/update', { taskId, inputResponses: { [first!]: { action: 'accept', content: { name: 'one' } }, stale: { action: 'accept' } } })).toEqual(
      expect.objectContaining({ resultType: 'complete' }),
    );
    const half = await b.request('tasks/get', { taskId });
    expect(half.status).toBe('input_required');
    expect(Object.keys(half.inputRequests)).toEqual([second]);
    await b.request('tasks/update', { taskId, inputResponses: { [second!]: { action: 'accept', content: { name: 'two' } } } });
    const done = await b.poll(taskId, terminal);
    expect(done).toMatchObject({ status: 'completed', result: { content: [{ type: 'text', text: expect.stringMatching(/one.*two|two.*one/) }] } });
  });

  it('a protocol error upstream is failed with a JSON-RPC error; a tool error is completed with isError; tasks/cancel settles cancelled', async () => {
    const b = modern({ c: { command: 'node', args: [fixture('conformance-server.mjs'), '--legacy'] } });
    const faulted = await b.poll((await b.request('tools/call', { name: 'c__protocol_error_job', arguments: {} })).taskId, terminal);
    expect(faulted).toMatchObject({ status: 'failed', error: { code: -32603, message: expect.any(String) }, _meta: { 'mcp-broker/a2a': 'failed' } });
    expect(faulted).not.toHaveProperty('result');
    const failing = await b.poll((await b.request('tools/call', { name: 'c__failing_job', arguments: {} })).taskId, terminal);
    expect(failing).toMatchObject({ status: 'completed', result: { isError: true } });

    const slow = await b.request('tools/call', { name: 'c__slow_compute', arguments: { seconds: 60 } });
    const ack = await b.request('tasks/cancel', { taskId: slow.taskId });
    expect(Object.keys(ack).filter((k) => k !== '_meta')).toEqual(['resultType']);
    const cancelled = await b.poll(slow.taskId, terminal);
    expect(cancelled).toMatchObject({ status: 'cancelled', _meta: { 'mcp-broker/a2a': 'canceled' } });
    expect(await b.request('tasks/cancel', { taskId: slow.taskId })).toMatchObject({ resultType: 'complete' });
    await expect(b.request('tasks/get', { taskId: 'not-a-task' })).rejects.toMatchObject({ code: -32602 });
  });

  it("a task's ask parks it: input_required with the broker's approval question; the caller's accept runs the call", async () => {
    const b = modern(
      { c: { command: 'node', args: [fixture('conformance-server.mjs'), '--legacy'] } },
      { extra: { policy: { rules: [{ tools: ['c__slow_compute'], action: 'ask' }] } } },
    );
    const created = await b.request('tools/call', { name: 'c__slow_compute', arguments: { seconds: 0, label: 'parked' } });
    const parked = await b.poll(created.taskId, (t) => t.status !== 'working');
    expect(parked).toMatchObject({ status: 'input_required', _meta: { 'mcp-broker/a2a': 'input-required' } });
    expect(parked.inputRequests['mcp-broker/approval']).toMatchObject({ method: 'elicitation/create' });
    await b.request('tasks/update', { taskId: created.taskId, inputResponses: { 'mcp-broker/approval': { action: 'accept', content: {} } } });
    const done = await b.poll(created.taskId, terminal);
    expect(done).toMatchObject({ status: 'completed', result: { content: [{ type: 'text', text: expect.stringContaining('computed parked') }] } });
  });

  it('under policy.askMode "park" a parked task offers its caller no approval question and ignores an answer to it: only the inbox decides (regression: the caller could approve its own call)', async () => {
    const b = modern(
      { c: { command: 'node', args: [fixture('conformance-server.mjs'), '--legacy'] } },
      { extra: { policy: { askMode: 'park', rules: [{ tools: ['c__slow_compute'], action: 'ask' }] } } },
    );
    const created = await b.request('tools/call', { name: 'c__slow_compute', arguments: { seconds: 0, label: 'parked' } });
    const parked = await b.poll(created.taskId, (t) => (t.statusMessage ?? '').includes('waiting for approval') || t.status !== 'working');
    expect(parked.status).toBe('working');
    expect(parked.inputRequests).toBeUndefined();
    expect(parked.statusMessage).toContain('waiting for approval');
    await b.request('tasks/update', { taskId: created.taskId, inputResponses: { 'mcp-broker/approval': { action: 'accept', content: {} } } });
    const after = await b.request('tasks/get', { taskId: created.taskId });
    expect(after).toMatchObject({ status: 'working', statusMessage: expect.stringContaining('waiting for approval') });
    expect(after.result).toBeUndefined();
  });

  it("over HTTP: Mcp-Name must be the task id (-32020, 400); another principal's task id is unknown to it (-32602); subscriptions/listen taskIds acknowledges the owner's and notifies each change (-32021 without the extension)", async () => {
    const tokens = { alice: 'alice-token-0123456789', bob: 'bob-token-0123456789ab' };
    const broker = await startHttpBroker({
      servers: { c: { command: 'node', args: [fixture('conformance-server.mjs'), '--legacy'] } },
      extra: { principals: { alice: { token: tokens.alice }, bob: { token: tokens.bob } } },
    });
    cleanups.push(() => broker.close());
    let id = 0;
    const post = (who: keyof typeof tokens, method: string, params: Record<string, unknown>, name?: string) =>
      http(`${broker.url}/mcp`, {
        headers: {
          ...MCP_POST_HEADERS,
          authorization: `Bearer ${tokens[who]}`,
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': method,
          ...(name !== undefined && { 'mcp-name': name }),
        },
        body: {
          jsonrpc: '2.0',
          id: ++id,
          method,
          params: {
            ...params,
            _meta: {
              'io.modelcontextprotocol/protocolVersion': '2026-07-28',
              'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } },
              'io.modelcontextprotocol/clientInfo': { name: 'http-tasks', version: '1' },
            },
          },
        },
      });
    const created = await post('alice', 'tools/call', { name: 'c__slow_compute', arguments: { seconds: 60 } }, 'c__slow_compute');
    expect(created.status).toBe(200);
    const taskId = created.body.result.taskId as string;
    expect(created.body.result.resultType).toBe('task');

    const got = await post('alice', 'tasks/get', { taskId }, taskId);
    expect(got.status).toBe(200);
    expect(got.body.result).toMatchObject({ taskId, status: 'working' });
    const wrongName = await post('alice', 'tasks/get', { taskId }, 'another-task');
    expect(wrongName.status).toBe(400);
    expect(wrongName.body.error.code).toBe(-32020);

    const foreign = await post('bob', 'tasks/get', { taskId }, taskId);
    expect(foreign.body.error).toMatchObject({ code: -32602 });
    expect((await post('bob', 'tasks/cancel', { taskId }, taskId)).body.error).toMatchObject({ code: -32602 });
    expect((await post('alice', 'tasks/get', { taskId }, taskId)).body.result.status).toBe('working');

    // Status notifications on subscriptions/listen: the owner's ids are acknowledged, each change is a notifications/tasks.
    const listen = async (who: keyof typeof tokens, extensions: Record<string, unknown>) => {
      const controller = new AbortController();
      cleanups.push(() => controller.abort());
      const res = await fetch(`${broker.url}/mcp`, {
        method: 'POST',
        signal: controller.signal,
        headers: { ...MCP_POST_HEADERS, authorization: `Bearer ${tokens[who]}`, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: `listen-${who}`,
          method: 'subscriptions/listen',
          params: {
            notifications: { taskIds: [taskId] },
            _meta: {
              'io.modelcontextprotocol/protocolVersion': '2026-07-28',
              'io.modelcontextprotocol/clientCapabilities': { extensions },
              'io.modelcontextprotocol/clientInfo': { name: 'http-tasks', version: '1' },
            },
          },
        }),
      });
      const messages: Answer[] = [];
      let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
      let buffered = '';
      const next = async (pred: (m: Answer) => boolean): Promise<Answer> => {
        for (;;) {
          const found = messages.find(pred);
          if (found) return found;
          const { value, done } = await (reader ??= res.body!.getReader()).read();
          if (done) throw new Error('the listen stream ended');
          buffered += new TextDecoder().decode(value);
          for (let i; (i = buffered.indexOf('\n\n')) >= 0; buffered = buffered.slice(i + 2)) {
            const data = buffered.slice(0, i).split('\n').find((l) => l.startsWith('data: '));
            if (data) messages.push(JSON.parse(data.slice(6)));
          }
        }
      };
      return { res, next };
    };
    const refused = await listen('alice', {});
    expect(refused.res.status).toBe(400);
    expect((await refused.res.json()).error.code).toBe(-32021);
    const bobs = await listen('bob', { [TASKS]: {} });
    expect((await bobs.next((m) => m.method === 'notifications/subscriptions/acknowledged')).params.notifications).toEqual({ taskIds: [] });
    const alices = await listen('alice', { [TASKS]: {} });
    const ack = await alices.next((m) => m.method === 'notifications/subscriptions/acknowledged');
    expect(ack.params).toMatchObject({ notifications: { taskIds: [taskId] }, _meta: { 'io.modelcontextprotocol/subscriptionId': 'listen-alice' } });

    expect((await post('alice', 'tasks/cancel', { taskId }, taskId)).body.result).toMatchObject({ resultType: 'complete' });
    expect((await post('alice', 'tasks/get', { taskId }, taskId)).body.result.status).toBe('cancelled');
    const note = await alices.next((m) => m.method === 'notifications/tasks' && m.params.status === 'cancelled');
    expect(note.params).toMatchObject({ taskId, _meta: { 'io.modelcontextprotocol/subscriptionId': 'listen-alice', 'mcp-broker/a2a': 'canceled' } });
  });
});
