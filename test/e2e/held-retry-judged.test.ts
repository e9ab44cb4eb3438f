/**
 * A modern (2026-07-28) caller's held-request retry (the answer to a 2025-11-25 upstream's
 * sampling request held during its `tools/call`, `prompts/get` or `resources/read`) is judged
 * on the policy as it is when the retry comes, the same way for tools, prompts and resources: it
 * sends nothing new upstream, but its result reaches the client now. A reload that made the
 * request `ask` after its first round, which was allowed outright (nobody approved it), refuses
 * the retry `approval_required` and the held request stays unanswered; a reload to `deny`
 * refuses it `denied`. A request approved at its first round keeps that approval for its
 * rounds. The built CLI on stdio, the policy rewritten in its servers.json as a user would,
 * upstreams test/fixtures/conformance-server.mjs `--legacy` (tool `test_sampling`) and
 * test/fixtures/asking-prompt.mjs (prompt `ask`, resource `ask://doc`).
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Client, isInputRequiredResult, ProtocolError, type CallToolResult, type InputRequiredResult } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterEach, assert, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, readNdjson, waitFor, writeConfig, type RecordLine } from './helpers.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const APPROVE = { 'mcp-broker/approval': { action: 'accept', content: {} } };
const sampled = (text: string) => ({ role: 'assistant' as const, content: { type: 'text' as const, text }, model: 'm' });
type Method = 'tools/call' | 'prompts/get' | 'resources/read';

const ASK_ALL = { rules: [{ tools: ['conf__test_sampling'], prompts: ['ask__ask'], resources: ['ask://**'], action: 'ask' }] };
const DENY_ALL = { rules: [{ tools: ['conf__test_sampling'], prompts: ['ask__ask'], resources: ['ask://**'], action: 'deny' }] };

async function start(policy: Record<string, unknown>) {
  const { configPath, recordsPath, dir } = writeConfig(
    {
      conf: nodeServer(fixture('conformance-server.mjs'), { args: [fixture('conformance-server.mjs'), '--legacy'] }),
      ask: nodeServer(fixture('asking-prompt.mjs')),
    },
    { policy },
  );
  const client = new Client(
    { name: 'held-retry-judged', version: '1.0.0' },
    { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} }, sampling: {} }, inputRequired: { autoFulfill: false } },
  );
  const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  await client.connect(transport, { timeout: 30_000 });
  cleanups.push(async () => {
    await client.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  expect(client.getProtocolEra()).toBe('modern');
  const request = (method: Method, params: Record<string, unknown>) =>
    client.request({ method, params }, { allowInputRequired: true }).then(
      (r) => r as Record<string, unknown>,
      (e: unknown) => e,
    );
  /** Rewrites the policy in servers.json and waits for the broker to have reloaded it. */
  const reload = async (next: Record<string, unknown>) => {
    const seen = stderr.split('config reloaded').length;
    writeFileSync(configPath, JSON.stringify({ ...JSON.parse(readFileSync(configPath, 'utf8')), policy: next }, null, 2));
    await waitFor(() => stderr.split('config reloaded').length > seen, 'config reloaded', 20_000, 50);
  };
  return { request, reload, records: () => readNdjson<RecordLine>(recordsPath) };
}

/** The outcome a refusal carries: a tool's in its result, a prompt's or resource's in its JSON-RPC error. */
function outcomeOf(answer: unknown): unknown {
  if (ProtocolError.isInstance(answer)) return (answer.data as Record<string, unknown> | undefined)?.['mcp-broker/outcome'] ?? `code ${answer.code}`;
  return (answer as CallToolResult)._meta?.['mcp-broker/outcome'] ?? 'ok';
}

const REQUESTS = [
  ['tools/call', { name: 'conf__test_sampling', arguments: { prompt: 'hi' } }, 'conf/1'],
  ['prompts/get', { name: 'ask__ask', arguments: { topic: 'tea' } }, 'ask/1'],
  ['resources/read', { uri: 'ask://doc' }, 'ask/1'],
] as const;

describe('a held retry is judged on the policy as it is now, for tools, prompts and resources alike', () => {
  // One request a broker: a stdio upstream offered sampling serves one caller at a time, and a held call keeps its turn.
  it.each(REQUESTS)('%s: allowed at its first round, then a reload to ask: approval_required, the held request left waiting; then a reload to deny: denied; allowed again, it is served', async (method, params, key) => {
    const b = await start({});
    const first = await b.request(method, params);
    assert(isInputRequiredResult(first), `${method}: not input_required: ${JSON.stringify(first)}`);
    expect(Object.keys((first as InputRequiredResult).inputRequests!)).toEqual([key]);
    const retry = () => b.request(method, { ...params, inputResponses: { [key]: sampled('late') }, requestState: (first as InputRequiredResult).requestState });
    await b.reload(ASK_ALL);
    const asked = await retry();
    expect(outcomeOf(asked)).toBe('approval_required');
    await b.reload(DENY_ALL);
    expect(outcomeOf(await retry())).toBe('denied');
    // Neither refusal answered the held request: allowed again, the same retry answers it and gets the result.
    await b.reload({});
    const served = await retry();
    expect(outcomeOf(served)).toBe('ok');
    expect(JSON.stringify(served)).toContain('late');
    const rounds = b.records().filter((r) => r.resultType !== 'input_required');
    expect(rounds.map((r) => [r.outcome, r.attempts])).toEqual([
      ['approval_required', 0],
      ['denied', 0],
      ['ok', 1],
    ]);
  });

  it.each(REQUESTS)('%s: approved at its first round under ask: the held retry is served, not asked again', async (method, params, key) => {
    const b = await start(ASK_ALL);
    const approval = (await b.request(method, params)) as InputRequiredResult;
    expect(Object.keys(approval.inputRequests!)).toEqual(['mcp-broker/approval']);
    const round = await b.request(method, { ...params, inputResponses: APPROVE, requestState: approval.requestState });
    assert(isInputRequiredResult(round), `${method}: not input_required: ${JSON.stringify(round)}`);
    expect(Object.keys((round as InputRequiredResult).inputRequests!)).toEqual([key]);
    const done = await b.request(method, { ...params, inputResponses: { [key]: sampled('by hand') }, requestState: (round as InputRequiredResult).requestState });
    expect(outcomeOf(done)).toBe('ok');
    expect(JSON.stringify(done)).toContain('by hand');
  });
});
