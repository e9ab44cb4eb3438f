/**
 * Durable tasks end to end through the real CLI (issue 15): a legacy (2025-11-25) client runs
 * server-everything's `simulate-research-query` (taskSupport "required") as a task; a broker
 * killed with SIGKILL during a running task reports it killed (MCP failed, A2A failed) after a
 * restart; a call parked on an `ask` (policy.askMode "park") and approved with
 * `mcp-broker approvals approve` after a restart completes; one principal cannot see another's
 * tasks over HTTP.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { ResultSchema } from '@modelcontextprotocol/core';
import { CLI, fixture, isAlive, nodeServer, npmServer, readNdjson, waitFor, writeConfig, type RecordLine, type SeenNotification } from './helpers.js';
import { runCli } from './broker-support.js';
import { SqliteStore } from '../../src/store/index.js';
import { connectHttp, http, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const RESEARCH = 'everything__simulate-research-query';
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Served {
  client: Client;
  pid: number;
  notifications: SeenNotification[];
  stderr(): string;
  close(): Promise<void>;
}

/** Serves `configPath` on stdio with an SDK client connected (the caller is principal `local`). */
async function serve(configPath: string, dir: string): Promise<Served> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], env: process.env as Record<string, string>, cwd: dir, stderr: 'pipe' });
  let err = '';
  transport.stderr?.on('data', (c: Buffer) => (err += c.toString('utf8')));
  const client = new Client({ name: 'legacy-e2e', version: '1.0.0' });
  const notifications: SeenNotification[] = [];
  client.fallbackNotificationHandler = async (n) => void notifications.push({ method: n.method, params: n.params as Record<string, unknown> });
  await client.connect(transport, { timeout: 20_000 });
  const served = { client, pid: transport.pid!, notifications, stderr: () => err, close: () => client.close().catch(() => undefined) };
  cleanups.push(served.close);
  return served;
}

const request = (s: Served, method: string, params: Record<string, unknown>, timeout = 20_000) =>
  s.client.request({ method, params } as never, ResultSchema.loose(), { timeout }) as Promise<Record<string, any>>;

function configFor(servers: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const c = writeConfig(servers, extra);
  cleanups.push(() => rmSync(c.dir, { recursive: true, force: true }));
  return c;
}

