/**
 * The `requestState` of a modern (2026-07-28) retry under policy `ask`, over the wire: the built
 * CLI on stdio in front of test/fixtures/primitives.mjs (tool `ping`, prompt `greet`, resource
 * `prims://doc`, each request logged to FIXTURE_LOG). A state that verifies as no state of this
 * request (garbage, another kind's, an approval state sealed for another tool, prompt, resource or
 * arguments) is a malformed request: JSON-RPC -32602, recorded `invalid_arguments` with 0
 * attempts, for tools, prompts and resources alike, as without `ask`; nobody is asked and nothing
 * reaches the upstream. A genuine approval state used already keeps its answer
 * (`approval_required`). What reached the upstream is read from the fixture's own log.
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
type Method = 'tools/call' | 'prompts/get' | 'resources/read';

async function start() {
  const { dir, configPath, recordsPath } = writeConfig(
    { prims: nodeServer(fixture('primitives.mjs'), { env: { FIXTURE_LOG: '${configDir}/fixture.ndjson' } }) },
    { policy: { rules: [{ tools: ['prims__ping'], prompts: ['prims__greet'], resources: ['prims://**'], action: 'ask' }] } },
  );
  const client = new Client(
    { name: 'asked-state-kinds', version: '1.0.0' },
    { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} } }, inputRequired: { autoFulfill: false } },
  );
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), { timeout: 30_000 });
  cleanups.push(async () => {
    await client.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  expect(client.getProtocolEra()).toBe('modern');
  const request = (method: Method, params: Record<string, unknown>) => client.request({ method, params }, { allowInputRequired: true }) as Promise<Record<string, unknown>>;
  const settled = (method: Method, params: Record<string, unknown>) =>
    request(method, params).then(
      (r) => r,
      (e: unknown) => e,
    );
  /** The approval state of a first round. */
  const asked = async (method: Method, params: Record<string, unknown>) => {
    const first = await request(method, params);
    assert(isInputRequiredResult(first), `not input_required: ${JSON.stringify(first)}`);
    expect(Object.keys((first as InputRequiredResult).inputRequests!)).toEqual(['mcp-broker/approval']);
    return (first as InputRequiredResult).requestState!;
  };
  const upstream = () => readNdjson<{ event: string }>(join(dir, 'fixture.ndjson'));
  return { request, settled, asked, upstream, records: () => readNdjson<RecordLine>(recordsPath) };
}

const TOOL = ['tools/call', { name: 'prims__ping', arguments: { n: 1 } }] as const;
const PROMPT = ['prompts/get', { name: 'prims__greet', arguments: { who: 'ada' } }] as const;
const RESOURCE = ['resources/read', { uri: 'prims://doc' }] as const;

describe('ask: a requestState that is no state of this request', () => {
  it.each([
    ['tool', ...TOOL, 'tool'],
    ['prompt', ...PROMPT, 'prompt'],
    ['resource', ...RESOURCE, 'resource'],
  ] as const)('%s: garbage, another kind or another request\'s approval state is -32602 invalid_arguments; a spent approval state is still approval_required', async (_, method, params, kind) => {
    const b = await start();
    // Approval states sealed for the other two requests, and for this one with other arguments (tools and prompts).
    const others = await Promise.all(
      [TOOL, PROMPT, RESOURCE].filter(([m]) => m !== method).map(([m, p]) => b.asked(m, p)),
    );
    const otherArgs = method === 'resources/read' ? [] : [await b.asked(method, { ...params, arguments: { other: 'x' } })];
    const own = await b.asked(method, params);
    const bad = ['not-a-state', 'mb3.approval.AAAA', `mb3.relay.${own.slice('mb3.approval.'.length)}`, `${own.slice(0, -4)}AAAA`, ...others, ...otherArgs];
    for (const state of bad) {
      const err = await b.settled(method, { ...params, inputResponses: APPROVE, requestState: state });
      assert(ProtocolError.isInstance(err), `${state.slice(0, 24)}: not refused with a JSON-RPC error: ${JSON.stringify(err)}`);
      expect(err.code, state.slice(0, 24)).toBe(-32602);
      expect(err.message).toMatch(/does not verify|another|differ|expired/);
    }
    expect(b.upstream()).toEqual([]);
    // The genuine state runs once; used again it keeps its answer.
    const ok = await b.request(method, { ...params, inputResponses: APPROVE, requestState: own });
    expect(ok.content ?? ok.messages ?? ok.contents).toBeDefined();
    expect(ok.isError).toBeUndefined();
    const again = await b.settled(method, { ...params, inputResponses: APPROVE, requestState: own });
    if (method === 'tools/call') {
      expect((again as { isError?: boolean }).isError).toBe(true);
      expect(JSON.stringify(again)).toContain('used already');
    } else {
      assert(ProtocolError.isInstance(again));
      expect(again.code).toBe(-32003);
      expect(again.message).toContain('used already');
    }
    // (The fixture logs prompt and resource requests; a tool call's attempts are in its record.)
    expect(b.upstream()).toHaveLength(method === 'tools/call' ? 0 : 1);
    const mine = b.records().filter((r) => (r.kind ?? 'tool') === kind);
    expect(mine.map((r) => [r.outcome, r.attempts])).toEqual([
      ...Array.from({ length: 1 + otherArgs.length }, () => ['approval_required', 0]),
      ...bad.map(() => ['invalid_arguments', 0]),
      ['ok', 1],
      ['approval_required', 0],
    ]);
  });
});
