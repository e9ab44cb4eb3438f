/**
 * A 2026-07-28 upstream's own tasks (server-directed, `io.modelcontextprotocol/tasks`) through the
 * real CLI (issue 15 §2): the conformance fixture in its modern mode answers its task tools with a
 * `CreateTaskResult` when the request offers the extension. A modern caller declaring the
 * extension gets a broker task (the broker's id, never the upstream's) only when the upstream
 * answers with a task: its status, input requests and cancel follow the upstream's task; a plain
 * tool stays a plain call, and a first `input_required` round (tasks-mrtr-composition) is relayed
 * before the task exists. A legacy caller's call waits on the upstream task and answers its
 * result, or is a legacy broker task when it asks for one.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ResultSchema } from '@modelcontextprotocol/core';
import { fixture, readNdjson, spawnRawBroker, startBroker, waitFor, type RecordLine } from './helpers.js';
import { connectHttp, startHttpBroker } from '../transports/harness.js';

const TASKS = 'io.modelcontextprotocol/tasks';
const MODERN_FIXTURE = { c: { command: 'node', args: [fixture('conformance-server.mjs')] } };
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type Answer = Record<string, any>;

/** A task id known once the created task's answer is read; a question may come in the same read, first. */
function idOnceCreated() {
  let resolve!: (id: string) => void;
  const promise = new Promise<string>((r) => (resolve = r));
  return { promise, resolve };
}

/** A 2026-07-28 caller declaring the tasks extension, on the CLI's raw stdio. */
function modern() {
  const raw = spawnRawBroker({ servers: MODERN_FIXTURE });
  cleanups.push(() => raw.close());
  let id = 0;
  const request = async (method: string, params: Record<string, unknown>): Promise<Answer> => {
    const _meta = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} }, extensions: { [TASKS]: {} } },
      'io.modelcontextprotocol/clientInfo': { name: 'tasks-upstream', version: '1.0.0' },
    };
    const answer = (await raw.request(++id, method, { ...params, _meta }, 30_000)) as Answer;
    if (answer.error) throw answer.error;
    return answer.result;
  };
  const poll = async (taskId: string, until: (t: Answer) => boolean): Promise<Answer> =>
    waitFor(async () => {
      const task = await request('tasks/get', { taskId });
      return until(task) ? task : undefined;
    }, `task ${taskId}`, 20_000, 50);
  return { request, poll, records: () => readNdjson<RecordLine>(raw.recordsPath) };
}

const terminal = (t: Answer) => ['completed', 'failed', 'cancelled'].includes(t.status);