describe('tasks (2025-11-25) through the broker', () => {
  it('simulate-research-query (taskSupport required) runs as a task for a legacy client: working, status notified, tasks/result, one record', async () => {
    const { dir, configPath, recordsPath } = configFor({ everything: nodeServer(npmServer('server-everything')) });
    const s = await serve(configPath, dir);
    expect(s.client.getServerCapabilities()?.tasks).toEqual({ list: {}, cancel: {}, requests: { tools: { call: {} } } });
    const listed = (await s.client.listTools()).tools;
    expect(listed.find((t) => t.name === RESEARCH)?.execution?.taskSupport).toBe('required');
    expect(listed.find((t) => t.name === 'broker__reconnect')?.execution?.taskSupport).toBe('optional');

    const created = await request(s, 'tools/call', { name: RESEARCH, arguments: { topic: 'tides' }, task: { ttl: 60_000 } });
    expect(created.task).toMatchObject({ status: 'working', ttl: 60_000 });
    expect(created._meta['mcp-broker/a2a']).toBe('working');
    const taskId = created.task.taskId as string;
    expect(await request(s, 'tasks/get', { taskId })).toMatchObject({ taskId, status: 'working', _meta: { 'mcp-broker/a2a': 'working' } });

    const result = await request(s, 'tasks/result', { taskId }, 30_000);
    expect(result.content[0].text).toContain('# Research Report: tides');
    expect(result._meta).toMatchObject({ 'io.modelcontextprotocol/related-task': { taskId }, 'mcp-broker/outcome': 'ok', 'mcp-broker/a2a': 'completed' });
    expect(await request(s, 'tasks/get', { taskId })).toMatchObject({ status: 'completed', _meta: { 'mcp-broker/a2a': 'completed' } });
    await waitFor(() => s.notifications.some((n) => n.method === 'notifications/tasks/status' && n.params?.taskId === taskId && n.params?.status === 'completed'), 'the completed status notification');
    expect((await request(s, 'tasks/list', {})).tasks.map((t: { taskId: string }) => t.taskId)).toEqual([taskId]);

    const records = readNdjson<RecordLine>(recordsPath).filter((r) => r.name === RESEARCH);
    expect(records.map((r) => [r.subject, r.outcome])).toEqual([['everything/simulate-research-query', 'ok']]);
  });

  it('tasks/cancel: the task is cancelled (A2A canceled) before the answer, the call records cancelled; a second cancel is -32602', async () => {
    const { dir, configPath, recordsPath } = configFor({ everything: nodeServer(npmServer('server-everything')) });
    const s = await serve(configPath, dir);
    const created = await request(s, 'tools/call', { name: RESEARCH, arguments: { topic: 'x' }, task: {} });
    const taskId = created.task.taskId as string;
    expect(await request(s, 'tasks/cancel', { taskId })).toMatchObject({ taskId, status: 'cancelled', _meta: { 'mcp-broker/a2a': 'canceled' } });
    await expect(request(s, 'tasks/cancel', { taskId })).rejects.toMatchObject({ code: -32602 });
    await waitFor(() => readNdjson<RecordLine>(recordsPath).find((r) => r.name === RESEARCH), 'the call record');
    expect(readNdjson<RecordLine>(recordsPath).filter((r) => r.name === RESEARCH).map((r) => r.outcome)).toEqual(['cancelled']);
    expect(await request(s, 'tasks/get', { taskId })).toMatchObject({ status: 'cancelled' });
    await expect(request(s, 'tasks/get', { taskId: 'no-such-task' })).rejects.toMatchObject({ code: -32602 });
  });

  it('a task call of a tool without task support is -32601', async () => {
    const { dir, configPath } = configFor({ u: nodeServer(fixture('echo.mjs')) });
    const s = await serve(configPath, dir);
    await expect(request(s, 'tools/call', { name: 'u__echo', arguments: { text: 'x' }, task: {} })).rejects.toMatchObject({ code: -32601 });
  });

  it('SIGKILL during a running task: after a restart it is killed by system (MCP failed, A2A failed), never completed', async () => {
    const { dir, configPath, recordsPath } = configFor({ everything: nodeServer(npmServer('server-everything')) });
    const first = await serve(configPath, dir);
    const created = await request(first, 'tools/call', { name: RESEARCH, arguments: { topic: 'x' }, task: {} });
    const taskId = created.task.taskId as string;
    process.kill(first.pid, 'SIGKILL');
    await waitFor(() => !isAlive(first.pid), 'the broker to die');

    const second = await serve(configPath, dir);
    const task = await request(second, 'tasks/get', { taskId });
    expect(task).toMatchObject({ taskId, status: 'failed', _meta: { 'mcp-broker/a2a': 'failed' } });
    expect(task.statusMessage).toContain('ended before it finished');
    const result = await request(second, 'tasks/result', { taskId });
    expect(result.isError).toBe(true);
    // The text agrees with the status (failed, A2A failed), not "cancelled".
    expect(result.content[0].text).toBe('failed: the broker instance running it ended before it finished');
    // Its one record (issue 15 §2): written by the broker that reaped it.
    const lines = await waitFor(() => {
      const l = readNdjson<RecordLine>(recordsPath).filter((r) => r.name === RESEARCH);
      return l.length ? l : undefined;
    }, 'the killed task\'s record');
    expect(lines.map((r) => [r.outcome, r.reason, r.attempts])).toEqual([['cancelled', 'the broker instance running it ended before it finished', 0]]);
    await request(second, 'tasks/list', {}); // a later request: still one record
    expect(readNdjson<RecordLine>(recordsPath).filter((r) => r.name === RESEARCH)).toHaveLength(1);
  });

  it('a call parked on ask (askMode park) and approved with the CLI after a restart completes through the rest of the path', async () => {
    const { dir, configPath, recordsPath } = configFor(
      { u: nodeServer(fixture('echo.mjs')) },
      { policy: { askMode: 'park', rules: [{ tools: ['u__echo'], action: 'ask' }] } },
    );
    const first = await serve(configPath, dir);
    void first.client.callTool({ name: 'u__echo', arguments: { text: 'parked hello' } }, { timeout: 60_000 }).catch(() => undefined);
    const listed = await waitFor(async () => {
      const out = await runCli(['approvals', 'list', '--config', configPath, '--json']);
      return out.stdout.trim() ? (out.stdout.trim().split('\n').map((l) => JSON.parse(l)) as Array<{ id: string; tool: string; args: unknown }>) : undefined;
    }, 'the call to park', 20_000, 100);
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ tool: 'u__echo', args: { text: 'parked hello' } });
    const id = listed[0]!.id;
    process.kill(first.pid, 'SIGKILL');
    await waitFor(() => !isAlive(first.pid), 'the broker to die');

    const second = await serve(configPath, dir);
    expect(await request(second, 'tasks/get', { taskId: id })).toMatchObject({ status: 'input_required', _meta: { 'mcp-broker/a2a': 'input-required' } });
    const approved = await runCli(['approvals', 'approve', id, '--config', configPath]);
    expect(approved).toMatchObject({ code: 0 });
    expect(approved.stdout).toContain(`approved ${id}`);
    const result = await request(second, 'tasks/result', { taskId: id }, 30_000);
    expect(result.content[0].text).toBe('parked hello');
    expect(result._meta['mcp-broker/outcome']).toBe('ok');
    expect(await request(second, 'tasks/get', { taskId: id })).toMatchObject({ status: 'completed', _meta: { 'mcp-broker/a2a': 'completed' } });
    expect(readNdjson<RecordLine>(recordsPath).filter((r) => r.name === 'u__echo').map((r) => r.outcome)).toEqual(['ok']);
    expect((await runCli(['approvals', 'approve', id, '--config', configPath])).code).toBe(2);
  });

  it('an approved parked call waits for its upstream still in its first dial after broker.startGraceMs, then runs: the approval is not spent on "it is starting"', async () => {
    const { dir, configPath, recordsPath } = configFor(
      // held-start answers nothing, initialize included, until it is sent SIGUSR1.
      { q: nodeServer(fixture('held-start.mjs'), { era: 'legacy', env: { FIXTURE_LOG: '${configDir}/q.log' } }) },
      { policy: { askMode: 'park', rules: [{ tools: ['q__late'], action: 'ask' }] }, broker: { startGraceMs: 300, taskPollMs: 50 } },
    );
    const started = (n: number) => waitFor(() => readNdjson<{ pid: number; event: string }>(join(dir, 'q.log')).filter((e) => e.event === 'started')[n - 1], `upstream start ${n}`);
    const first = await serve(configPath, dir);
    process.kill((await started(1)).pid, 'SIGUSR1');
    await waitFor(async () => (await first.client.listTools()).tools.some((t) => t.name === 'q__late'), 'q__late to be listed');
    void first.client.callTool({ name: 'q__late', arguments: {} }, { timeout: 60_000 }).catch(() => undefined);
    const id = await waitFor(async () => {
      const out = (await runCli(['approvals', 'list', '--config', configPath, '--json'])).stdout.trim();
      return out ? (JSON.parse(out.split('\n')[0]!) as { id: string }).id : undefined;
    }, 'the call to park', 20_000, 100);
    process.kill(first.pid, 'SIGKILL');
    await waitFor(() => !isAlive(first.pid), 'the broker to die');
    expect((await runCli(['approvals', 'approve', id, '--config', configPath])).code).toBe(0);

    const second = await serve(configPath, dir);
    const held = await started(2);
    await second.client.listTools(); // answered once the gateway is ready: the grace has passed, q still silent
    // Twenty ticks of the task engine with q in its first dial: the previous build took the row up
    // at the first of them and failed it ("upstream "q" is not running: it is starting").
    for (let tick = 0; tick < 20; tick++) {
      expect(await request(second, 'tasks/get', { taskId: id })).toMatchObject({ status: 'input_required' });
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    process.kill(held.pid, 'SIGUSR1');
    const result = await request(second, 'tasks/result', { taskId: id }, 30_000);
    expect(result._meta['mcp-broker/outcome']).toBe('ok');
    expect(result.content[0].text).toBe('late');
    expect(readNdjson<RecordLine>(recordsPath).filter((r) => r.name === 'q__late').map((r) => r.outcome)).toEqual(['ok']);
  }, 60_000);

  it('a parked call rejected with the CLI fails with the reason, and the waiting caller is answered approval_required', async () => {
    const { dir, configPath } = configFor({ u: nodeServer(fixture('echo.mjs')) }, { policy: { askMode: 'park', rules: [{ tools: ['u__echo'], action: 'ask' }] } });
    const s = await serve(configPath, dir);
    const answer = s.client.callTool({ name: 'u__echo', arguments: { text: 'no' } }, { timeout: 60_000 });
    const id = await waitFor(async () => (await runCli(['approvals', 'list', '--config', configPath, '--json'])).stdout.trim() && JSON.parse((await runCli(['approvals', 'list', '--config', configPath, '--json'])).stdout).id, 'the call to park', 20_000, 100);
    expect((await runCli(['approvals', 'reject', id, '--config', configPath, '--reason', 'not today'])).code).toBe(0);
    const result = (await answer) as { isError?: boolean; content: Array<{ text: string }>; _meta: Record<string, unknown> };
    expect(result._meta['mcp-broker/outcome']).toBe('approval_required');
    expect(result.content[0]!.text).toContain('rejected by cli: not today');
    expect(await request(s, 'tasks/get', { taskId: id })).toMatchObject({ status: 'failed', statusMessage: 'rejected by cli: not today' });
  });
});

