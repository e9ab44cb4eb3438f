/**
 * The modern `tools/call` direct lane through the CLI (src/wire/direct-modern-call.ts): a
 * 2026-07-28 client on raw stdio sends each call twice under one envelope. The first is served
 * by the SDK (the lane takes only envelopes the SDK accepted on the connection), the second by
 * the lane; their answers are the same bytes but for what differs per call (the call id, the
 * upstream request id the echo fixture reports). `MCP_BROKER_CALL_TIMING` shows the lane ran.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Client, type CallToolResult, type InputRequiredResult } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, readNdjson, spawnRawBroker, waitFor, writeConfig } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-lane-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const envelope = (name: string, extra: Record<string, unknown> = {}) => ({
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name, version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
  ...extra,
});

/** A line with what differs per call blanked: the broker's call id and the upstream request id. */
const perCallBlanked = (line: string) => line.replace(/"mcp-broker\/callId":"[^"]*"/g, '"mcp-broker/callId":"*"').replace(/"mcp-broker:\d+"/g, '"mcp-broker:*"');

describe('modern tools/call direct lane, through the CLI', () => {
  it('ok, tool_error, refusal, unknown tool, invalid params, progress and cancel: the lane answers as the SDK does', async () => {
    const timing = join(dir, 'timing.json');
    const log = join(dir, 'fixture.ndjson');
    const broker = spawnRawBroker({
      servers: { fx: nodeServer(fixture('echo.mjs'), { env: { FIXTURE_LOG: log } }), big: nodeServer(fixture('big.mjs')) },
      extra: { policy: { rules: [{ tools: ['fx__emit'], action: 'deny' }] } },
      env: { MCP_BROKER_CALL_TIMING: timing },
    });
    try {
      await broker.request('open', 'server/discover', { _meta: envelope('opening') });
      const lines = () => broker.stdout().toString('utf8').split('\n');
      /** Sends the call twice under one fresh envelope; the two answers (and what was written between sending and answering), blanked. */
      const twice = async (id: string, params: Record<string, unknown>, meta: Record<string, unknown>) => {
        const out: string[][] = [];
        for (let i = 0; i < 2; i++) {
          const from = lines().length - 1;
          await broker.request(id, 'tools/call', { ...params, _meta: meta });
          out.push(lines().slice(from).filter(Boolean).map(perCallBlanked));
        }
        return out;
      };
      const cases: Array<[string, Record<string, unknown>, Record<string, unknown>?]> = [
        ['ok', { name: 'fx__echo', arguments: { text: 'hi' } }],
        ['tool_error', { name: 'fx__fail', arguments: {} }],
        ['refusal', { name: 'fx__emit', arguments: {} }],
        ['unknown', { name: 'fx__nope', arguments: {} }],
        ['invalid', { name: 'fx__echo', arguments: 'x' }],
        ['progress', { name: 'fx__echo', arguments: { text: 'p' } }, { progressToken: 'tok' }],
        // Past RAW_MIN_BYTES: the lane writes the upstream's result bytes with its stamp added (raw-json.ts withTail).
        ['large', { name: 'big__big', arguments: { mb: 0.05 } }],
      ];
      for (const [id, params, more] of cases) {
        const [sdk, lane] = await twice(id, params, envelope(`client-${id}`, more));
        expect(lane, id).toEqual(sdk);
      }
      const answers = broker.messages.filter((m) => typeof m.id === 'string' && m.id !== 'open' && !('method' in m));
      expect(answers.map((m) => [m.id, (m.result as { _meta?: Record<string, unknown> } | undefined)?._meta?.['mcp-broker/outcome'] ?? (m.error as { code: number }).code])).toEqual(
        ['ok', 'ok', 'tool_error', 'tool_error', 'refusal', 'refusal', 'unknown', 'unknown', 'invalid', 'invalid', 'progress', 'progress', 'large', 'large'].map((id, i) => [
          id,
          [...'ok ok tool_error tool_error denied denied'.split(' '), -32602, -32602, -32602, -32602, 'ok', 'ok', 'ok', 'ok'][i],
        ]),
      );
      expect(broker.messages.filter((m) => m.method === 'notifications/progress')).toHaveLength(6);

      // Cancel: neither lane answers; each call is recorded cancelled.
      const meta = envelope('client-cancel');
      const slowCalls = () => (existsSync(log) ? readNdjson<{ event: string; tool: string }>(log).filter((e) => e.event === 'call' && e.tool === 'slow').length : 0);
      for (const [n, id] of ['cancel-sdk', 'cancel-lane'].entries()) {
        broker.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'fx__slow', arguments: { ms: 30_000 }, _meta: meta } });
        await waitFor(() => slowCalls() === n + 1, `${id} at the upstream`);
        broker.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'enough' } });
        await waitFor(() => readNdjson(broker.recordsPath).filter((r) => r.outcome === 'cancelled').length === (id === 'cancel-sdk' ? 1 : 2), `${id} recorded`);
      }
      await broker.request('sync', 'tools/call', { name: 'fx__echo', arguments: { text: 's' }, _meta: meta });
      expect(broker.messages.filter((m) => m.id === 'cancel-sdk' || m.id === 'cancel-lane')).toEqual([]);
    } finally {
      await broker.close();
    }
    const summary = await waitFor(() => (existsSync(timing) ? (JSON.parse(readFileSync(timing, 'utf8')) as { segments: Array<{ to: string; count: number }> }) : undefined), 'the timing file');
    // At least the second call of ok, tool_error, refusal, unknown tool and progress took the lane (test/wire proves which calls do).
    expect(summary.segments.filter((s) => s.to === 'modern lane').reduce((n, s) => n + s.count, 0)).toBeGreaterThanOrEqual(5);
  }, 90_000);

  it('requests the SDK refuses before any handler (a related-task of the wrong shape, a member beyond the four, a fractional id) are refused alike under a learned envelope: nothing runs, nothing is recorded', async () => {
    const log = join(dir, 'refused.ndjson');
    const broker = spawnRawBroker({ servers: { fx: nodeServer(fixture('echo.mjs'), { env: { FIXTURE_LOG: log } }) } });
    try {
      await broker.request('open', 'server/discover', { _meta: envelope('opening') });
      const meta = envelope('client-refused');
      const fractional = { sdk: 1.5, lane: 2.5 } as const;
      const answersOf = (round: 'sdk' | 'lane') =>
        broker.messages
          .filter((m) => !('method' in m) && (m.id === fractional[round] || (typeof m.id === 'string' && m.id.startsWith(`${round}-`))))
          .map((m) => JSON.stringify(m).replaceAll(`${round}-`, '*-').replace(`"id":${fractional[round]},`, '"id":"*",'));
      // First round: a fresh envelope, so the SDK sees each request; its sync call teaches the lane the envelope.
      // Second round: the same envelope, learned, where the lane used to run each of them.
      const seen: string[][] = [];
      for (const round of ['sdk', 'lane'] as const) {
        const text = (what: string) => ({ text: `BAD-${round}-${what}` });
        broker.send({ jsonrpc: '2.0', id: `${round}-task`, method: 'tools/call', params: { name: 'fx__echo', arguments: text('task'), _meta: { ...meta, 'io.modelcontextprotocol/related-task': 5 } } });
        broker.send({ jsonrpc: '2.0', id: `${round}-member`, method: 'tools/call', extra: 1, params: { name: 'fx__echo', arguments: text('member'), _meta: meta } });
        broker.send({ jsonrpc: '2.0', id: fractional[round], method: 'tools/call', params: { name: 'fx__echo', arguments: text('id'), _meta: meta } });
        await broker.request(`${round}-sync`, 'tools/call', { name: 'fx__echo', arguments: { text: 'ok' }, _meta: meta });
        // One more round trip through the upstream: a refused call the lane had run would be answered and recorded by now.
        await broker.request(`${round}-sync2`, 'tools/call', { name: 'fx__echo', arguments: { text: 'ok' }, _meta: meta });
        seen.push(answersOf(round).filter((a) => !a.includes('"*-sync')));
      }
      expect(seen[1]).toEqual(seen[0]);
      expect(readNdjson<{ event: string }>(log).filter((e) => e.event === 'call')).toHaveLength(4);
      expect(readNdjson<{ args?: { text?: string } }>(broker.recordsPath).map((r) => r.args?.text)).toEqual(['ok', 'ok', 'ok', 'ok']);
    } finally {
      await broker.close();
    }
  }, 60_000);
});

