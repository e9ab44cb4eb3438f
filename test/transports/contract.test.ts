/**
 * One transport contract, run against every downstream transport (stdio, Streamable HTTP,
 * legacy SSE), in the style of hono's `common.case.test.ts`: the same cases against each face.
 * Real CLI, real fixture upstreams (test/fixtures/echo.mjs, conformance-server.mjs).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client, ClientCapabilities } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, readNdjson, startBroker, waitFor, type RecordLine, type SeenNotification } from '../e2e/helpers.js';
import { connectHttp, startHttpBroker, type HttpBroker } from './harness.js';

type Kind = 'stdio' | 'streamable' | 'sse';

interface Face {
  client: Client;
  notifications: SeenNotification[];
  records(): RecordLine[];
  close(): Promise<void>;
}

const CAPABILITIES: ClientCapabilities = { sampling: {}, elicitation: {}, roots: { listChanged: true } };

function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.map((c) => c.text ?? '').join('');
}

describe.each<Kind>(['stdio', 'streamable', 'sse'])('transport contract: %s', (kind) => {
  let logDir: string;
  let logPath: string;
  let face: Face;
  let broker: HttpBroker | undefined;

  const fixtureEvents = () => readNdjson<{ event: string; tool?: string; uri?: string }>(logPath);

  beforeAll(async () => {
    logDir = mkdtempSync(join(tmpdir(), 'mcp-broker-contract-'));
    logPath = join(logDir, 'fixture.ndjson');
    const servers = {
      echo: nodeServer(fixture('echo.mjs'), { env: { FIXTURE_LOG: logPath } }),
      conf: nodeServer(fixture('conformance-server.mjs'), { args: [fixture('conformance-server.mjs'), '--legacy'] }),
    };
    const extra = { http: { clientCapabilities: CAPABILITIES } };
    if (kind === 'stdio') {
      const started = await startBroker({ servers, extra, capabilities: CAPABILITIES });
      face = { client: started.client, notifications: started.notifications, records: () => readNdjson(started.recordsPath), close: started.close };
    } else {
      broker = await startHttpBroker({ servers, extra });
      const connected = await connectHttp(broker.url, kind, { capabilities: CAPABILITIES });
      face = { client: connected.client, notifications: connected.notifications, records: () => broker!.records(), close: connected.close };
    }
    face.client.setRequestHandler('sampling/createMessage', async (req) => ({
      role: 'assistant',
      content: { type: 'text', text: `sampled: ${JSON.stringify(req.params.messages[0]?.content)}` },
      model: 'test-model',
      stopReason: 'endTurn',
    }));
    face.client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { response: 'yes please' } }));
    face.client.setRequestHandler('roots/list', async () => ({ roots: [{ uri: 'file:///contract/root', name: 'root' }] }));
  });

  afterAll(async () => {
    await face?.close();
    await broker?.close();
    rmSync(logDir, { recursive: true, force: true });
  });

  it('lists the merged roster: tools, prompts, resources', async () => {
    const tools = (await face.client.listTools()).tools.map((t) => t.name);
    expect(tools).toEqual(expect.arrayContaining(['echo__echo', 'echo__slow', 'echo__emit', 'conf__test_simple_text', 'conf__test_sampling']));
    const prompts = (await face.client.listPrompts()).prompts.map((p) => p.name);
    expect(prompts).toEqual(expect.arrayContaining(['echo__greet', 'conf__test_simple_prompt']));
    const resources = (await face.client.listResources()).resources.map((r) => r.uri);
    expect(resources).toEqual(expect.arrayContaining(['fixture://a', 'test://static-text']));
  });

  it('calls a tool through the broker path and records it', async () => {
    const result = await face.client.callTool({ name: 'echo__echo', arguments: { text: `hello over ${kind}` } });
    expect(textOf(result)).toBe(`hello over ${kind}`);
    expect(result._meta?.['mcp-broker/outcome']).toBe('ok');
    const callId = result._meta?.['mcp-broker/callId'];
    const record = await waitFor(() => face.records().find((r) => r.callId === callId), 'the call record');
    expect(record).toMatchObject({ outcome: 'ok', name: 'echo__echo', subject: 'echo/echo', principal: 'local' });
  });

  it('relays progress to the caller', async () => {
    const seen: number[] = [];
    // Progress spread over time: a client may drop progress that arrives with the response (SDK-NOTES §1).
    const result = await face.client.callTool({ name: 'echo__slow', arguments: { ms: 600, tickMs: 100 } }, {
      onprogress: (p) => seen.push(p.progress),
    });
    expect(textOf(result)).toBe('slept 600 ms');
    expect(seen.length).toBeGreaterThanOrEqual(1);
    expect([...seen].sort((a, b) => a - b)).toEqual(seen);
  });

  it('cancels the upstream request when the client cancels', async () => {
    const aborter = new AbortController();
    const before = fixtureEvents().length;
    const call = face.client.callTool({ name: 'echo__slow', arguments: { ms: 30_000 } }, { signal: aborter.signal });
    await waitFor(() => fixtureEvents().slice(before).some((e) => e.event === 'call' && e.tool === 'slow'), 'the slow call to reach the upstream');
    aborter.abort('test cancels');
    await expect(call).rejects.toThrow();
    await waitFor(() => fixtureEvents().slice(before).some((e) => e.event === 'cancelled' && e.tool === 'slow'), 'the upstream to see the cancellation');
    await waitFor(() => face.records().some((r) => r.name === 'echo__slow' && r.outcome === 'cancelled'), 'a cancelled record');
  });

  it('relays list_changed, logging and resources/updated', async () => {
    await face.client.setLoggingLevel('info');
    await face.client.subscribeResource({ uri: 'fixture://a' });
    await face.client.callTool({ name: 'echo__emit', arguments: {} });
    await waitFor(() => face.notifications.some((n) => n.method === 'notifications/tools/list_changed'), 'tools/list_changed');
    await waitFor(
      () => face.notifications.some((n) => n.method === 'notifications/message' && n.params?.data === 'x'),
      'the upstream log message',
    );
    await waitFor(
      () => face.notifications.some((n) => n.method === 'notifications/resources/updated' && n.params?.uri === 'fixture://a'),
      'resources/updated',
    );
  });

  it('reads resources and gets prompts', async () => {
    const read = await face.client.readResource({ uri: 'fixture://a' });
    expect(read.contents[0]).toMatchObject({ uri: 'fixture://a', text: 'content of fixture://a' });
    const template = await face.client.readResource({ uri: 'test://template/42/data' });
    expect(JSON.parse(String((template.contents[0] as { text?: string }).text))).toMatchObject({ id: '42' });
    const prompt = await face.client.getPrompt({ name: 'echo__greet', arguments: { name: 'ada' } });
    expect(prompt.messages[0]?.content).toMatchObject({ type: 'text', text: 'hello ada' });
  });

  it('answers a read of a resource no upstream serves with -32602 (the SDK v2 code on every revision), naming the uri', async () => {
    const err = (await face.client.readResource({ uri: 'nowhere://x' }).catch((e: unknown) => e)) as { code?: unknown; message?: string };
    expect(err.code).toBe(-32602);
    expect(err.message).toContain('nowhere://x');
  });

  it('routes an upstream sampling request during a call to the calling client', async () => {
    const result = await face.client.callTool({ name: 'conf__test_sampling', arguments: { prompt: 'two plus two' } });
    expect(textOf(result)).toContain('LLM response: sampled:');
    expect(textOf(result)).toContain('two plus two');
  });

  it('routes an upstream elicitation request during a call to the calling client', async () => {
    const result = await face.client.callTool({ name: 'conf__test_elicitation', arguments: { message: 'confirm?' } });
    expect(textOf(result)).toContain('action=accept');
    expect(textOf(result)).toContain('yes please');
  });

  it('routes an upstream roots/list during a call to the calling client', async () => {
    const result = await face.client.callTool({ name: 'conf__test_list_roots', arguments: {} });
    expect(textOf(result)).toBe('roots: file:///contract/root');
  });
});
