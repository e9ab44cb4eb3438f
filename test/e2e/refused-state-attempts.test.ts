/**
 * A modern (2026-07-28) retry of a `prompts/get` or `resources/read` whose `requestState` the
 * broker refuses sends nothing upstream, so its record says `attempts: 0`, with or without `ask`:
 * the built CLI on stdio in front of test/fixtures/asking-prompt.mjs (a 2025-11-25 upstream whose
 * prompt `ask` and resource `ask://doc` sample during their request: held) and
 * test/fixtures/modern-upstream.mjs (its prompt `confirm` answers `input_required`: relayed).
 */
import { rmSync } from 'node:fs';
import { Client, isInputRequiredResult, ProtocolError, type InputRequiredResult } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterEach, assert, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, readNdjson, writeConfig, type RecordLine } from './helpers.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const sampled = (text: string) => ({ role: 'assistant' as const, content: { type: 'text' as const, text }, model: 'm' });
type Method = 'prompts/get' | 'resources/read';

async function start(servers: Record<string, unknown>, policy: Record<string, unknown> = {}) {
  const { dir, configPath, recordsPath } = writeConfig(servers, { policy });
  const client = new Client(
    { name: 'refused-state-attempts', version: '1.0.0' },
    { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} }, sampling: {} }, inputRequired: { autoFulfill: false } },
  );
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), { timeout: 30_000 });
  cleanups.push(async () => {
    await client.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  expect(client.getProtocolEra()).toBe('modern');
  const request = (method: Method, params: Record<string, unknown>) => client.request({ method, params }, { allowInputRequired: true }) as Promise<Record<string, unknown>>;
  const refused = async (method: Method, params: Record<string, unknown>) => {
    const err = await request(method, params).then(
      (r) => r,
      (e: unknown) => e,
    );
    assert(ProtocolError.isInstance(err), `not refused with a JSON-RPC error: ${JSON.stringify(err)}`);
    expect(err.code).toBe(-32602);
    return err;
  };
  return { request, refused, records: () => readNdjson<RecordLine>(recordsPath) };
}

describe('a refused requestState of a prompt or resource is recorded with 0 attempts', () => {
  it.each([
    ['prompts/get', 'prompt', { name: 'ask__ask', arguments: { topic: 'tea' } }, {}],
    ['resources/read', 'resource', { uri: 'ask://doc' }, {}],
    ['prompts/get', 'prompt', { name: 'ask__ask', arguments: { topic: 'tea' } }, { rules: [{ prompts: ['ask__ask'], action: 'ask' }] }],
  ] as const)('held (2025-11-25 upstream), %s (%s), policy %j: tampered, then answered already', async (method, kind, params, policy) => {
    const b = await start({ ask: nodeServer(fixture('asking-prompt.mjs')) }, policy);
    let held = (await b.request(method, params)) as unknown as InputRequiredResult;
    if (Object.keys(held.inputRequests!).includes('mcp-broker/approval')) {
      held = (await b.request(method, { ...params, inputResponses: { 'mcp-broker/approval': { action: 'accept', content: {} } }, requestState: held.requestState })) as unknown as InputRequiredResult;
    }
    assert(isInputRequiredResult(held), `not input_required: ${JSON.stringify(held)}`);
    const inputResponses = { 'ask/1': sampled('by hand') };
    const tampered = await b.refused(method, { ...params, inputResponses, requestState: `${held.requestState!.slice(0, -4)}AAAA` });
    expect(tampered.message).toContain('does not verify');
    await b.request(method, { ...params, inputResponses, requestState: held.requestState });
    const again = await b.refused(method, { ...params, inputResponses, requestState: held.requestState });
    expect(again.message).toMatch(/answered already|not held/);
    const mine = b.records().filter((r) => r.kind === kind);
    expect(mine.slice(-3).map((r) => [r.outcome, r.attempts])).toEqual([
      ['invalid_arguments', 0],
      ['ok', 1],
      ['invalid_arguments', 0],
    ]);
  });

  it('relayed (2026-07-28 upstream), no ask: a tampered state and one made for other arguments', async () => {
    const b = await start({ up: nodeServer(fixture('modern-upstream.mjs')) });
    const params = { name: 'up__confirm', arguments: { topic: 'deploy' } };
    const first = (await b.request('prompts/get', params)) as unknown as InputRequiredResult;
    assert(isInputRequiredResult(first));
    const inputResponses = { answer: { action: 'accept', content: { answer: 'yes' } } };
    await b.refused('prompts/get', { ...params, inputResponses, requestState: `${first.requestState!.slice(0, -4)}AAAA` });
    await b.refused('prompts/get', { ...params, arguments: { topic: 'other' }, inputResponses, requestState: first.requestState });
    expect(b.records().map((r) => [r.outcome, r.attempts])).toEqual([
      ['ok', 1],
      ['invalid_arguments', 0],
      ['invalid_arguments', 0],
    ]);
  });
});
