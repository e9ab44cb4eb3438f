/**
 * An `ask` approved through an input request, over the wire: the built CLI on stdio, a real
 * upstream (test/fixtures/echo.mjs, logging every call it runs to FIXTURE_LOG), and an SDK v2
 * client that reaches the 2026-07-28 era by automatic negotiation. With its elicitation handler
 * the client's input-required driver answers the broker's question and retries by itself; in
 * manual mode a tampered `requestState` is refused and the tool does not run.
 */
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { Client, isInputRequiredResult, type CallToolResult, type InputRequiredResult } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, readNdjson, writeConfig } from './helpers.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function start(options: { autoFulfill: boolean; answer?: 'accept' | 'decline' }) {
  const { dir, configPath, recordsPath } = writeConfig(
    { fx: nodeServer(fixture('echo.mjs'), { env: { FIXTURE_LOG: '${configDir}/fixture.ndjson' } }) },
    { policy: { rules: [{ tools: ['fx__echo'], action: 'ask' }] } },
  );
  const client = new Client(
    { name: 'modern-ask', version: '1.0.0' },
    { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} } }, ...(options.autoFulfill ? {} : { inputRequired: { autoFulfill: false } }) },
  );
  const asked: string[] = [];
  client.setRequestHandler('elicitation/create', async (request) => {
    asked.push((request.params as { message: string }).message);
    return { action: options.answer ?? 'accept' };
  });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), { timeout: 20_000 });
  cleanups.push(async () => {
    await client.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  const runs = () => readNdjson<{ event: string }>(join(dir, 'fixture.ndjson')).filter((e) => e.event === 'call');
  return { client, asked, runs, records: () => readNdjson(recordsPath) };
}

describe('ask for a 2026-07-28 client over stdio', () => {
  it('the SDK client answers the input request and retries; the tool runs once; both rounds are recorded', async () => {
    const b = await start({ autoFulfill: true });
    expect(b.client.getProtocolEra()).toBe('modern');
    const result = await b.client.callTool({ name: 'fx__echo', arguments: { text: 'over the wire' } });
    expect(result.content).toEqual([{ type: 'text', text: 'over the wire' }]);
    expect(b.asked).toHaveLength(1);
    expect(b.asked[0]).toContain('Allow the tool "fx__echo" (fx/echo) to run?');
    expect(b.runs()).toHaveLength(1);
    expect(b.records().map((r) => r.outcome)).toEqual(['approval_required', 'ok']);
  });

  it('a decline is approval_required and the tool does not run', async () => {
    const b = await start({ autoFulfill: true, answer: 'decline' });
    const result = await b.client.callTool({ name: 'fx__echo', arguments: { text: 'no' } });
    expect(result.isError).toBe(true);
    expect(result._meta?.['mcp-broker/outcome']).toBe('approval_required');
    expect(b.runs()).toHaveLength(0);
  });

  it('a tampered requestState is -32602 invalid_arguments, a reused one approval_required, and the tool does not run', async () => {
    const b = await start({ autoFulfill: false });
    const call = (extra: Record<string, unknown> = {}) =>
      b.client.request({ method: 'tools/call', params: { name: 'fx__echo', arguments: { text: 't' }, ...extra } }, { allowInputRequired: true }) as Promise<
        CallToolResult | InputRequiredResult
      >;
    const first = await call();
    expect(isInputRequiredResult(first)).toBe(true);
    const { inputRequests, requestState } = first as InputRequiredResult;
    const [key] = Object.keys(inputRequests!);
    const inputResponses = { [key!]: { action: 'accept', content: {} } };
    // A state that does not verify is a malformed request: -32602, as without ask.
    const tampered = await call({ inputResponses, requestState: `${requestState}-TAMPERED` }).then(
      () => undefined,
      (e: unknown) => e as { code?: number; message?: string },
    );
    expect(tampered?.code).toBe(-32602);
    expect(tampered?.message).toContain('the approval state does not verify');
    expect(b.runs()).toHaveLength(0);
    const ok = (await call({ inputResponses, requestState })) as CallToolResult;
    expect(ok.content).toEqual([{ type: 'text', text: 't' }]);
    const reused = (await call({ inputResponses, requestState })) as CallToolResult;
    expect(JSON.stringify(reused.content)).toContain('the approval state was used already');
    expect(b.runs()).toHaveLength(1);
    expect(b.records().map((r) => r.outcome)).toEqual(['approval_required', 'invalid_arguments', 'ok', 'approval_required']);
  });
});