describe('the approval inbox from a session and over HTTP', () => {
  it('broker__approvals_list shows a parked call and broker__approvals_decide approves it: the waiting call completes, one record', async () => {
    const { dir, configPath, recordsPath } = configFor({ u: nodeServer(fixture('echo.mjs')) }, { policy: { askMode: 'park', rules: [{ tools: ['u__echo'], action: 'ask' }] } });
    const s = await serve(configPath, dir);
    const answer = s.client.callTool({ name: 'u__echo', arguments: { text: 'via builtin' } }, { timeout: 60_000 });
    const parked = await waitFor(async () => {
      const r = (await s.client.callTool({ name: 'broker__approvals_list', arguments: {} })) as { structuredContent: { approvals: Array<{ id: string; tool: string }> } };
      return r.structuredContent.approvals[0];
    }, 'the call to park');
    expect(parked.tool).toBe('u__echo');
    const decided = (await s.client.callTool({ name: 'broker__approvals_decide', arguments: { id: parked.id, approve: true } })) as { structuredContent: Record<string, unknown> };
    expect(decided.structuredContent).toMatchObject({ id: parked.id, decided: true });
    const result = (await answer) as { content: Array<{ text: string }>; _meta: Record<string, unknown> };
    expect(result.content[0]!.text).toBe('via builtin');
    expect(result._meta['mcp-broker/outcome']).toBe('ok');
    expect(await request(s, 'tasks/get', { taskId: parked.id })).toMatchObject({ status: 'completed' });
    expect(readNdjson<RecordLine>(recordsPath).filter((r) => r.name === 'u__echo').map((r) => r.outcome)).toEqual(['ok']);
  });

  it('a task parked on ask, approved with the CLI while no broker runs, completes on the next broker started; one record, when it ran', async () => {
    const { dir, configPath, recordsPath } = configFor(
      { c: nodeServer(fixture('conformance-server.mjs'), { args: [fixture('conformance-server.mjs'), '--legacy'] }) },
      { policy: { askMode: 'park', rules: [{ tools: ['c__slow_compute'], action: 'ask' }] } },
    );
    const first = await serve(configPath, dir);
    const created = await request(first, 'tools/call', { name: 'c__slow_compute', arguments: { seconds: 0, label: 'later' }, task: {} });
    const taskId = created.task.taskId as string;
    await waitFor(async () => (await request(first, 'tasks/get', { taskId })).status === 'input_required', 'the task to park');
    process.kill(first.pid, 'SIGTERM');
    await waitFor(() => !isAlive(first.pid), 'the broker to exit');
    // Parked, not yet decided: no record (it is written when the call settles).
    expect(readNdjson<RecordLine>(recordsPath).filter((r) => r.name === 'c__slow_compute')).toEqual([]);

    const approved = await runCli(['approvals', 'approve', taskId, '--config', configPath]);
    expect(approved).toMatchObject({ code: 0 });
    expect(approved.stdout).toContain('it runs when a broker serving this store takes it up');
    const second = await serve(configPath, dir);
    const result = await request(second, 'tasks/result', { taskId }, 30_000);
    expect(result._meta['mcp-broker/outcome']).toBe('ok');
    expect(await request(second, 'tasks/get', { taskId })).toMatchObject({ status: 'completed' });
    expect(readNdjson<RecordLine>(recordsPath).filter((r) => r.name === 'c__slow_compute').map((r) => r.outcome)).toEqual(['ok']);
  });

  it('a plain call parked (askMode park) sends no task status notifications: the client was given no task', async () => {
    const { dir, configPath, recordsPath } = configFor({ u: nodeServer(fixture('echo.mjs')) }, { policy: { askMode: 'park', rules: [{ tools: ['u__echo'], action: 'ask' }] } });
    const s = await serve(configPath, dir);
    const call = s.client.callTool({ name: 'u__echo', arguments: { text: 'plain' } }, { timeout: 60_000 });
    const parked = await waitFor(async () => {
      const r = (await s.client.callTool({ name: 'broker__approvals_list', arguments: {} })) as { structuredContent: { approvals: Array<{ id: string }> } };
      return r.structuredContent.approvals[0];
    }, 'the call to park');
    await s.client.callTool({ name: 'broker__approvals_decide', arguments: { id: parked.id, approve: true } });
    const result = (await call) as { content: Array<{ text: string }> };
    expect(result.content[0]!.text).toBe('plain');
    await request(s, 'tasks/list', {}); // a round trip after the answer: any notification sent before it has arrived
    expect(s.notifications.filter((n) => n.method === 'notifications/tasks/status')).toEqual([]);
    expect(readNdjson<RecordLine>(recordsPath).filter((r) => r.name === 'u__echo').map((r) => r.outcome)).toEqual(['ok']);
  });

  it('a plain parked call whose caller cancels stays parked and writes no record; approved, it runs and writes its one record', async () => {
    const { dir, configPath, recordsPath } = configFor({ u: nodeServer(fixture('echo.mjs')) }, { policy: { askMode: 'park', rules: [{ tools: ['u__echo'], action: 'ask' }] } });
    const s = await serve(configPath, dir);
    const left = new AbortController();
    const call = s.client.callTool({ name: 'u__echo', arguments: { text: 'left' } }, { timeout: 60_000, signal: left.signal }).catch((e: unknown) => e);
    const parked = await waitFor(async () => {
      const r = (await s.client.callTool({ name: 'broker__approvals_list', arguments: {} })) as { structuredContent: { approvals: Array<{ id: string }> } };
      return r.structuredContent.approvals[0];
    }, 'the call to park');
    left.abort('the caller left');
    await call;
    await waitFor(async () => (await request(s, 'tasks/get', { taskId: parked.id })).status === 'input_required', 'the row to stay parked');
    await s.client.callTool({ name: 'broker__approvals_decide', arguments: { id: parked.id, approve: true } });
    const result = await request(s, 'tasks/result', { taskId: parked.id }, 30_000);
    expect(result.content[0].text).toBe('left');
    expect(readNdjson<RecordLine>(recordsPath).filter((r) => r.name === 'u__echo').map((r) => r.outcome)).toEqual(['ok']);
  });

  it('SIGTERM during a running task: the stopped broker leaves it killed by system, read as failed after a restart', async () => {
    const { dir, configPath, recordsPath } = configFor({ everything: nodeServer(npmServer('server-everything')) });
    const first = await serve(configPath, dir);
    const created = await request(first, 'tools/call', { name: RESEARCH, arguments: { topic: 'x' }, task: {} });
    const taskId = created.task.taskId as string;
    process.kill(first.pid, 'SIGTERM');
    await waitFor(() => !isAlive(first.pid), 'the broker to exit');
    // The row as the stopped broker left it (issue 15 §3): killed by system, not failed.
    const store = SqliteStore.open(join(dir, 'data'));
    const row = await store.getTask(taskId, Date.now());
    await store.close();
    expect(row).toMatchObject({ status: 'killed', stoppedBy: 'system', recordOwed: false });
    const second = await serve(configPath, dir);
    expect(await request(second, 'tasks/get', { taskId })).toMatchObject({ status: 'failed', _meta: { 'mcp-broker/a2a': 'failed' } });
    await request(second, 'tasks/list', {});
    expect(readNdjson<RecordLine>(recordsPath).filter((r) => r.name === RESEARCH).map((r) => [r.outcome, r.reason])).toEqual([['cancelled', 'the broker is shutting down']]);
  });

  it('POST /api/v1/approvals/:id by an operator approves a principal\'s parked call, which completes; a non-operator gets 403', async () => {
    const env = { ALICE_TOKEN: 'alice-token-0123456789abcdef', OPS_TOKEN: 'ops-token-0123456789abcdef00' };
    const broker = await startHttpBroker({
      servers: { u: nodeServer(fixture('echo.mjs')) },
      extra: {
        principals: { alice: { token: '${env:ALICE_TOKEN}' }, ops: { token: '${env:OPS_TOKEN}', role: 'operator' } },
        policy: { askMode: 'park', rules: [{ tools: ['u__echo'], action: 'ask' }] },
      },
      env,
    });
    cleanups.push(broker.close);
    const alice = await connectHttp(broker.url, 'streamable', { token: env.ALICE_TOKEN });
    cleanups.push(alice.close);
    const answer = alice.client.callTool({ name: 'u__echo', arguments: { text: 'over http' } }, { timeout: 60_000 });
    const auth = (t: string) => ({ authorization: `Bearer ${t}` });
    const parked = await waitFor(async () => {
      const body = (await http(`${broker.url}/api/v1/tasks?status=parked`, { headers: auth(env.OPS_TOKEN) })).body as { tasks: Array<{ id: string; principal: string; _meta: Record<string, unknown> }> };
      return body.tasks[0];
    }, 'the call to park');
    expect(parked).toMatchObject({ principal: 'alice', _meta: { 'mcp-broker/a2a': 'input-required' } });
    expect((await http(`${broker.url}/api/v1/approvals/${parked.id}`, { method: 'POST', headers: auth(env.ALICE_TOKEN), body: { approve: true } })).status).toBe(403);
    // The approvals tools are denied to her with their own reason, not broker__reconnect's.
    for (const [name, args, why] of [
      ['broker__approvals_list', {}, "shows every principal's parked calls (the approval inbox)"],
      ['broker__approvals_decide', { id: parked.id, approve: true }, "decides every principal's parked calls (the approval inbox)"],
    ] as const) {
      const denied = (await alice.client.callTool({ name, arguments: args })) as { isError?: boolean; content: Array<{ text: string }>; _meta: Record<string, unknown> };
      expect(denied).toMatchObject({ isError: true, _meta: { 'mcp-broker/outcome': 'denied' } });
      expect(denied.content[0]!.text).toContain(`"${name}" ${why}: principal "alice" needs the operator role`);
      expect(denied.content[0]!.text).not.toContain('upstream connections');
    }
    const decided = await http(`${broker.url}/api/v1/approvals/${parked.id}`, { method: 'POST', headers: auth(env.OPS_TOKEN), body: { approve: true } });
    expect(decided.status).toBe(200);
    const result = (await answer) as { content: Array<{ text: string }> };
    expect(result.content[0]!.text).toBe('over http');
    expect((await http(`${broker.url}/api/v1/tasks/${parked.id}`, { headers: auth(env.ALICE_TOKEN) })).body).toMatchObject({ status: 'completed', _meta: { 'mcp-broker/a2a': 'completed' } });
    expect((await http(`${broker.url}/api/v1/approvals/${parked.id}`, { method: 'POST', headers: auth(env.OPS_TOKEN), body: { approve: true } })).status).toBe(404);
  });
});

