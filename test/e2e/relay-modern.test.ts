/**
 * A modern upstream's `input_required` relayed to a modern caller (broker/relay-input.ts), over
 * the wire: the built CLI on stdio in front of test/fixtures/modern-upstream.mjs (its `ask` tool
 * answers `input_required` with the key `answer` and its own requestState `asked:<question>`,
 * and on the retry echoes both), and an SDK v2 client in the 2026-07-28 era driving the retries
 * itself. Also through a chain of two brokers (B's upstream is broker A on stdio). What reached the
 * upstream is read from the fixture's own log and answers, never from the broker's word.
 */
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { Client, isInputRequiredResult, ProtocolError, type CallToolResult, type InputRequiredResult } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterEach, assert, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, readNdjson, waitFor, writeConfig } from './helpers.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const MODERN = fixture('modern-upstream.mjs');

/** A modern client on a broker whose only upstream is `servers`; `autoFulfill` off: the test answers each round. */
async function start(servers: Record<string, unknown>, options: { autoFulfill?: boolean; extra?: Record<string, unknown> } = {}) {
  const { dir, configPath, recordsPath } = writeConfig(servers, options.extra);
  const client = new Client(
    { name: 'relay-modern', version: '1.0.0' },
    { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} } }, ...(options.autoFulfill ? {} : { inputRequired: { autoFulfill: false } }) },
  );
  client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { answer: 'green' } }));
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), { timeout: 30_000 });
  cleanups.push(async () => {
    await client.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  const call = (name: string, args: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    client.request({ method: 'tools/call', params: { name, arguments: args, ...extra } }, { allowInputRequired: true }) as Promise<CallToolResult | InputRequiredResult>;
  return { dir, client, call, records: () => readNdjson(recordsPath) };
}

function modernUpstream(dir?: string) {
  return nodeServer(MODERN, { env: { FIXTURE_LOG: dir ? join(dir, 'fixture.ndjson') : '${configDir}/fixture.ndjson' } });
}

const upstreamCalls = (dir: string, tool: string) => readNdjson<{ event: string; tool?: string }>(join(dir, 'fixture.ndjson')).filter((e) => e.event === 'call' && e.tool === tool);

describe('a modern upstream asks a modern caller (input_required relayed)', () => {
  it("the relayed answer's members other than the input requests, and an upstream's -32021 passed on, are scrubbed too (regression: both reached the caller as sent)", async () => {
    const secret = `relay-secret-${process.pid}-4b7d`;
    const { dir, configPath } = writeConfig({ up: nodeServer(MODERN, { env: { FIXTURE_SECRET: '${env:RELAY_SECRET}', FIXTURE_LOG: '${configDir}/fixture.ndjson' } }) });
    const client = new Client({ name: 'relay-scrub', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} } }, inputRequired: { autoFulfill: false } });
    await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore', env: { ...process.env, RELAY_SECRET: secret } as Record<string, string> }), { timeout: 30_000 });
    cleanups.push(async () => {
      await client.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    });
    const first = await client.request({ method: 'tools/call', params: { name: 'up__ask', arguments: { question: 'colour?' } } }, { allowInputRequired: true });
    assert(isInputRequiredResult(first), `not input_required: ${JSON.stringify(first)}`);
    expect(JSON.stringify(first)).not.toContain(secret);
    expect(first._meta?.hint).toBe('hint [REDACTED]');
    expect(first.inputRequests!.answer).toMatchObject({ method: 'elicitation/create', params: { message: 'colour?' } });
    // An upstream's -32021 reaches the modern caller as that error, its message and data scrubbed.
    const refused = await client.request({ method: 'tools/call', params: { name: 'up__needs_sampling', arguments: {} } }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(ProtocolError.isInstance(refused)).toBe(true);
    const error = refused as ProtocolError;
    expect(error.code).toBe(-32021);
    expect(JSON.stringify({ message: error.message, data: error.data })).not.toContain(secret);
    expect(error.message).toContain('needs sampling, [REDACTED]');
    expect(error.data).toMatchObject({ requiredCapabilities: { sampling: {} } });
  });

  it("relays the upstream's input request with its key, seals its state, and the retry reaches the same upstream tool with its own state", async () => {
    const b = await start({ up: modernUpstream() });
    expect(b.client.getProtocolEra()).toBe('modern');
    const first = await b.call('up__ask', { question: 'colour?' });
    expect(isInputRequiredResult(first)).toBe(true);
    const { inputRequests, requestState } = first as InputRequiredResult;
    expect(Object.keys(inputRequests!)).toEqual(['answer']);
    expect(inputRequests!.answer).toMatchObject({ method: 'elicitation/create', params: { message: 'colour?' } });
    // Ours, sealed: the upstream's own state is not readable in it.
    expect(requestState!.startsWith('mb3.relay.')).toBe(true);
    expect(Buffer.from(requestState!.slice('mb3.relay.'.length), 'base64url').toString('latin1')).not.toContain('asked:');
    const done = (await b.call('up__ask', { question: 'colour?' }, { inputResponses: { answer: { action: 'accept', content: { answer: 'blue' } } }, requestState })) as CallToolResult;
    expect(done.content).toEqual([{ type: 'text', text: 'answer=blue state=asked:colour?' }]);
    expect(upstreamCalls(b.dir, 'ask')).toHaveLength(2);
    const records = b.records();
    expect(records.map((r) => r.outcome)).toEqual(['ok', 'ok']);
    expect(records.map((r) => (r as { resultType?: string }).resultType)).toEqual(['input_required', undefined]);
  });

  it('the SDK client answers the relayed request with its own handler and retries by itself', async () => {
    const b = await start({ up: modernUpstream() }, { autoFulfill: true });
    const result = await b.client.callTool({ name: 'up__ask', arguments: { question: 'colour?' } });
    expect(result.content).toEqual([{ type: 'text', text: 'answer=green state=asked:colour?' }]);
  });

  it('a tampered, foreign or re-pointed requestState is refused with -32602 and nothing is sent upstream', async () => {
    const b = await start({ up: modernUpstream() });
    const first = (await b.call('up__ask', { question: 'colour?' })) as InputRequiredResult;
    const state = first.requestState!;
    const inputResponses = { answer: { action: 'accept', content: { answer: 'blue' } } };
    const before = upstreamCalls(b.dir, 'ask').length;
    const flipped = state.slice(0, 20) + (state[20] === 'A' ? 'B' : 'A') + state.slice(21);
    for (const bad of [`${state}-TAMPERED`, flipped, 'asked:colour?', 'mb2.', 'mb3.relay.']) {
      const err = await b.call('up__ask', { question: 'colour?' }, { inputResponses, requestState: bad }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ProtocolError);
      expect((err as ProtocolError).code).toBe(-32602);
    }
    // Other arguments, or another tool of the same upstream: made for another call.
    await expect(b.call('up__ask', { question: 'size?' }, { inputResponses, requestState: state })).rejects.toMatchObject({ code: -32602 });
    await expect(b.call('up__whoami', {}, { inputResponses, requestState: state })).rejects.toMatchObject({ code: -32602 });
    expect(upstreamCalls(b.dir, 'ask')).toHaveLength(before);
    expect(upstreamCalls(b.dir, 'whoami')).toHaveLength(0);
    const refused = b.records().filter((r) => r.outcome === 'invalid_arguments');
    expect(refused).toHaveLength(7);
    expect(refused.every((r) => r.attempts === 0)).toBe(true);
    // The intact state still works.
    const done = (await b.call('up__ask', { question: 'colour?' }, { inputResponses, requestState: state })) as CallToolResult;
    expect(done.content).toEqual([{ type: 'text', text: 'answer=blue state=asked:colour?' }]);
  });

  it("an asked tool: approved once through the broker's question, then the upstream's question relayed; the approval runs one call", async () => {
    const b = await start({ up: modernUpstream() }, { extra: { policy: { rules: [{ tools: ['up__ask'], action: 'ask' }] } } });
    const args = { question: 'colour?' };
    const approval = (await b.call('up__ask', args)) as InputRequiredResult;
    expect(Object.keys(approval.inputRequests!)).toEqual(['mcp-broker/approval']);
    expect(upstreamCalls(b.dir, 'ask')).toHaveLength(0);
    const relayed = (await b.call('up__ask', args, { inputResponses: { 'mcp-broker/approval': { action: 'accept', content: {} } }, requestState: approval.requestState })) as InputRequiredResult;
    expect(Object.keys(relayed.inputRequests!)).toEqual(['answer']);
    const retry = { inputResponses: { answer: { action: 'accept', content: { answer: 'blue' } } }, requestState: relayed.requestState };
    const done = (await b.call('up__ask', args, retry)) as CallToolResult;
    expect(done.content).toEqual([{ type: 'text', text: 'answer=blue state=asked:colour?' }]);
    expect(upstreamCalls(b.dir, 'ask')).toHaveLength(2);
    // The same retry again: its approval is spent, so it does not run a second time.
    const replay = (await b.call('up__ask', args, retry)) as CallToolResult;
    expect(replay._meta?.['mcp-broker/outcome']).toBe('approval_required');
    expect(upstreamCalls(b.dir, 'ask')).toHaveLength(2);
    expect(b.records().map((r) => r.outcome)).toEqual(['approval_required', 'ok', 'ok', 'approval_required']);
  });

  it('an asked tool: a retry whose relay state is refused (tampered, other arguments) is -32602 and invalid_arguments as without ask, not approval_required; the intact one still runs', async () => {
    const b = await start({ up: modernUpstream() }, { extra: { policy: { rules: [{ tools: ['up__ask'], action: 'ask' }] } } });
    const args = { question: 'colour?' };
    const approval = (await b.call('up__ask', args)) as InputRequiredResult;
    expect(Object.keys(approval.inputRequests!)).toEqual(['mcp-broker/approval']);
    const relayed = (await b.call('up__ask', args, { inputResponses: { 'mcp-broker/approval': { action: 'accept', content: {} } }, requestState: approval.requestState })) as InputRequiredResult;
    expect(Object.keys(relayed.inputRequests!)).toEqual(['answer']);
    const state = relayed.requestState!;
    const inputResponses = { answer: { action: 'accept', content: { answer: 'blue' } } };
    const flipped = state.slice(0, 20) + (state[20] === 'A' ? 'B' : 'A') + state.slice(21);
    for (const [a, bad, why] of [
      [args, `${state.slice(0, -4)}AAAA`, 'does not verify'],
      [args, flipped, 'does not verify'],
      [{ question: 'size?' }, state, 'made for another call'],
    ] as const) {
      const err = await b.call('up__ask', a, { inputResponses, requestState: bad }).then(
        (r) => r,
        (e: unknown) => e,
      );
      assert(ProtocolError.isInstance(err), `not refused with a JSON-RPC error: ${JSON.stringify(err)}`);
      expect(err.code).toBe(-32602);
      expect(err.message).toContain(why);
    }
    expect(upstreamCalls(b.dir, 'ask')).toHaveLength(1);
    const done = (await b.call('up__ask', args, { inputResponses, requestState: state })) as CallToolResult;
    expect(done.content).toEqual([{ type: 'text', text: 'answer=blue state=asked:colour?' }]);
    expect(b.records().map((r) => [r.outcome, r.attempts])).toEqual([
      ['approval_required', 0],
      ['ok', 1],
      ['invalid_arguments', 0],
      ['invalid_arguments', 0],
      ['invalid_arguments', 0],
      ['ok', 1],
    ]);
  });

  it('an asked tool under askMode park: approved in the inbox, the retry answering its relayed round runs without parking again; a refused or spent state is not parked either', async () => {
    const b = await start({ up: modernUpstream() }, { extra: { policy: { askMode: 'park', rules: [{ tools: ['up__ask'], action: 'ask' }] } } });
    const args = { question: 'colour?' };
    const parked = async () => {
      const listed = (await b.call('broker__approvals_list', {})) as CallToolResult;
      return (listed.structuredContent as { approvals: { id: string; tool: string }[] }).approvals;
    };
    const first = b.call('up__ask', args);
    const id = await waitFor(async () => (await parked())[0]?.id, 'the first call to park', 15_000, 50);
    await b.call('broker__approvals_decide', { id, approve: true });
    const relayed = (await first) as InputRequiredResult;
    expect(Object.keys(relayed.inputRequests!)).toEqual(['answer']);
    expect(upstreamCalls(b.dir, 'ask')).toHaveLength(1);
    const state = relayed.requestState!;
    const inputResponses = { answer: { action: 'accept', content: { answer: 'blue' } } };
    await expect(b.call('up__ask', args, { inputResponses, requestState: `${state.slice(0, -4)}AAAA` })).rejects.toMatchObject({ code: -32602 });
    expect(await parked()).toEqual([]);
    // Answered (not parked, which would leave it waiting on the inbox): the upstream's answer.
    let answered: { result: unknown } | undefined;
    void b.call('up__ask', args, { inputResponses, requestState: state }).then(
      (result) => (answered = { result }),
      (error: unknown) => (answered = { result: error }),
    );
    const seen = await waitFor(async () => answered ?? ((await parked()).length > 0 && { parkedAgain: true }), 'the retry to be answered or parked', 15_000, 50);
    expect(seen).not.toHaveProperty('parkedAgain');
    expect((seen as { result: CallToolResult }).result.content).toEqual([{ type: 'text', text: 'answer=blue state=asked:colour?' }]);
    expect(upstreamCalls(b.dir, 'ask')).toHaveLength(2);
    // The approval ran one call: the same retry again is approval_required at once, not parked.
    const replay = (await b.call('up__ask', args, { inputResponses, requestState: state })) as CallToolResult;
    expect(replay._meta?.['mcp-broker/outcome']).toBe('approval_required');
    expect(replay.content).toEqual([expect.objectContaining({ text: expect.stringContaining('used already') })]);
    expect(await parked()).toEqual([]);
    expect(upstreamCalls(b.dir, 'ask')).toHaveLength(2);
    expect(b.records().filter((r) => r.name === 'up__ask').map((r) => [r.outcome, r.attempts])).toEqual([
      ['ok', 1],
      ['invalid_arguments', 0],
      ['ok', 1],
      ['approval_required', 0],
    ]);
  });

  it('prompts/get: the relayed round and the retry reach the same upstream prompt; a tampered state is -32602 and not sent', async () => {
    const b = await start({ up: modernUpstream() });
    const get = (extra: Record<string, unknown> = {}) =>
      b.client.request({ method: 'prompts/get', params: { name: 'up__confirm', arguments: { topic: 'deploy' }, ...extra } }, { allowInputRequired: true }) as Promise<
        Record<string, unknown>
      >;
    const first = (await get()) as unknown as InputRequiredResult;
    expect(isInputRequiredResult(first)).toBe(true);
    expect(Object.keys(first.inputRequests!)).toEqual(['answer']);
    expect(first.requestState!.startsWith('mb3.relay.')).toBe(true);
    const inputResponses = { answer: { action: 'accept', content: { answer: 'yes' } } };
    const prompts = () => readNdjson<{ event: string }>(join(b.dir, 'fixture.ndjson')).filter((e) => e.event === 'prompt');
    await expect(get({ inputResponses, requestState: `${first.requestState}-TAMPERED` })).rejects.toMatchObject({ code: -32602 });
    await expect(get({ arguments: { topic: 'other' }, inputResponses, requestState: first.requestState })).rejects.toMatchObject({ code: -32602 });
    expect(prompts()).toHaveLength(1);
    const done = await get({ inputResponses, requestState: first.requestState });
    expect(done.messages).toEqual([{ role: 'user', content: { type: 'text', text: 'confirmed deploy: yes' } }]);
    const records = b.records().filter((r) => (r as { kind?: string }).kind === 'prompt');
    expect(records.map((r) => [r.outcome, (r as { resultType?: string }).resultType])).toEqual([
      ['ok', 'input_required'],
      ['invalid_arguments', undefined],
      ['invalid_arguments', undefined],
      ['ok', undefined],
    ]);
  });

  it("an asked prompt: the broker's question first (input_required), then the upstream's relayed; the approval serves one request", async () => {
    const b = await start({ up: modernUpstream() }, { extra: { policy: { rules: [{ prompts: ['up__confirm'], action: 'ask' }] } } });
    const get = (extra: Record<string, unknown> = {}) =>
      b.client.request({ method: 'prompts/get', params: { name: 'up__confirm', arguments: { topic: 'deploy' }, ...extra } }, { allowInputRequired: true }) as Promise<
        Record<string, unknown>
      >;
    const prompts = () => readNdjson<{ event: string }>(join(b.dir, 'fixture.ndjson')).filter((e) => e.event === 'prompt');
    const approval = (await get()) as unknown as InputRequiredResult;
    expect(Object.keys(approval.inputRequests!)).toEqual(['mcp-broker/approval']);
    expect(prompts()).toHaveLength(0);
    const relayed = (await get({ inputResponses: { 'mcp-broker/approval': { action: 'accept', content: {} } }, requestState: approval.requestState })) as unknown as InputRequiredResult;
    expect(Object.keys(relayed.inputRequests!)).toEqual(['answer']);
    const retry = { inputResponses: { answer: { action: 'accept', content: { answer: 'yes' } } }, requestState: relayed.requestState };
    expect((await get(retry)).messages).toEqual([{ role: 'user', content: { type: 'text', text: 'confirmed deploy: yes' } }]);
    expect(prompts()).toHaveLength(2);
    await expect(get(retry)).rejects.toMatchObject({ code: -32003 });
    expect(prompts()).toHaveLength(2);
    expect(b.records().map((r) => r.outcome)).toEqual(['approval_required', 'ok', 'ok', 'approval_required']);
  });

  it("through two brokers: B relays A's relay, each seals its own state, and the answer reaches the modern fixture", async () => {
    const a = writeConfig({ up: modernUpstream() });
    cleanups.push(async () => rmSync(a.dir, { recursive: true, force: true }));
    const b = await start({ a: { command: process.execPath, args: [CLI, '--config', a.configPath], cwd: a.dir } });
    const first = (await b.call('a__up__ask', { question: 'colour?' })) as InputRequiredResult;
    expect(isInputRequiredResult(first)).toBe(true);
    expect(Object.keys(first.inputRequests!)).toEqual(['answer']);
    const inputResponses = { answer: { action: 'accept', content: { answer: 'blue' } } };
    await expect(b.call('a__up__ask', { question: 'colour?' }, { inputResponses, requestState: `${first.requestState}-TAMPERED` })).rejects.toMatchObject({ code: -32602 });
    expect(upstreamCalls(a.dir, 'ask')).toHaveLength(1);
    const done = (await b.call('a__up__ask', { question: 'colour?' }, { inputResponses, requestState: first.requestState })) as CallToolResult;
    expect(done.content).toEqual([{ type: 'text', text: 'answer=blue state=asked:colour?' }]);
    expect(upstreamCalls(a.dir, 'ask')).toHaveLength(2);
    expect(readNdjson(a.recordsPath).map((r) => r.outcome)).toEqual(['ok', 'ok']);
    expect(b.records().map((r) => r.outcome)).toEqual(['ok', 'invalid_arguments', 'ok']);
  });
});

