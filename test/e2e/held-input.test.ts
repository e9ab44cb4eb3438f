/**
 * A legacy (2025-11-25) upstream's sampling, elicitation and roots requests during a modern
 * (2026-07-28) caller's call, over the built CLI on stdio: the call is answered `input_required`
 * with the upstream's request (key namespaced by the upstream), the upstream's request is held,
 * and the client's retry answers it and joins the call in flight (the tool runs once, one record).
 * Upstream: test/fixtures/conformance-server.mjs `--legacy`. Client: an SDK v2 client at the
 * 2026-07-28 era, either its own input-required driver (autoFulfill) or driven by hand.
 */
import { rmSync } from 'node:fs';
import { Client, isInputRequiredResult, type CallToolResult, type InputRequiredResult } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, readNdjson, waitFor, writeConfig, type RecordLine } from './helpers.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const textOf = (r: unknown) => ((r as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('');

async function start(options: {
  autoFulfill: boolean;
  askTimeoutMs?: number;
  capabilities?: Record<string, unknown>;
  broker?: Record<string, unknown>;
  /** `policy.rules`. */
  rules?: unknown[];
}) {
  const policy = { ...(options.askTimeoutMs && { askTimeoutMs: options.askTimeoutMs }), ...(options.rules && { rules: options.rules }) };
  const { dir, configPath, recordsPath } = writeConfig(
    { conf: nodeServer(fixture('conformance-server.mjs'), { args: [fixture('conformance-server.mjs'), '--legacy'] }) },
    { ...(Object.keys(policy).length && { policy }), ...(options.broker && { broker: options.broker }) },
  );
  const client = new Client(
    { name: 'held-input', version: '1.0.0' },
    {
      versionNegotiation: { mode: 'auto' },
      capabilities: options.capabilities ?? { sampling: {}, elicitation: { form: {} }, roots: {} },
      ...(options.autoFulfill ? {} : { inputRequired: { autoFulfill: false } }),
    },
  );
  const asked: string[] = [];
  const declared = options.capabilities ?? { sampling: {}, roots: {} };
  if (declared.sampling) client.setRequestHandler('sampling/createMessage', async (request) => {
    asked.push('sampling/createMessage');
    const first = (request.params.messages[0]?.content as { text?: string }).text;
    return { role: 'assistant', content: { type: 'text', text: `echo ${first}` }, model: 'test-model' };
  });
  client.setRequestHandler('elicitation/create', async () => {
    asked.push('elicitation/create');
    return { action: 'accept', content: { response: 'yes please' } };
  });
  if (declared.roots) client.setRequestHandler('roots/list', async () => {
    asked.push('roots/list');
    return { roots: [{ uri: 'file:///work/project', name: 'project' }] };
  });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), { timeout: 20_000 });
  cleanups.push(async () => {
    await client.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  const call = (name: string, args: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    client.request({ method: 'tools/call', params: { name, arguments: args, ...extra } }, { allowInputRequired: true }) as Promise<CallToolResult | InputRequiredResult>;
  return { client, asked, call, records: () => readNdjson<RecordLine>(recordsPath) };
}

describe('a legacy upstream asks a 2026-07-28 caller for input (stdio)', () => {
  it("sampling, elicitation and roots: the SDK client answers each input request, the call goes on, one record each", async () => {
    const b = await start({ autoFulfill: true });
    expect(b.client.getProtocolEra()).toBe('modern');
    expect(textOf(await b.client.callTool({ name: 'conf__test_sampling', arguments: { prompt: 'hello' } }))).toBe('LLM response: echo hello');
    expect(textOf(await b.client.callTool({ name: 'conf__test_elicitation', arguments: { message: 'go on?' } }))).toContain('yes please');
    expect(textOf(await b.client.callTool({ name: 'conf__test_list_roots', arguments: {} }))).toBe('roots: file:///work/project');
    expect(b.asked).toEqual(['sampling/createMessage', 'elicitation/create', 'roots/list']);
    const records = b.records();
    expect(records.map((r) => [r.name, r.outcome])).toEqual([
      ['conf__test_sampling', 'ok'],
      ['conf__test_elicitation', 'ok'],
      ['conf__test_list_roots', 'ok'],
    ]);
  });

  it('by hand: the input request carries the upstream request under a key of the upstream; a tampered state is refused, answers nothing and leaves a record; the valid retry gets the result', async () => {
    const b = await start({ autoFulfill: false });
    const first = await b.call('conf__test_sampling', { prompt: 'by hand' });
    expect(isInputRequiredResult(first)).toBe(true);
    const { inputRequests, requestState } = first as InputRequiredResult;
    expect(Object.keys(inputRequests!)).toEqual(['conf/1']);
    expect(inputRequests!['conf/1']).toMatchObject({ method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: 'by hand' } }] } });
    const answer = { 'conf/1': { role: 'assistant', content: { type: 'text', text: 'from the human' }, model: 'm' } };

    const tampered = (await b.call('conf__test_sampling', { prompt: 'by hand' }, { inputResponses: answer, requestState: `${requestState!.slice(0, -4)}AAAA` })) as CallToolResult;
    expect(tampered.isError).toBe(true);
    expect(tampered._meta?.['mcp-broker/outcome']).toBe('invalid_arguments');
    expect(textOf(tampered)).toContain('does not verify');
    const otherArgs = (await b.call('conf__test_sampling', { prompt: 'something else' }, { inputResponses: answer, requestState })) as CallToolResult;
    expect(textOf(otherArgs)).toContain('the arguments differ');
    // Nothing answered the held request yet and nothing ran twice (the held call has no record);
    // each refused retry left its own record (fail closed), nothing sent.
    const refusals = b.records();
    expect(refusals.map((r) => [r.name, r.outcome, r.attempts])).toEqual([
      ['conf__test_sampling', 'invalid_arguments', 0],
      ['conf__test_sampling', 'invalid_arguments', 0],
    ]);
    expect(refusals[0]!.reason).toContain('does not verify');
    expect(refusals[1]!.reason).toContain('the arguments differ');
    expect(refusals[0]!.sessionId).toBeNull();

    // A valid state without the answer is handed the same request again.
    const again = (await b.call('conf__test_sampling', { prompt: 'by hand' }, { requestState })) as InputRequiredResult;
    expect(isInputRequiredResult(again)).toBe(true);
    expect(Object.keys(again.inputRequests!)).toEqual(['conf/1']);

    const done = (await b.call('conf__test_sampling', { prompt: 'by hand' }, { inputResponses: answer, requestState: again.requestState })) as CallToolResult;
    expect(textOf(done)).toBe('LLM response: from the human');
    // The state of an answered round answers nothing more.
    const replay = (await b.call('conf__test_sampling', { prompt: 'by hand' }, { inputResponses: answer, requestState: again.requestState })) as CallToolResult;
    expect(replay._meta?.['mcp-broker/outcome']).toBe('invalid_arguments');
    expect(b.asked).toEqual([]);
    const records = b.records();
    expect(records.map((r) => r.outcome)).toEqual(['invalid_arguments', 'invalid_arguments', 'ok', 'invalid_arguments']);
    expect(records[2]!.sessionId).toBeNull();
  });

  it('under policy ask: a refused held retry (other arguments, a tampered state) is recorded invalid_arguments, not approval_required; the valid one gets the result', async () => {
    const b = await start({ autoFulfill: false, rules: [{ tools: ['conf__test_sampling'], action: 'ask' }] });
    const args = { prompt: 'asked first' };
    const asked = (await b.call('conf__test_sampling', args)) as InputRequiredResult;
    expect(isInputRequiredResult(asked)).toBe(true);
    expect(Object.keys(asked.inputRequests!)).toEqual(['mcp-broker/approval']);
    // Approved: the call runs, and the legacy upstream asks for sampling: held.
    const held = (await b.call('conf__test_sampling', args, {
      inputResponses: { 'mcp-broker/approval': { action: 'accept', content: {} } },
      requestState: asked.requestState,
    })) as InputRequiredResult;
    expect(isInputRequiredResult(held)).toBe(true);
    expect(Object.keys(held.inputRequests!)).toEqual(['conf/1']);
    const answer = { 'conf/1': { role: 'assistant', content: { type: 'text', text: 'from the human' }, model: 'm' } };

    const otherArgs = (await b.call('conf__test_sampling', { prompt: 'something else' }, { inputResponses: answer, requestState: held.requestState })) as CallToolResult;
    expect(otherArgs.isError).toBe(true);
    expect(otherArgs._meta?.['mcp-broker/outcome']).toBe('invalid_arguments');
    expect(textOf(otherArgs)).toContain('the arguments differ');
    const tampered = (await b.call('conf__test_sampling', args, { inputResponses: answer, requestState: `${held.requestState!.slice(0, -4)}AAAA` })) as CallToolResult;
    expect(tampered._meta?.['mcp-broker/outcome']).toBe('invalid_arguments');
    expect(textOf(tampered)).toContain('does not verify');

    const done = (await b.call('conf__test_sampling', args, { inputResponses: answer, requestState: held.requestState })) as CallToolResult;
    expect(textOf(done)).toBe('LLM response: from the human');
    expect(b.records().map((r) => [r.outcome, r.attempts])).toEqual([
      ['approval_required', 0],
      ['invalid_arguments', 0],
      ['invalid_arguments', 0],
      ['ok', 1],
    ]);
  });

  it('a held request whose client never retries is answered with an error at policy.askTimeoutMs: the call ends timeout, one record; a late retry is refused', async () => {
    const b = await start({ autoFulfill: false, askTimeoutMs: 400 });
    const first = (await b.call('conf__test_elicitation', { message: 'anyone?' })) as InputRequiredResult;
    expect(isInputRequiredResult(first)).toBe(true);
    const records = await waitFor(() => (b.records().length ? b.records() : undefined), 'the held call to be recorded', 10_000);
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ name: 'conf__test_elicitation', outcome: 'timeout' });
    expect(records[0]!.reason).toContain('did not answer the upstream\'s elicitation/create');
    const late = (await b.call('conf__test_elicitation', { message: 'anyone?' }, { inputResponses: { 'conf/1': { action: 'accept', content: { response: 'late' } } }, requestState: first.requestState })) as CallToolResult;
    expect(late._meta?.['mcp-broker/outcome']).toBe('invalid_arguments');
    expect(textOf(late)).toMatch(/expired|not held/);
    expect(b.records().map((r) => [r.outcome, r.attempts])).toEqual([
      ['timeout', 1],
      ['invalid_arguments', 0],
    ]);
  });

  it.each([
    ['policy.askTimeoutMs passes first', 300, {}],
    // As with the defaults (broker.timeoutMs 60 s, askTimeoutMs 120 s): the call's deadline ends the held call.
    ['the deadline passes first', 5_000, { timeoutMs: 300 }],
  ] as const)("held requests its caller never answers are the caller's wait, not the upstream's failure: they open no breaker (%s)", async (_what, askTimeoutMs, broker) => {
    const b = await start({ autoFulfill: false, askTimeoutMs, broker: { ...broker, breaker: { threshold: 2, openMs: 60_000 } } });
    for (let n = 1; n <= 2; n++) {
      expect(isInputRequiredResult(await b.call('conf__test_elicitation', { message: `anyone ${n}?` }))).toBe(true);
      await waitFor(() => (b.records().length >= n ? true : undefined), `held call ${n} to be recorded`, 10_000);
    }
    expect(b.records().map((r) => [r.outcome, r.breaker])).toEqual([
      ['timeout', 'closed'],
      ['timeout', 'closed'],
    ]);
    // The tool still runs for whoever calls it next (another principal's call goes the same way).
    const next = await b.call('conf__test_elicitation', { message: 'still there?' });
    expect(isInputRequiredResult(next)).toBe(true);
  });
});