describe('tasks over HTTP: per-principal isolation', () => {
  let broker: HttpBroker | undefined;
  afterEach(async () => {
    await broker?.close();
    broker = undefined;
  });

  it('alice sees her task on MCP and GET /api/v1/tasks[/:id]; bob gets -32602, an empty list and 404; an operator sees it', async () => {
    const env = { ALICE_TOKEN: 'alice-token-0123456789abcdef', BOB_TOKEN: 'bob-token-0123456789abcdef00', OPS_TOKEN: 'ops-token-0123456789abcdef00' };
    broker = await startHttpBroker({
      servers: { everything: nodeServer(npmServer('server-everything')) },
      extra: { principals: { alice: { token: '${env:ALICE_TOKEN}' }, bob: { token: '${env:BOB_TOKEN}' }, ops: { token: '${env:OPS_TOKEN}', role: 'operator' } } },
      env,
    });
    const alice = await connectHttp(broker.url, 'streamable', { token: env.ALICE_TOKEN });
    const bob = await connectHttp(broker.url, 'streamable', { token: env.BOB_TOKEN });
    cleanups.push(alice.close, bob.close);
    const req = (c: Client, method: string, params: Record<string, unknown>) => c.request({ method, params } as never, ResultSchema.loose(), { timeout: 20_000 }) as Promise<Record<string, any>>;
    const created = await req(alice.client, 'tools/call', { name: RESEARCH, arguments: { topic: 'x' }, task: {} });
    const taskId = created.task.taskId as string;

    expect(await req(alice.client, 'tasks/get', { taskId })).toMatchObject({ taskId });
    await expect(req(bob.client, 'tasks/get', { taskId })).rejects.toMatchObject({ code: -32602 });
    await expect(req(bob.client, 'tasks/cancel', { taskId })).rejects.toMatchObject({ code: -32602 });
    await expect(req(bob.client, 'tasks/result', { taskId })).rejects.toMatchObject({ code: -32602 });
    expect((await req(bob.client, 'tasks/list', {})).tasks).toEqual([]);

    const auth = (t: string) => ({ authorization: `Bearer ${t}` });
    const mine = await http(`${broker.url}/api/v1/tasks/${taskId}`, { headers: auth(env.ALICE_TOKEN) });
    expect(mine.status).toBe(200);
    expect(mine.body).toMatchObject({ id: taskId, principal: 'alice', tool: RESEARCH, _meta: { 'mcp-broker/a2a': expect.stringMatching(/^(working|completed)$/) } });
    expect((await http(`${broker.url}/api/v1/tasks/${taskId}`, { headers: auth(env.BOB_TOKEN) })).status).toBe(404);
    expect((await http(`${broker.url}/api/v1/tasks`, { headers: auth(env.BOB_TOKEN) })).body).toEqual({ tasks: [] });
    expect(((await http(`${broker.url}/api/v1/tasks`, { headers: auth(env.ALICE_TOKEN) })).body as { tasks: Array<{ id: string }> }).tasks.map((t) => t.id)).toEqual([taskId]);
    expect((await http(`${broker.url}/api/v1/tasks/${taskId}`, { headers: auth(env.OPS_TOKEN) })).status).toBe(200);
    expect((await http(`${broker.url}/api/v1/approvals/${taskId}`, { method: 'POST', headers: auth(env.BOB_TOKEN), body: { approve: true } })).status).toBe(403);
  });
});

