/**
 * Exact attribution of a stdio upstream's sampling requests (issue 14, "Done when": several
 * principals in flight on one upstream). server-everything over stdio sends
 * `sampling/createMessage` with no link to the call that caused it, so the broker lets one
 * caller's calls be in flight on it at a time (upstream/owner-gate.ts); a call of another
 * caller waits its turn instead of making the request ambiguous (refused `ambiguous_caller`).
 *
 * The built CLI serving HTTP with two principals and `http.clientCapabilities` offering sampling,
 * elicitation and roots, SDK clients of both eras; and the newcomer's case, one 2026-07-28 client
 * over stdio with two calls in flight. Each test keeps the second caller's call in flight while
 * the first caller's sampling request is open: on the broker's log line saying it waits its turn
 * (debug), or, where it is not made to wait, on its own answer.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Client, isInputRequiredResult, StreamableHTTPClientTransport, type CallToolResult, type InputRequiredResult } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, npmServer, readNdjson, startBroker, waitFor, writeConfig, type RecordLine, type StartedBroker } from './helpers.js';
import { connectHttp, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const TOKENS = { ALICE_TOKEN: 'alice-token-0123456789abcdef', BOB_TOKEN: 'bob-token-0123456789abcdef00' };
const TOOL = 'everything__trigger-sampling-request';
/** The broker's debug line for a call waiting at the owner gate. */
const WAITS = 'call waits for its turn';

