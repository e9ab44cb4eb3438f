/**
 * A legacy upstream's input requests held for 2026-07-28 callers over HTTP, with calls of two
 * principals (bearer tokens) in flight on one upstream at once: the built CLI serving HTTP, the
 * legacy Streamable HTTP fixture test/fixtures/asking-http.mjs (its requests travel on each
 * call's own response stream, so each is routed to exactly its call), and SDK v2 clients at the
 * 2026-07-28 era driving the retries themselves. Each caller gets only its own input request; a
 * retry with another principal's state is refused and answers nothing.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Client, isInputRequiredResult, StreamableHTTPClientTransport, type CallToolResult, type InputRequiredResult } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture } from './helpers.js';
import { startHttpBroker, type HttpBroker } from '../transports/harness.js';

const TOKENS = { ALICE_TOKEN: 'alice-token-0123456789abcdef', BOB_TOKEN: 'bob-token-0123456789abcdef00' };
const textOf = (r: unknown) => ((r as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('');

describe('held input requests over HTTP, two principals on one upstream', () => {
  let upstream: ChildProcess;
  let upstreamUrl = '';
  let broker: HttpBroker;
  const clients: Client[] = [];

  beforeAll(async () => {
    upstream = spawn(process.execPath, [fixture('asking-http.mjs')], { stdio: ['pipe', 'pipe', 'inherit'] });
    const port = await new Promise<number>((resolve, reject) => {
      createInterface({ input: upstream.stdout! }).once('line', (l) => resolve(JSON.parse(l).port));
      upstream.once('exit', () => reject(new Error('fixture exited')));
    });
    upstreamUrl = `http://127.0.0.1:${port}/mcp`;
    broker = await startHttpBroker({
      servers: { ask: { type: 'http', url: upstreamUrl, era: 'legacy' } },
      extra: {
        principals: { alice: { token: '${env:ALICE_TOKEN}' }, bob: { token: '${env:BOB_TOKEN}' } },
        http: { clientCapabilities: { sampling: {}, elicitation: {} } },
      },
      env: TOKENS,
    });
  });
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await broker?.close();
    upstream?.kill();
  });

  async function modernClient(token: string, autoFulfill: boolean, answer = 'answer', url = broker.url) {
    const client = new Client(
      { name: 'held-http', version: '1.0.0' },
      { versionNegotiation: { mode: 'auto' }, capabilities: { sampling: {}, elicitation: { form: {} } }, ...(autoFulfill ? {} : { inputRequired: { autoFulfill: false } }) },
    );
    client.setRequestHandler('sampling/createMessage', async () => ({ role: 'assistant', content: { type: 'text', text: answer }, model: 'm' }));
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }), { timeout: 20_000 });
    clients.push(client);
    const call = (text: string, extra: Record<string, unknown> = {}) =>
      client.request({ method: 'tools/call', params: { name: 'ask__sample', arguments: { text }, ...extra } }, { allowInputRequired: true }) as Promise<CallToolResult | InputRequiredResult>;
    return { client, call };
  }

  it("the SDK client's own driver answers the held sampling request and gets the call's result", async () => {
    const alice = await modernClient(TOKENS.ALICE_TOKEN, true, 'from the driver');
    expect(alice.client.getProtocolEra()).toBe('modern');
    const result = await alice.client.callTool({ name: 'ask__sample', arguments: { text: 'auto' } });
    expect(textOf(result)).toBe('sampled auto: from the driver');
  });

  it('two rounds: the retry that answers the first request gets the second as input_required, and the call goes on after its stream ended', async () => {
    const before = broker.records().length;
    const alice = await modernClient(TOKENS.ALICE_TOKEN, false);
    const twice = (extra: Record<string, unknown> = {}) =>
      alice.client.request({ method: 'tools/call', params: { name: 'ask__twice', arguments: { text: 'x' }, ...extra } }, { allowInputRequired: true }) as Promise<CallToolResult | InputRequiredResult>;
    const promptOf = (r: InputRequiredResult, key: string) => (r.inputRequests![key]!.params as { messages: { content: { text: string } }[] }).messages[0]!.content.text;
    const first = (await twice()) as InputRequiredResult;
    expect(promptOf(first, 'ask/1')).toBe('first x');
    const second = (await twice({ inputResponses: { 'ask/1': { role: 'assistant', content: { type: 'text', text: 'one' }, model: 'm' } }, requestState: first.requestState })) as InputRequiredResult;
    expect(isInputRequiredResult(second)).toBe(true);
    expect(Object.keys(second.inputRequests!)).toEqual(['ask/2']);
    expect(promptOf(second, 'ask/2')).toBe('second x');
    const done = (await twice({ inputResponses: { 'ask/2': { role: 'assistant', content: { type: 'text', text: 'two' }, model: 'm' } }, requestState: second.requestState })) as CallToolResult;
    expect(textOf(done)).toBe('twice: one / two');
    expect(broker.records().slice(before).map((r) => [r.name, r.outcome])).toEqual([['ask__twice', 'ok']]);
  });

  it('calls of alice and bob in flight at once each get only their own input request; a foreign state is refused; each retry gets its own result, one record each', async () => {
    const before = broker.records().length;
    const alice = await modernClient(TOKENS.ALICE_TOKEN, false);
    const bob = await modernClient(TOKENS.BOB_TOKEN, false);
    const a = (await alice.call('for alice')) as InputRequiredResult;
    expect(isInputRequiredResult(a)).toBe(true);
    // Alice's call is held in flight on the upstream while Bob's call asks.
    const b = (await bob.call('for bob')) as InputRequiredResult;
    expect(isInputRequiredResult(b)).toBe(true);
    const only = (r: InputRequiredResult) => {
      const entries = Object.entries(r.inputRequests!);
      expect(entries).toHaveLength(1);
      const [key, request] = entries[0]!;
      expect(key).toMatch(/^ask\/\d+$/);
      return { key, text: ((request.params as { messages: { content: { text: string } }[] }).messages[0]!.content.text) };
    };
    const aReq = only(a);
    const bReq = only(b);
    expect(aReq.text).toBe('for alice');
    expect(bReq.text).toBe('for bob');

    // Bob replays Alice's state (with her arguments): refused, and Alice's held request is not answered by it.
    const foreign = (await bob.call('for alice', { inputResponses: { [aReq.key]: { role: 'assistant', content: { type: 'text', text: 'bob steering' }, model: 'm' } }, requestState: a.requestState })) as CallToolResult;
    expect(foreign._meta?.['mcp-broker/outcome']).toBe('invalid_arguments');
    expect(textOf(foreign)).toContain('another principal');

    const bobDone = (await bob.call('for bob', { inputResponses: { [bReq.key]: { role: 'assistant', content: { type: 'text', text: 'bob says' }, model: 'm' } }, requestState: b.requestState })) as CallToolResult;
    expect(textOf(bobDone)).toBe('sampled for bob: bob says');
    const aliceDone = (await alice.call('for alice', { inputResponses: { [aReq.key]: { role: 'assistant', content: { type: 'text', text: 'alice says' }, model: 'm' } }, requestState: a.requestState })) as CallToolResult;
    expect(textOf(aliceDone)).toBe('sampled for alice: alice says');

    // Bob's refused replay left its own record (fail closed); each call its one.
    const records = broker.records().slice(before);
    expect(records.map((r) => [r.principal, r.name, r.outcome, r.attempts]).sort()).toEqual([
      ['alice', 'ask__sample', 'ok', 1],
      ['bob', 'ask__sample', 'invalid_arguments', 0],
      ['bob', 'ask__sample', 'ok', 1],
    ]);
  });

  it('a retry that reaches another broker process (same store) is refused: the held call lives in the process that answered input_required', async () => {
    const other = await startHttpBroker({
      servers: { ask: { type: 'http', url: upstreamUrl, era: 'legacy' } },
      extra: {
        principals: { alice: { token: '${env:ALICE_TOKEN}' }, bob: { token: '${env:BOB_TOKEN}' } },
        http: { clientCapabilities: { sampling: {}, elicitation: {} } },
        broker: { dataDir: `${broker.dir}/data` },
      },
      env: TOKENS,
    });
    try {
      const here = await modernClient(TOKENS.ALICE_TOKEN, false);
      const there = await modernClient(TOKENS.ALICE_TOKEN, false, 'answer', other.url);
      const asked = (await here.call('where')) as InputRequiredResult;
      const inputResponses = { 'ask/1': { role: 'assistant', content: { type: 'text', text: 'elsewhere' }, model: 'm' } };
      const refused = (await there.call('where', { inputResponses, requestState: asked.requestState })) as CallToolResult;
      expect(refused._meta?.['mcp-broker/outcome']).toBe('invalid_arguments');
      expect(textOf(refused)).toContain('not held by this broker process');
      // The process that holds it still takes the retry.
      const done = (await here.call('where', { inputResponses, requestState: asked.requestState })) as CallToolResult;
      expect(textOf(done)).toBe('sampled where: elsewhere');
    } finally {
      await other.close();
    }
  });

  it('a request that did not declare sampling is not held: the upstream is refused and the call answered -32021 naming the capability, one record', async () => {
    const before = broker.records().length;
    const client = new Client({ name: 'no-sampling', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' }, capabilities: {}, inputRequired: { autoFulfill: false } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TOKENS.BOB_TOKEN}` } } }), { timeout: 20_000 });
    clients.push(client);
    const err = await client
      .request({ method: 'tools/call', params: { name: 'ask__sample', arguments: { text: 'undeclared' } } }, { allowInputRequired: true })
      .then(() => undefined, (e: { code?: number; data?: unknown }) => e);
    expect(err?.code).toBe(-32021);
    expect(err?.data).toMatchObject({ requiredCapabilities: { sampling: {} } });
    expect(broker.records().slice(before)).toHaveLength(1);
  });
  it("a call made over the admin API (no client session) never has its upstream's request routed to another principal's call in flight (regression: bob's client was asked alice's prompt)", async () => {
    // Bob: a 2025-11-25 session whose sampling answer is held, so his call stays in flight.
    const bob = new Client({ name: 'held-http-bob', version: '1.0.0' }, { capabilities: { sampling: {} } });
    const prompts: string[] = [];
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let asked!: () => void;
    const bobAsked = new Promise<void>((resolve) => (asked = resolve));
    bob.setRequestHandler('sampling/createMessage', async (req) => {
      prompts.push(JSON.stringify(req.params.messages));
      asked();
      if (prompts.length === 1) await released; // his own call's question waits; any other is answered at once
      return { role: 'assistant', content: { type: 'text', text: 'from bob' }, model: 'm' };
    });
    await bob.connect(new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TOKENS.BOB_TOKEN}` } } }), { timeout: 20_000 });
    clients.push(bob);
    const bobCall = bob.callTool({ name: 'ask__sample', arguments: { text: 'bob-question' } });
    await bobAsked;
    // Alice over the admin API while bob's call waits: her call's sampling request must not reach bob.
    const res = await fetch(`${broker.url}/api/v1/mcp/call`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKENS.ALICE_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ subject: 'ask__sample', args: { text: 'alice-private-question' } }),
    });
    const alice = (await res.json()) as { outcome: string; result?: unknown };
    expect(JSON.stringify(alice)).not.toContain('from bob');
    expect(alice.outcome).not.toBe('ok');
    release();
    expect(textOf(await bobCall)).toContain('from bob');
    expect(prompts.join('\n')).not.toContain('alice-private-question');
    expect(prompts).toHaveLength(1);
  });
});