describe("a modern upstream's tasks through the broker", () => {
  it("a modern caller's call becomes a broker task following the upstream's: input_required relayed, tasks/update forwarded, one record", async () => {
    const b = modern();
    const created = await b.request('tools/call', { name: 'c__confirm_delete', arguments: { filename: 'notes.txt' } });
    expect(created).toMatchObject({ resultType: 'task', status: 'working' });
    const taskId = created.taskId as string;
    expect(taskId).not.toMatch(/fixture-modern-task/);
    const asking = await b.poll(taskId, (t) => t.status === 'input_required');
    const [key] = Object.keys(asking.inputRequests);
    expect(asking.inputRequests[key!]).toMatchObject({ method: 'elicitation/create', params: { message: 'Delete notes.txt?' } });
    await b.request('tasks/update', { taskId, inputResponses: { [key!]: { action: 'accept', content: { confirm: true } } } });
    const done = await b.poll(taskId, terminal);
    expect(done).toMatchObject({ taskId, status: 'completed', result: { content: [{ type: 'text', text: 'deleted notes.txt' }] } });
    expect(b.records().filter((r) => r.name === 'c__confirm_delete').map((r) => r.outcome)).toEqual(['ok']);
  });

  it("tasks/cancel of the broker task reaches the upstream's task (tasks/cancel upstream)", async () => {
    const b = modern();
    const slow = await b.request('tools/call', { name: 'c__slow_compute', arguments: { seconds: 60 } });
    await b.poll(slow.taskId, (t) => t.status === 'working');
    await b.request('tasks/cancel', { taskId: slow.taskId });
    expect(await b.poll(slow.taskId, terminal)).toMatchObject({ status: 'cancelled' });
    const stopped = await waitFor(async () => {
      const answer = await b.request('tools/call', { name: 'c__task_cancellations', arguments: {} });
      const ids = JSON.parse(answer.content[0].text) as string[];
      return ids.length ? ids : undefined;
    }, 'the upstream task cancelled', 10_000, 50);
    expect(stopped).toEqual([expect.stringMatching(/^fixture-modern-task-/)]);
  });

  it('a plain tool of an upstream with tasks is answered plainly to a modern caller declaring the extension (no broker task)', async () => {
    const b = modern();
    const answer = await b.request('tools/call', { name: 'c__greet', arguments: { name: 'Ada' } });
    expect(answer.resultType).not.toBe('task');
    expect(answer.taskId).toBeUndefined();
    expect(answer.content).toEqual([{ type: 'text', text: 'Hello, Ada!' }]);
  });

  it('tasks-mrtr-composition: a required tool asks first as a plain input_required round; the retry is answered with a broker task carrying the answer', async () => {
    const b = modern();
    const first = await b.request('tools/call', { name: 'c__test_tool_with_task', arguments: {} });
    expect(first.resultType).toBe('input_required');
    expect(first.taskId).toBeUndefined();
    const [key] = Object.keys(first.inputRequests);
    const second = await b.request('tools/call', {
      name: 'c__test_tool_with_task',
      arguments: {},
      inputResponses: { [key!]: { action: 'accept', content: { name: 'Alice' } } },
      ...(first.requestState !== undefined && { requestState: first.requestState }),
    });
    expect(second).toMatchObject({ resultType: 'task', status: 'working' });
    expect(second).not.toHaveProperty('requestState');
    expect(second).not.toHaveProperty('inputRequests');
    expect(second.taskId).not.toMatch(/fixture-modern-task/);
    const done = await b.poll(second.taskId, terminal);
    expect(done).toMatchObject({ status: 'completed', result: { content: [{ type: 'text', text: 'Hello, Alice!' }] } });
    expect(b.records().filter((r) => r.name === 'c__test_tool_with_task').map((r) => r.outcome)).toEqual(['ok', 'ok']);
  });

  it("a legacy caller's task-augmented call is a legacy broker task following the upstream's task to its result", async () => {
    const b = await startBroker({ servers: MODERN_FIXTURE, capabilities: { elicitation: {} } });
    cleanups.push(() => b.close());
    const listed = await b.client.listTools();
    // The 2026-07-28 era lists no execution.taskSupport: any tool of an upstream with tasks may be one.
    expect(listed.tools.find((t) => t.name === 'c__greet')?.execution).toEqual({ taskSupport: 'optional' });
    const loose = ResultSchema.loose();
    const created = (await b.client.request({ method: 'tools/call', params: { name: 'c__slow_compute', arguments: { seconds: 0, label: 'tasked' }, task: {} } } as never, loose)) as Answer;
    const taskId = created.task.taskId as string;
    expect(taskId).not.toMatch(/fixture-modern-task/);
    const result = (await b.client.request({ method: 'tasks/result', params: { taskId } } as never, loose, { timeout: 20_000 })) as Answer;
    expect(result.content).toEqual([{ type: 'text', text: 'computed tasked after 0 s' }]);
  });

  it("a legacy caller's task-augmented call whose upstream task asks for input: input_required, the question reaches the session tagged with the task, the answer goes upstream, one record", async () => {
    const b = await startBroker({ servers: MODERN_FIXTURE, capabilities: { elicitation: {} } });
    cleanups.push(() => b.close());
    const loose = ResultSchema.loose();
    const req = (method: string, params: Record<string, unknown>) => b.client.request({ method, params } as never, loose, { timeout: 20_000 }) as Promise<Answer>;
    // The question can arrive in the same read as the created task, before the id is ours: wait for it.
    const known = idOnceCreated();
    const asked: Array<{ message: unknown; related: unknown; status: unknown }> = [];
    b.client.setRequestHandler('elicitation/create', async (r) => {
      // While the question waits, the task reads input_required.
      const task = await req('tasks/get', { taskId: await known.promise });
      asked.push({ message: r.params.message, related: (r.params._meta as Answer | undefined)?.['io.modelcontextprotocol/related-task'], status: [task.status, task._meta['mcp-broker/a2a']] });
      return { action: 'accept', content: { name: 'Ada' } };
    });
    const created = await req('tools/call', { name: 'c__test_tool_with_task', arguments: {}, task: {} });
    const taskId = created.task.taskId as string;
    known.resolve(taskId);
    const result = await req('tasks/result', { taskId });
    expect(result.content).toEqual([{ type: 'text', text: 'Hello, Ada!' }]);
    expect(asked).toEqual([{ message: 'What is your name?', related: { taskId }, status: ['input_required', 'input-required'] }]);
    const statuses = b.notifications.filter((n) => n.method === 'notifications/tasks/status' && n.params?.taskId === taskId).map((n) => n.params!.status);
    expect(statuses).toContain('input_required');
    expect(statuses.at(-1)).toBe('completed');
    expect(statuses.indexOf('input_required')).toBeLessThan(statuses.lastIndexOf('working'));
    expect((await req('tasks/get', { taskId })).status).toBe('completed');
    const records = await waitFor(async () => {
      const r = (await b.records()).filter((x: RecordLine) => x.name === 'c__test_tool_with_task');
      return r.length ? r : undefined;
    }, 'the record');
    expect(records.map((r: RecordLine) => r.outcome)).toEqual(['ok']);
  });

  it("over HTTP: a legacy broker task asking its caller, whose session then ends, stays input_required until it is cancelled", async () => {
    const broker = await startHttpBroker({ servers: MODERN_FIXTURE });
    cleanups.push(broker.close);
    const loose = ResultSchema.loose();
    const a = await connectHttp(broker.url, 'streamable', { capabilities: { elicitation: {} } });
    let related: unknown;
    const asked = new Promise<void>((resolve) =>
      a.client.setRequestHandler('elicitation/create', (r) => {
        related = (r.params._meta as Answer | undefined)?.['io.modelcontextprotocol/related-task'];
        resolve();
        return new Promise(() => undefined); // never answered: the caller goes away
      }),
    );
    const created = (await a.client.request({ method: 'tools/call', params: { name: 'c__test_tool_with_task', arguments: {}, task: {} } } as never, loose)) as Answer;
    const taskId = created.task.taskId as string;
    await asked;
    expect(related).toEqual({ taskId });
    await a.close();
    const b = await connectHttp(broker.url, 'streamable');
    cleanups.push(b.close);
    const req = (method: string, params: Record<string, unknown>) => b.client.request({ method, params } as never, loose, { timeout: 20_000 }) as Promise<Answer>;
    expect(await req('tasks/get', { taskId })).toMatchObject({ status: 'input_required', _meta: { 'mcp-broker/a2a': 'input-required' } });
    await req('tasks/list', {});
    expect((await req('tasks/get', { taskId })).status).toBe('input_required');
    expect((await req('tasks/cancel', { taskId })).status).toBe('cancelled');
    expect((await req('tasks/result', { taskId })).isError).toBe(true);
  });

  it('the same for a legacy broker task on a 2025-11-25 upstream: its call asking (confirm_delete) reaches the caller tagged with the broker task', async () => {
    const b = await startBroker({ servers: { c: { command: 'node', args: [fixture('conformance-server.mjs'), '--legacy'] } }, capabilities: { elicitation: {} } });
    cleanups.push(() => b.close());
    const loose = ResultSchema.loose();
    const req = (method: string, params: Record<string, unknown>) => b.client.request({ method, params } as never, loose, { timeout: 20_000 }) as Promise<Answer>;
    const known = idOnceCreated(); // as above: the question may come before the id is ours
    const asked: Array<{ related: unknown; status: unknown }> = [];
    b.client.setRequestHandler('elicitation/create', async (r) => {
      asked.push({ related: (r.params._meta as Answer | undefined)?.['io.modelcontextprotocol/related-task'], status: (await req('tasks/get', { taskId: await known.promise })).status });
      return { action: 'accept', content: { confirm: true } };
    });
    const created = await req('tools/call', { name: 'c__confirm_delete', arguments: { filename: 'a.txt' }, task: {} });
    const taskId = created.task.taskId as string;
    known.resolve(taskId);
    expect((await req('tasks/result', { taskId })).content).toEqual([{ type: 'text', text: 'deleted a.txt' }]);
    expect(asked).toEqual([{ related: { taskId }, status: 'input_required' }]);
  });

  it("a legacy caller's call waits on the upstream task and answers its result; its input requests go to the caller live", async () => {
    const b = await startBroker({ servers: MODERN_FIXTURE, capabilities: { elicitation: {} } });
    cleanups.push(() => b.close());
    const asked: string[] = [];
    b.client.setRequestHandler('elicitation/create', async (req) => {
      asked.push(req.params.message);
      return { action: 'accept', content: { name: 'Ada' } };
    });
    const plain = (await b.client.callTool({ name: 'c__slow_compute', arguments: { seconds: 0, label: 'legacy' } })) as Answer;
    expect(plain.content[0].text).toBe('computed legacy after 0 s');
    const named = (await b.client.callTool({ name: 'c__test_tool_with_task', arguments: {} })) as Answer;
    expect(named.content[0].text).toBe('Hello, Ada!');
    expect(asked).toEqual(['What is your name?']);
  });
});