describe('modern tools/call direct lane: a held call over two rounds', () => {
  it('a call the lane runs is held over two rounds: each input_required reaches the caller, the call goes on, one record', async () => {
    const upstream = spawn(process.execPath, [fixture('asking-http.mjs')], { stdio: ['pipe', 'pipe', 'inherit'] });
    const timing = join(dir, 'held-timing.json');
    let client: Client | undefined;
    let configDir: string | undefined;
    try {
      const port = await new Promise<number>((resolve, reject) => {
        createInterface({ input: upstream.stdout! }).once('line', (line) => resolve((JSON.parse(line) as { port: number }).port));
        upstream.once('exit', () => reject(new Error('fixture exited')));
      });
      const { dir: cwd, configPath, recordsPath } = writeConfig({ ask: { type: 'http', url: `http://127.0.0.1:${port}/mcp`, era: 'legacy' } });
      configDir = cwd;
      client = new Client({ name: 'lane-held', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' }, capabilities: { sampling: {} }, inputRequired: { autoFulfill: false } });
      await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd, stderr: 'ignore', env: { ...process.env, MCP_BROKER_CALL_TIMING: timing } as Record<string, string> }), { timeout: 20_000 });
      expect(client.getProtocolEra()).toBe('modern');
      const twice = (extra: Record<string, unknown> = {}) =>
        client!.request({ method: 'tools/call', params: { name: 'ask__twice', arguments: { text: 'x' }, ...extra } }, { allowInputRequired: true }) as Promise<CallToolResult | InputRequiredResult>;
      const promptOf = (r: InputRequiredResult, key: string) => (r.inputRequests![key]!.params as { messages: { content: { text: string } }[] }).messages[0]!.content.text;
      const sampled = (text: string) => ({ role: 'assistant', content: { type: 'text', text }, model: 'm' });
      // The first call teaches the lane this client's envelope (the SDK serves it); the second starts on the lane.
      for (const round of ['sdk', 'lane']) {
        const first = (await twice()) as InputRequiredResult;
        expect(promptOf(first, 'ask/1'), round).toBe('first x');
        const second = (await twice({ inputResponses: { 'ask/1': sampled('one') }, requestState: first.requestState })) as InputRequiredResult;
        expect(Object.keys(second.inputRequests!), round).toEqual(['ask/2']);
        expect(promptOf(second, 'ask/2'), round).toBe('second x');
        const done = (await twice({ inputResponses: { 'ask/2': sampled('two') }, requestState: second.requestState })) as CallToolResult;
        expect((done.content as { text: string }[]).map((c) => c.text).join(''), round).toBe('twice: one / two');
      }
      expect(readNdjson(recordsPath).map((r) => [r.name, r.outcome])).toEqual([
        ['ask__twice', 'ok'],
        ['ask__twice', 'ok'],
      ]);
    } finally {
      await client?.close().catch(() => undefined);
      upstream.kill();
      if (configDir) rmSync(configDir, { recursive: true, force: true });
    }
    const summary = await waitFor(() => (existsSync(timing) ? (JSON.parse(readFileSync(timing, 'utf8')) as { segments: Array<{ to: string; count: number }> }) : undefined), 'the timing file');
    expect(summary.segments.filter((s) => s.to === 'modern lane').reduce((n, s) => n + s.count, 0)).toBeGreaterThanOrEqual(1);
  }, 90_000);
});
