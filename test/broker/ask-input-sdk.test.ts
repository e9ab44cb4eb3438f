/**
 * Shapes against the SDK's own v2 pair, in process: the SDK's modern HTTP handler
 * (`createMcpHandler`) reached through the client's injected `fetch`, the client negotiating
 * the era automatically. A low-level SDK `Server` per request, whose `tools/call` handler hands the
 * call to the broker as the modern wire does (era, the request's clientCapabilities,
 * inputResponses and requestState) and returns its answer. The SDK client's input-required
 * driver answers the broker's `elicitation/create` input request with its elicitation handler
 * and retries with the echoed `requestState`: the approval completes and the tool runs once.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createMcpHandler, Server } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import type { CallerSession } from '../../src/broker/types.js';
import { parseConfig } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway.js';
import { silentLogger } from '../../src/shared/logger.js';

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'echo.mjs');
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function pair(answer: 'accept' | 'decline') {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-ask-sdk-'));
  const log = join(dir, 'fixture.ndjson');
  const gateway = new Gateway(
    parseConfig(
      {
        mcpServers: { fx: { command: process.execPath, args: [FIXTURE], env: { FIXTURE_LOG: log } } },
        broker: { dataDir: join(dir, 'data'), records: { path: join(dir, 'calls.ndjson') } },
        policy: { rules: [{ tools: ['fx__echo'], action: 'ask' }] },
        estate: { enabled: false },
      },
      { baseDir: dir },
    ),
    { logger: silentLogger() },
  );
  await gateway.start();
  cleanups.push(async () => {
    await gateway.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const eras: string[] = [];
  const factory = () => {
    const server = new Server({ name: 'broker-under-test', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler('tools/list', async () => ({ tools: [...gateway.registry.roster.tools.values()].map((t) => t.definition) }));
    server.setRequestHandler('tools/call', async (request, ctx) => {
      const state = ctx.mcpReq.requestState<string>();
      const caller: CallerSession = {
        sessionId: 'sdk',
        principal: 'local',
        unit: 'local',
        era: 'modern',
        clientCapabilities: (ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.['io.modelcontextprotocol/clientCapabilities'] as CallerSession['clientCapabilities'],
        isLive: () => true,
        ...(ctx.mcpReq.inputResponses ? { inputResponses: ctx.mcpReq.inputResponses } : {}),
        ...(state !== undefined ? { requestState: state } : {}),
      };
      eras.push(caller.requestState ? 'retry' : 'first');
      const out = await gateway.broker.call({ name: request.params.name, args: request.params.arguments ?? {}, signal: ctx.mcpReq.signal }, caller);
      return out.result as never;
    });
    return server;
  };
  const handler = createMcpHandler(factory, { legacy: 'reject' });
  cleanups.push(() => handler.close());
  const transport = new StreamableHTTPClientTransport(new URL('http://in-process.test/mcp'), {
    fetch: (url, init) => handler.fetch(new Request(url, init)),
  });
  const client = new Client({ name: 'modern-client', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} } } });
  const asked: string[] = [];
  client.setRequestHandler('elicitation/create', async (request) => {
    asked.push((request.params as { message: string }).message);
    return { action: answer };
  });
  await client.connect(transport);
  cleanups.push(() => client.close());
  const runs = () => (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter((l) => l.includes('"event":"call"')) : []);
  return { client, asked, eras, runs };
}

describe('a broker approval through the SDK v2 client (modern era)', () => {
  it('the client answers the input request and retries; the tool runs once', async () => {
    const p = await pair('accept');
    expect(p.client.getProtocolEra()).toBe('modern');
    const result = await p.client.callTool({ name: 'fx__echo', arguments: { text: 'via sdk' } });
    expect(result.content).toEqual([{ type: 'text', text: 'via sdk' }]);
    expect(result._meta?.['mcp-broker/outcome']).toBe('ok');
    expect(p.asked).toHaveLength(1);
    expect(p.asked[0]).toContain('Allow the tool "fx__echo" (fx/echo) to run?');
    expect(p.eras).toEqual(['first', 'retry']);
    expect(p.runs()).toHaveLength(1);
  });

  it('a declining client gets the refusal, and the tool does not run', async () => {
    const p = await pair('decline');
    const result = await p.client.callTool({ name: 'fx__echo', arguments: { text: 'no' } });
    expect(result.isError).toBe(true);
    expect(result._meta?.['mcp-broker/outcome']).toBe('approval_required');
    expect(p.runs()).toHaveLength(0);
  });
});
