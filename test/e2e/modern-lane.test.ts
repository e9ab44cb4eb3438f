/**
 * The modern `tools/call` direct lane through the CLI (src/wire/direct-modern-call.ts): a
 * 2026-07-28 client on raw stdio sends each call twice under one envelope. The first is served
 * by the SDK (the lane takes only envelopes the SDK accepted on the connection), the second by
 * the lane; their answers are the same bytes but for what differs per call (the call id, the
 * upstream request id the echo fixture reports). `MCP_BROKER_CALL_TIMING` shows the lane ran.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, readNdjson, spawnRawBroker, waitFor } from './helpers.js';

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
      servers: { fx: nodeServer(fixture('echo.mjs'), { env: { FIXTURE_LOG: log } }) },
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
      ];
      for (const [id, params, more] of cases) {
        const [sdk, lane] = await twice(id, params, envelope(`client-${id}`, more));
        expect(lane, id).toEqual(sdk);
      }
      const answers = broker.messages.filter((m) => typeof m.id === 'string' && m.id !== 'open' && !('method' in m));
      expect(answers.map((m) => [m.id, (m.result as { _meta?: Record<string, unknown> } | undefined)?._meta?.['mcp-broker/outcome'] ?? (m.error as { code: number }).code])).toEqual(
        ['ok', 'ok', 'tool_error', 'tool_error', 'refusal', 'refusal', 'unknown', 'unknown', 'invalid', 'invalid', 'progress', 'progress'].map((id, i) => [
          id,
          [...'ok ok tool_error tool_error denied denied'.split(' '), -32602, -32602, -32602, -32602, 'ok', 'ok'][i],
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
});