describe('flows as tasks (issue 16)', () => {
  const flowArgs = { steps: [{ id: 'a', tool: 'kv__put', args: { key: 'a', value: 1 } }, { id: 'b', tool: 'kv__put', args: { key: 'b', value: '${steps.a.result.value}' } }] };

  it('a task-augmented tools/call of broker__flow_run answers a task, and tasks/result gives the flow answer', async () => {
    const { dir, configPath, recordsPath } = configFor({ kv: nodeServer(fixture('kv.mjs')) });
    const s = await serve(configPath, dir);
    expect((await s.client.listTools()).tools.find((t) => t.name === 'broker__flow_run')?.execution?.taskSupport).toBe('optional');
    const created = await request(s, 'tools/call', { name: 'broker__flow_run', arguments: flowArgs, task: {} });
    expect(created.task).toMatchObject({ status: 'working' });
    const taskId = created.task.taskId as string;
    const result = await request(s, 'tasks/result', { taskId }, 30_000);
    expect(result._meta).toMatchObject({ 'io.modelcontextprotocol/related-task': { taskId }, 'mcp-broker/outcome': 'ok' });
    expect(result.structuredContent).toMatchObject({ success: true, steps: [{ id: 'a', outcome: 'ok' }, { id: 'b', outcome: 'ok' }], rolledBack: [], unapplied: [] });
    expect(result.content[0].text).toBe('flow ok: 2 step(s) ran');
    expect(await request(s, 'tasks/get', { taskId })).toMatchObject({ status: 'completed' });
    const records = readNdjson<RecordLine>(recordsPath);
    const flowRecord = records.find((r) => r.name === 'broker__flow_run')!;
    expect(records.filter((r) => (r.flow as { id?: string } | undefined)?.id === flowRecord.callId).map((r) => [r.name, r.outcome])).toEqual([['kv__put', 'ok'], ['kv__put', 'ok']]);
  });

  it('a flow run as a task parks its task on a step\'s ask (default askMode); approved from the inbox, tasks/result gives the flow answer', async () => {
    const { dir, configPath } = configFor({ kv: nodeServer(fixture('kv.mjs')) }, { policy: { rules: [{ tools: ['kv__put'], action: 'ask' }] } });
    const s = await serve(configPath, dir);
    const created = await request(s, 'tools/call', { name: 'broker__flow_run', arguments: { steps: [flowArgs.steps[0]] }, task: {} });
    const taskId = created.task.taskId as string;
    await waitFor(async () => (await request(s, 'tasks/get', { taskId })).status === 'input_required', 'the flow task to park on its step');
    await s.client.callTool({ name: 'broker__approvals_decide', arguments: { id: taskId, approve: true } });
    const result = await request(s, 'tasks/result', { taskId }, 30_000);
    expect(result.structuredContent).toMatchObject({ success: true, steps: [{ id: 'a', outcome: 'ok' }] });
    expect(await request(s, 'tasks/get', { taskId })).toMatchObject({ status: 'completed' });
  });

  it('a flow step whose policy is ask parks under askMode park; approved from the inbox, the flow goes on', async () => {
    const { dir, configPath } = configFor({ kv: nodeServer(fixture('kv.mjs')) }, { policy: { askMode: 'park', rules: [{ tools: ['kv__put'], action: 'ask' }] } });
    const s = await serve(configPath, dir);
    const answer = s.client.callTool({ name: 'broker__flow_run', arguments: { steps: [flowArgs.steps[0]] } }, { timeout: 60_000 });
    const parked = await waitFor(async () => {
      const r = (await s.client.callTool({ name: 'broker__approvals_list', arguments: {} })) as { structuredContent: { approvals: Array<{ id: string; tool: string }> } };
      return r.structuredContent.approvals[0];
    }, 'the step to park');
    expect(parked.tool).toBe('kv__put');
    await s.client.callTool({ name: 'broker__approvals_decide', arguments: { id: parked.id, approve: true } });
    const result = (await answer) as { structuredContent: { success: boolean; steps: Array<{ id: string; outcome: string }> } };
    expect(result.structuredContent).toMatchObject({ success: true, steps: [{ id: 'a', outcome: 'ok' }] });
  });
});