describe('the conformance fixture (both eras) behind the broker', () => {
  const CONFORMANCE = fixture('conformance-server.mjs');

  it('multi-round: each round is relayed with a fresh sealed state carrying the evolved upstream state', async () => {
    const b = await start({ conf: nodeServer(CONFORMANCE, { prefix: false }) });
    const r1 = (await b.call('test_input_required_result_multi_round', {})) as InputRequiredResult;
    expect(Object.keys(r1.inputRequests!)).toEqual(['step1']);
    const r2 = (await b.call('test_input_required_result_multi_round', {}, { inputResponses: { step1: { action: 'accept', content: { name: 'Ada' } } }, requestState: r1.requestState })) as InputRequiredResult;
    expect(isInputRequiredResult(r2)).toBe(true);
    expect(Object.keys(r2.inputRequests!)).toEqual(['step2']);
    expect(r2.requestState).not.toBe(r1.requestState);
    const done = (await b.call('test_input_required_result_multi_round', {}, { inputResponses: { step2: { action: 'accept', content: { color: 'teal' } } }, requestState: r2.requestState })) as CallToolResult;
    expect(done.content).toEqual([{ type: 'text', text: 'name=Ada color=teal' }]);
    expect(b.records().map((r) => (r as { resultType?: string }).resultType)).toEqual(['input_required', 'input_required', undefined]);
  });

  it("a request that needs a capability it did not declare gets the upstream's -32021", async () => {
    const b = await start({ conf: nodeServer(CONFORMANCE, { prefix: false }) });
    // The client declared elicitation only; the tool asks for sampling.
    await expect(b.call('test_missing_capability', {})).rejects.toMatchObject({ code: -32021 });
    expect(b.records().map((r) => r.outcome)).toEqual(['upstream_error']);
  });

  it('a 2025-11-25 client still gets the modern upstream\'s questions as live requests', async () => {
    const { dir, configPath } = writeConfig({ conf: nodeServer(CONFORMANCE, { prefix: false }) });
    const client = new Client({ name: 'relay-legacy', version: '1.0.0' }, { capabilities: { sampling: {} } });
    client.setRequestHandler('sampling/createMessage', async () => ({ role: 'assistant', content: { type: 'text', text: 'four' }, model: 'm' }));
    await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), { timeout: 30_000 });
    cleanups.push(async () => {
      await client.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    });
    expect(client.getProtocolEra()).toBe('legacy');
    const result = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'two plus two' } });
    expect(result.content).toEqual([{ type: 'text', text: 'LLM response: four' }]);
  });
});
