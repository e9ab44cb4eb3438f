/**
 * A modern caller's `prompts/get` and `resources/read` under policy `ask`, answering the input
 * requests of its upstream after the broker's own question was approved, over the wire: the built
 * CLI on stdio in front of test/fixtures/modern-upstream.mjs (its prompt `confirm` answers
 * `input_required` first: relayed, broker/relay-input.ts) or test/fixtures/asking-prompt.mjs (a
 * 2025-11-25 upstream whose prompt `ask` and resource `ask://doc` sample during their request:
 * held, transports/held-calls.ts). The retry's state is the upstream round's, not an approval
 * state: a refused one is -32602 and `invalid_arguments` as without `ask`, and a held retry of
 * the approved request is not asked about again. What reached the upstream is read from the
 * fixture's own log or answers, never from the broker's word.
 */
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { Client, isInputRequiredResult, ProtocolError, type InputRequiredResult } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterEach, assert, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, readNdjson, writeConfig, type RecordLine } from './helpers.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const APPROVE = { 'mcp-broker/approval': { action: 'accept', content: {} } };
const sampled = (text: string) => ({ role: 'assistant' as const, content: { type: 'text' as const, text }, model: 'm' });

/** A modern client (elicitation and sampling declared, each round answered by the test) on a broker whose only upstream is `servers`. */
async function start(servers: Record<string, unknown>, policy: Record<string, unknown>) {
  const { dir, configPath, recordsPath } = writeConfig(servers, { policy });
  const client = new Client(
    { name: 'asked-primitives', version: '1.0.0' },
    { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} }, sampling: {} }, inputRequired: { autoFulfill: false } },
  );
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), { timeout: 30_000 });
  cleanups.push(async () => {
    await client.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  expect(client.getProtocolEra()).toBe('modern');
  const request = (method: 'prompts/get' | 'resources/read', params: Record<string, unknown>) =>
    client.request({ method, params }, { allowInputRequired: true }) as Promise<Record<string, unknown>>;
  /** The JSON-RPC error a request is refused with (fails the test when it is answered). */
  const refused = async (method: 'prompts/get' | 'resources/read', params: Record<string, unknown>) => {
    const err = await request(method, params).then(
      (r) => r,
      (e: unknown) => e,
    );
    assert(ProtocolError.isInstance(err), `not refused with a JSON-RPC error: ${JSON.stringify(err)}`);
    return err;
  };
  return { dir, request, refused, records: () => readNdjson<RecordLine>(recordsPath) };
}

/** Approves the broker's question of a first round and returns the upstream's round that follows. */
async function approved(b: Awaited<ReturnType<typeof start>>, method: 'prompts/get' | 'resources/read', params: Record<string, unknown>) {
  const approval = (await b.request(method, params)) as unknown as InputRequiredResult;
  expect(Object.keys(approval.inputRequests!)).toEqual(['mcp-broker/approval']);
  const round = (await b.request(method, { ...params, inputResponses: APPROVE, requestState: approval.requestState })) as unknown as InputRequiredResult;
  assert(isInputRequiredResult(round), `not input_required: ${JSON.stringify(round)}`);
  return round;
}

describe("an asked prompt or resource: the retry answering its upstream's input requests", () => {
  it('relayed (2026-07-28 upstream): a refused relay state is -32602 and invalid_arguments as without ask, not approval_required; the intact one is served once', async () => {
    const b = await start(
      { up: nodeServer(fixture('modern-upstream.mjs'), { env: { FIXTURE_LOG: '${configDir}/fixture.ndjson' } }) },
      { rules: [{ prompts: ['up__confirm'], action: 'ask' }] },
    );
    const params = { name: 'up__confirm', arguments: { topic: 'deploy' } };
    const prompts = () => readNdjson<{ event: string }>(join(b.dir, 'fixture.ndjson')).filter((e) => e.event === 'prompt');
    const relayed = await approved(b, 'prompts/get', params);
    expect(Object.keys(relayed.inputRequests!)).toEqual(['answer']);
    expect(prompts()).toHaveLength(1);
    const state = relayed.requestState!;
    const inputResponses = { answer: { action: 'accept', content: { answer: 'yes' } } };
    for (const [p, bad, why] of [
      [params, `${state.slice(0, -4)}AAAA`, 'does not verify'],
      [{ ...params, arguments: { topic: 'other' } }, state, 'made for another call'],
    ] as const) {
      const err = await b.refused('prompts/get', { ...p, inputResponses, requestState: bad });
      expect(err.code).toBe(-32602);
      expect(err.message).toContain(why);
    }
    expect(prompts()).toHaveLength(1);
    const done = await b.request('prompts/get', { ...params, inputResponses, requestState: state });
    expect(done.messages).toEqual([{ role: 'user', content: { type: 'text', text: 'confirmed deploy: yes' } }]);
    expect(prompts()).toHaveLength(2);
    // Its approval ran one request: the same retry again is approval_required, saying why.
    const replay = await b.refused('prompts/get', { ...params, inputResponses, requestState: state });
    expect(replay.code).toBe(-32003);
    expect(replay.message).toContain('used already');
    expect(prompts()).toHaveLength(2);
    expect(b.records().map((r) => [r.outcome, r.attempts])).toEqual([
      ['approval_required', 0],
      ['ok', 1],
      ['invalid_arguments', 0],
      ['invalid_arguments', 0],
      ['ok', 1],
      ['approval_required', 0],
    ]);
  });

  it('an asked resource read carrying a relay state made for another request (a prompt) is -32602 invalid_arguments, never asked', async () => {
    const b = await start(
      { up: nodeServer(fixture('modern-upstream.mjs'), { env: { FIXTURE_LOG: '${configDir}/fixture.ndjson' } }), res: nodeServer(fixture('modern-resources.mjs')) },
      { rules: [{ resources: ['note://**'], action: 'ask' }] },
    );
    const round = (await b.request('prompts/get', { name: 'up__confirm', arguments: { topic: 'deploy' } })) as unknown as InputRequiredResult;
    expect(Object.keys(round.inputRequests!)).toEqual(['answer']);
    const uri = 'note://a';
    for (const [state, why] of [
      [round.requestState!, 'made for another call'],
      [`${round.requestState!.slice(0, -4)}AAAA`, 'does not verify'],
    ] as const) {
      const err = await b.refused('resources/read', { uri, inputResponses: { answer: { action: 'accept', content: {} } }, requestState: state });
      expect(err.code).toBe(-32602);
      expect(err.message).toContain(why);
    }
    expect(b.records().filter((r) => r.kind === 'resource').map((r) => [r.outcome, r.attempts])).toEqual([
      ['invalid_arguments', 0],
      ['invalid_arguments', 0],
    ]);
  });

  it.each([
    ['prompts/get', { name: 'ask__ask', arguments: { topic: 'tea' } }, 'prompt about tea', (r: Record<string, unknown>) => (r.messages as { content: { text: string } }[])[0]!.content.text, 'prompt: by hand', 'prompt'],
    ['resources/read', { uri: 'ask://doc' }, 'read ask://doc', (r: Record<string, unknown>) => (r.contents as { text: string }[])[0]!.text, 'read: by hand', 'resource'],
  ] as const)(
    'held (2025-11-25 upstream, %s): the approved request\'s held retry is served, not asked again; a refused held state is -32602 invalid_arguments',
    async (method, params, asked, textOf, expected, kind) => {
      const b = await start({ ask: nodeServer(fixture('asking-prompt.mjs')) }, { rules: [{ prompts: ['ask__ask'], resources: ['ask://**'], action: 'ask' }] });
      const held = await approved(b, method, params);
      expect(Object.keys(held.inputRequests!)).toEqual(['ask/1']);
      expect((held.inputRequests!['ask/1']!.params as { messages: { content: { text: string } }[] }).messages[0]!.content.text).toBe(asked);
      const inputResponses = { 'ask/1': sampled('by hand') };
      const tampered = await b.refused(method, { ...params, inputResponses, requestState: `${held.requestState!.slice(0, -4)}AAAA` });
      expect(tampered.code).toBe(-32602);
      expect(tampered.message).toContain('does not verify');
      const done = await b.request(method, { ...params, inputResponses, requestState: held.requestState });
      expect(textOf(done)).toBe(expected);
      expect(b.records().filter((r) => r.kind === kind).map((r) => r.outcome)).toEqual(['approval_required', 'ok', 'invalid_arguments', 'ok']);
    },
  );
});