const textOf = (r: unknown) => ((r as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('');
/** The prompt text of a `sampling/createMessage` request's params. */
const promptOf = (params: unknown) => ((params as { messages: { content: { text: string } }[] }).messages[0]!.content.text);
const sampled = (text: string) => ({ role: 'assistant' as const, content: { type: 'text' as const, text }, model: 'm' });

/** Resolves once `promise` settled, whichever way. */
const settled = (promise: Promise<unknown>) => promise.then(() => undefined, () => undefined);

/** `echo`'s own deadline is short: a call of it waiting its turn ends before the caller holding the gate is done. */
const servers = { everything: { command: 'node', args: [npmServer('server-everything'), 'stdio'], tools: { echo: { timeoutMs: 1500 } } } };

describe('sampling and elicitation of a stdio upstream with two principals in flight (HTTP)', () => {
  let broker: HttpBroker;
  const closers: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    broker = await startHttpBroker({
      // And a 2025-11-25 fixture whose test_elicitation asks the message it was given.
      servers: { ...servers, conf: nodeServer(fixture('conformance-server.mjs'), { args: [fixture('conformance-server.mjs'), '--legacy'] }) },
      extra: {
        principals: { alice: { token: '${env:ALICE_TOKEN}' }, bob: { token: '${env:BOB_TOKEN}' } },
        http: { clientCapabilities: { sampling: {}, elicitation: {}, roots: {} } },
      },
      env: TOKENS,
      args: ['--log-level', 'debug'],
    });
  });
  afterAll(async () => {
    for (const close of closers) await close().catch(() => undefined);
    await broker?.close();
  });

  const waits = () => broker.stderr().split(WAITS).length - 1;

  it('two legacy sessions: each gets exactly its own sampling request and its own result, neither is refused', async () => {
    const alice = await connectHttp(broker.url, 'streamable', { token: TOKENS.ALICE_TOKEN, capabilities: { sampling: {} } });
    const bob = await connectHttp(broker.url, 'streamable', { token: TOKENS.BOB_TOKEN, capabilities: { sampling: {} } });
    closers.push(alice.close, bob.close);
    const seen: Record<string, string[]> = { alice: [], bob: [] };
    const before = waits();
    let bobCall: Promise<unknown> | undefined;
    alice.client.setRequestHandler('sampling/createMessage', async (request) => {
      seen.alice!.push(promptOf(request.params));
      // Bob's call is in flight while this request is open: it waits its turn (or, unserialized, is answered).
      bobCall = bob.client.callTool({ name: TOOL, arguments: { prompt: 'for bob' } });
      await Promise.race([waitFor(() => waits() > before, 'bob to wait his turn'), settled(bobCall)]);
      return sampled('alice answers');
    });
    bob.client.setRequestHandler('sampling/createMessage', async (request) => {
      seen.bob!.push(promptOf(request.params));
      return sampled('bob answers');
    });
    const aliceResult = (await alice.client.callTool({ name: TOOL, arguments: { prompt: 'for alice' } })) as CallToolResult;
    const bobResult = (await bobCall) as CallToolResult;
    expect(aliceResult.isError).toBeFalsy();
    expect(bobResult.isError).toBeFalsy();
    expect(textOf(aliceResult)).toContain('alice answers');
    expect(textOf(bobResult)).toContain('bob answers');
    expect(seen).toEqual({ alice: ['Resource trigger-sampling-request context: for alice'], bob: ['Resource trigger-sampling-request context: for bob'] });
    const records = broker.records().filter((r) => r.name === TOOL);
    expect(records.map((r) => [r.principal, r.outcome]).sort()).toEqual([
      ['alice', 'ok'],
      ['bob', 'ok'],
    ]);
  });

  it('two legacy sessions: each gets exactly its own elicitation and its own result', async () => {
    const alice = await connectHttp(broker.url, 'sse', { token: TOKENS.ALICE_TOKEN, capabilities: { elicitation: { form: {} } } });
    const bob = await connectHttp(broker.url, 'streamable', { token: TOKENS.BOB_TOKEN, capabilities: { elicitation: { form: {} } } });
    closers.push(alice.close, bob.close);
    const seen: Record<string, string[]> = { alice: [], bob: [] };
    const before = waits();
    let bobCall: Promise<unknown> | undefined;
    alice.client.setRequestHandler('elicitation/create', async (request) => {
      seen.alice!.push(String(request.params.message));
      bobCall = bob.client.callTool({ name: 'conf__test_elicitation', arguments: { message: 'for bob' } });
      await Promise.race([waitFor(() => waits() > before, 'bob to wait his turn'), settled(bobCall)]);
      return { action: 'accept', content: { response: 'alice says yes' } };
    });
    bob.client.setRequestHandler('elicitation/create', async (request) => {
      seen.bob!.push(String(request.params.message));
      return { action: 'accept', content: { response: 'bob says yes' } };
    });
    const aliceResult = await alice.client.callTool({ name: 'conf__test_elicitation', arguments: { message: 'for alice' } });
    expect(textOf(aliceResult)).toContain('alice says yes');
    expect(textOf(await bobCall)).toContain('bob says yes');
    expect(seen).toEqual({ alice: ['for alice'], bob: ['for bob'] });
  });

  it("a call waiting its turn ends at its own deadline: timeout, nothing sent, recorded; the holder's call goes on", async () => {
    const alice = await connectHttp(broker.url, 'streamable', { token: TOKENS.ALICE_TOKEN, capabilities: { sampling: {} } });
    const bob = await connectHttp(broker.url, 'streamable', { token: TOKENS.BOB_TOKEN, capabilities: { sampling: {} } });
    closers.push(alice.close, bob.close);
    let bobCall: Promise<unknown> | undefined;
    alice.client.setRequestHandler('sampling/createMessage', async () => {
      // Bob's call (no sampling of its own) is made while Alice's request is open; she answers once it has ended.
      bobCall = bob.client.callTool({ name: 'everything__echo', arguments: { message: 'waiting' } });
      await settled(bobCall);
      return sampled('alice answers');
    });
    const aliceResult = (await alice.client.callTool({ name: TOOL, arguments: { prompt: 'slow alice' } })) as CallToolResult;
    expect(textOf(aliceResult)).toContain('alice answers');
    const bobResult = (await bobCall) as CallToolResult;
    expect(bobResult.isError).toBe(true);
    expect(bobResult._meta?.['mcp-broker/outcome']).toBe('timeout');
    const record = broker.records().find((r) => r.name === 'everything__echo');
    expect(record).toMatchObject({ principal: 'bob', outcome: 'timeout', attempts: 0 });
    expect(record!.reason).toContain('nothing was sent');
  });

  it('two 2026-07-28 requests of two principals: each is answered input_required for its own request, and each retry completes', async () => {
    const before = broker.records().length;
    const modern = async (token: string) => {
      const client = new Client({ name: 'attribution', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' }, capabilities: { sampling: {} }, inputRequired: { autoFulfill: false } });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }), { timeout: 20_000 });
      closers.push(() => client.close());
      expect(client.getProtocolEra()).toBe('modern');
      return (prompt: string, extra: Record<string, unknown> = {}) =>
        client.request({ method: 'tools/call', params: { name: TOOL, arguments: { prompt }, ...extra } }, { allowInputRequired: true }) as Promise<CallToolResult | InputRequiredResult>;
    };
    const alice = await modern(TOKENS.ALICE_TOKEN);
    const bob = await modern(TOKENS.BOB_TOKEN);
    const onlyRequest = (r: CallToolResult | InputRequiredResult) => {
      expect(isInputRequiredResult(r)).toBe(true);
      const entries = Object.entries((r as InputRequiredResult).inputRequests!);
      expect(entries).toHaveLength(1);
      const [key, request] = entries[0]!;
      expect(request.method).toBe('sampling/createMessage');
      return { key, prompt: promptOf(request.params), requestState: (r as InputRequiredResult).requestState };
    };

    // Alice's call is held (its upstream request open) while Bob's call is made.
    const a = onlyRequest(await alice('for alice'));
    expect(a.prompt).toBe('Resource trigger-sampling-request context: for alice');
    const waited = waits();
    const bobFirst = bob('for bob');
    await Promise.race([waitFor(() => waits() > waited, 'bob to wait his turn'), settled(bobFirst)]);

    const aliceDone = (await alice('for alice', { inputResponses: { [a.key]: sampled('alice answers') }, requestState: a.requestState })) as CallToolResult;
    expect(aliceDone.isError).toBeFalsy();
    expect(textOf(aliceDone)).toContain('alice answers');

    const b = onlyRequest(await bobFirst);
    expect(b.prompt).toBe('Resource trigger-sampling-request context: for bob');
    const bobDone = (await bob('for bob', { inputResponses: { [b.key]: sampled('bob answers') }, requestState: b.requestState })) as CallToolResult;
    expect(bobDone.isError).toBeFalsy();
    expect(textOf(bobDone)).toContain('bob answers');

    const records = broker.records().slice(before);
    expect(records.map((r) => [r.principal, r.name, r.outcome]).sort()).toEqual([
      ['alice', TOOL, 'ok'],
      ['bob', TOOL, 'ok'],
    ]);
  });
});

describe('sampling of a stdio upstream, one 2026-07-28 client with two calls in flight (stdio)', () => {
  let dir = '';
  let client: Client;
  let recordsPath = '';
  let stderr = '';

  beforeAll(async () => {
    const written = writeConfig(servers);
    dir = written.dir;
    recordsPath = written.recordsPath;
    const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', written.configPath, '--log-level', 'debug'], cwd: dir, stderr: 'pipe' });
    transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    client = new Client({ name: 'newcomer', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' }, capabilities: { sampling: {} } });
    await client.connect(transport, { timeout: 20_000 });
  });
  afterAll(async () => {
    await client?.close().catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("the SDK client's own driver answers each call's own sampling request; neither call is refused", async () => {
    expect(client.getProtocolEra()).toBe('modern');
    const waits = () => stderr.split(WAITS).length - 1;
    const before = waits();
    const seen: string[] = [];
    let second: Promise<unknown> | undefined;
    client.setRequestHandler('sampling/createMessage', async (request) => {
      const prompt = promptOf(request.params);
      seen.push(prompt);
      if (prompt.endsWith('first')) {
        // The second call is in flight while the first call's request is open.
        second = client.callTool({ name: TOOL, arguments: { prompt: 'second' } });
        await Promise.race([waitFor(() => waits() > before, 'the second call to wait its turn'), settled(second)]);
      }
      return sampled(`answer to ${prompt.split(' ').at(-1)}`);
    });
    const first = (await client.callTool({ name: TOOL, arguments: { prompt: 'first' } })) as CallToolResult;
    const other = (await second) as CallToolResult;
    expect(first.isError).toBeFalsy();
    expect(other.isError).toBeFalsy();
    expect(textOf(first)).toContain('answer to first');
    expect(textOf(other)).toContain('answer to second');
    expect(seen).toEqual(['Resource trigger-sampling-request context: first', 'Resource trigger-sampling-request context: second']);
    const records = readNdjson<RecordLine>(recordsPath).filter((r) => r.name === TOOL);
    expect(records.map((r) => r.outcome)).toEqual(['ok', 'ok']);
  });
});

describe("a stdio upstream's sampling during a legacy caller's prompts/get and resources/read (stdio)", () => {
  let broker: StartedBroker;
  const seen: string[] = [];

  beforeAll(async () => {
    broker = await startBroker({ servers: { ask: nodeServer(fixture('asking-prompt.mjs')) }, capabilities: { sampling: {} } });
    broker.client.setRequestHandler('sampling/createMessage', async (request) => {
      const prompt = promptOf(request.params);
      seen.push(prompt);
      return sampled(`answer to ${prompt}`);
    });
  });
  afterAll(async () => broker?.close());

  it('each request reaches the session that made it, on its own route', async () => {
    const prompt = await broker.client.getPrompt({ name: 'ask__ask', arguments: { topic: 'tea' } });
    expect((prompt.messages[0]!.content as { text: string }).text).toBe('prompt: answer to prompt about tea');
    const read = await broker.client.readResource({ uri: 'ask://doc' });
    expect((read.contents[0] as { text: string }).text).toBe('read: answer to read ask://doc');
    expect(seen).toEqual(['prompt about tea', 'read ask://doc']);
  });
});

describe("a stdio upstream's sampling during a 2026-07-28 caller's prompts/get and resources/read (stdio)", () => {
  const clients: Client[] = [];
  const dirs: string[] = [];
  let recordsPath = '';

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** A broker of its own (its own records) and a modern client of it. */
  async function modernClient(autoFulfill: boolean) {
    const { dir, recordsPath: records } = writeConfig({ ask: nodeServer(fixture('asking-prompt.mjs')) });
    dirs.push(dir);
    recordsPath = records;
    const client = new Client(
      { name: 'held-primitives', version: '1.0.0' },
      { versionNegotiation: { mode: 'auto' }, capabilities: { sampling: {} }, ...(autoFulfill ? {} : { inputRequired: { autoFulfill: false } }) },
    );
    client.setRequestHandler('sampling/createMessage', async (request) => sampled(`driver on ${promptOf(request.params)}`));
    await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', join(dir, 'servers.json')], cwd: dir, stderr: 'ignore' }), { timeout: 20_000 });
    clients.push(client);
    expect(client.getProtocolEra()).toBe('modern');
    return client;
  }

  it("is answered input_required to that request; the SDK client's driver retries and gets the prompt and the read", async () => {
    const client = await modernClient(true);
    const prompt = await client.getPrompt({ name: 'ask__ask', arguments: { topic: 'tea' } });
    expect((prompt.messages[0]!.content as { text: string }).text).toBe('prompt: driver on prompt about tea');
    const read = await client.readResource({ uri: 'ask://doc' });
    expect((read.contents[0] as { text: string }).text).toBe('read: driver on read ask://doc');
  });

  it('by hand: the input request is the upstream\'s; a tampered state is -32602 and recorded; the valid retry gets the prompt', async () => {
    const client = await modernClient(false);
    const get = (extra: Record<string, unknown> = {}) =>
      client.request({ method: 'prompts/get', params: { name: 'ask__ask', arguments: { topic: 'coffee' }, ...extra } }, { allowInputRequired: true }) as Promise<Record<string, unknown>>;
    const first = (await get()) as InputRequiredResult;
    expect(isInputRequiredResult(first)).toBe(true);
    expect(Object.keys(first.inputRequests!)).toEqual(['ask/1']);
    expect(promptOf(first.inputRequests!['ask/1']!.params)).toBe('prompt about coffee');
    const answer = { 'ask/1': sampled('by hand') };
    const tampered = await get({ inputResponses: answer, requestState: `${first.requestState!.slice(0, -4)}AAAA` }).then(() => undefined, (e: { code?: number }) => e);
    expect(tampered?.code).toBe(-32602);
    const done = (await get({ inputResponses: answer, requestState: first.requestState })) as { messages: { content: { text: string } }[] };
    expect(done.messages[0]!.content.text).toBe('prompt: by hand');
    const records = readNdjson<RecordLine>(recordsPath).filter((r) => r.kind === 'prompt' && (r.args as { topic?: string }).topic === 'coffee');
    expect(records.map((r) => r.outcome)).toEqual(['ok', 'invalid_arguments', 'ok']);
  });
});
