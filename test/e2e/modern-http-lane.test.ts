/**
 * The modern `tools/call` HTTP lane through the CLI (src/wire/direct-modern-http.ts): raw
 * 2026-07-28 POSTs, each call sent twice under one envelope. The first is served by the SDK's
 * per-request instance (the lane takes only envelopes the SDK accepted for the principal), the
 * second by the lane, or handed back to the SDK when its outcome is not a plain result; the two
 * answers are the same status, headers and bytes but for what differs per call (the call id, the
 * upstream request id the echo fixture reports). `MCP_BROKER_CALL_TIMING` shows the lane ran.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, readNdjson, waitFor } from './helpers.js';
import { MCP_POST_HEADERS, startHttpBroker } from '../transports/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-http-lane-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MODERN = '2026-07-28';
const envelope = (name: string, extra: Record<string, unknown> = {}) => ({
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientInfo': { name, version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
  ...extra,
});

/** A body with what differs per call blanked: the broker's call id, the upstream request id, and a log's record time and duration. */
const perCallBlanked = (text: string) =>
  text
    .replace(/"(mcp-broker\/callId|callId|ts)":"[^"]*"/g, '"$1":"*"')
    .replace(/"durationMs":\d+/g, '"durationMs":0')
    .replace(/"mcp-broker:\d+"/g, '"mcp-broker:*"');

/** Status, headers (all but `date`) and blanked body of one answer. */
async function answerOf(res: Response): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const headers: Record<string, string> = {};
  res.headers.forEach((value, key) => {
    if (key !== 'date') headers[key] = value;
  });
  const text = await res.text();
  // A blanked field can differ in length (an upstream request id of more digits): the length is checked against the body itself.
  if (headers['content-length'] !== undefined) headers['content-length'] = Number(headers['content-length']) === Buffer.byteLength(text) ? 'of the body' : `${headers['content-length']}, not that of the body`;
  return { status: res.status, headers, body: perCallBlanked(text) };
}

describe('modern tools/call HTTP lane, through the CLI', () => {
  it('ok, tool_error, refusal, unknown tool, invalid params, progress, logs, a mismatched header and an Accept without both media types (406, as a 2025-11-25 POST): the lane answers as the SDK does', async () => {
    const timing = join(dir, 'timing.json');
    const log = join(dir, 'fixture.ndjson');
    const broker = await startHttpBroker({
      servers: { fx: nodeServer(fixture('echo.mjs'), { env: { FIXTURE_LOG: log } }) },
      extra: { policy: { rules: [{ tools: ['fx__emit'], action: 'deny' }] } },
      env: { MCP_BROKER_CALL_TIMING: timing },
    });
    try {
      const post = (id: string, params: Record<string, unknown>, headers: Record<string, string> = {}, signal?: AbortSignal) =>
        fetch(`${broker.url}/mcp`, {
          method: 'POST',
          // A header given as '' is left out.
          headers: Object.fromEntries(
            Object.entries({ ...MCP_POST_HEADERS, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': String(params.name), ...headers }).filter(([, v]) => v !== ''),
          ),
          body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params }),
          signal,
        });
      const cases: Array<[string, Record<string, unknown>, Record<string, unknown>?, Record<string, string>?]> = [
        ['ok', { name: 'fx__echo', arguments: { text: 'hi' } }],
        ['tool_error', { name: 'fx__fail', arguments: {} }],
        ['refusal', { name: 'fx__emit', arguments: {} }],
        ['unknown', { name: 'fx__nope', arguments: {} }],
        ['invalid', { name: 'fx__echo', arguments: 'x' }],
        ['progress', { name: 'fx__echo', arguments: { text: 'p' } }, { progressToken: 'tok' }],
        ['logs', { name: 'fx__echo', arguments: { text: 'l' } }, { 'io.modelcontextprotocol/logLevel': 'debug' }],
        ['mismatch', { name: 'fx__echo', arguments: { text: 'm' } }, {}, { 'mcp-name': 'fx__fail' }],
        ['no accept', { name: 'fx__echo', arguments: { text: 'a' } }, {}, { accept: '' }],
        ['json only', { name: 'fx__echo', arguments: { text: 'a' } }, {}, { accept: 'application/json' }],
        ['no version header', { name: 'fx__echo', arguments: { text: 'v' } }, {}, { 'mcp-protocol-version': '' }],
        ['text/plain', { name: 'fx__echo', arguments: { text: 'c' } }, {}, { 'content-type': 'text/plain' }],
      ];
      const outcomes: unknown[] = [];
      for (const [id, params, more, headers] of cases) {
        const meta = envelope(`client-${id}`, more);
        const sdk = await answerOf(await post(id, { ...params, _meta: meta }, headers));
        const lane = await answerOf(await post(id, { ...params, _meta: meta }, headers));
        expect(lane, id).toEqual(sdk);
        const parsed = sdk.body.startsWith('{') ? JSON.parse(sdk.body) : JSON.parse(/^data: (.*)$/m.exec(sdk.body.split('\n').filter((l) => l.includes('"result"') || l.includes('"error"')).join('\n'))![1]!);
        outcomes.push([id, sdk.status, sdk.headers['content-type'], parsed.result?._meta?.['mcp-broker/outcome'] ?? parsed.error?.code]);
      }
      expect(outcomes).toEqual([
        ['ok', 200, 'application/json', 'ok'],
        ['tool_error', 200, 'application/json', 'tool_error'],
        ['refusal', 200, 'application/json', 'denied'],
        ['unknown', 200, 'application/json', -32602],
        // Refused before the lane or the SDK see it, as a 2025 request's malformed params are (request-shape.ts).
        ['invalid', 400, 'application/json; charset=utf-8', -32602],
        ['progress', 200, 'text/event-stream', 'ok'],
        ['logs', 200, 'text/event-stream', 'ok'],
        ['mismatch', 400, 'application/json', -32020],
        ['no accept', 406, 'application/json; charset=utf-8', -32000],
        ['json only', 406, 'application/json; charset=utf-8', -32000],
        ['no version header', 400, 'application/json', -32020],
        ['text/plain', 415, 'application/json', -32000],
      ]);

      // Closing the response of a call the lane runs cancels it upstream: recorded cancelled.
      const meta = envelope('client-cancel');
      await answerOf(await post('teach', { name: 'fx__echo', arguments: { text: 't' }, _meta: meta }));
      const slowCalls = () => (existsSync(log) ? readNdjson<{ event: string; tool: string }>(log).filter((e) => e.event === 'call' && e.tool === 'slow').length : 0);
      const aborter = new AbortController();
      const cancelled = post('cancel', { name: 'fx__slow', arguments: { ms: 30_000 }, _meta: meta }, {}, aborter.signal).then(() => 'answered', () => 'aborted');
      await waitFor(() => slowCalls() === 1, 'the slow call at the upstream');
      aborter.abort();
      expect(await cancelled).toBe('aborted');
      const record = await waitFor(() => readNdjson(broker.recordsPath).find((r) => r.name === 'fx__slow'), 'the slow call record');
      expect(record).toMatchObject({ outcome: 'cancelled', sessionId: null });
    } finally {
      await broker.close();
    }
    const summary = await waitFor(() => (existsSync(timing) ? (JSON.parse(readFileSync(timing, 'utf8')) as { segments: Array<{ to: string; count: number }> }) : undefined), 'the timing file');
    // The second call of ok, tool_error, refusal and unknown took the lane (unknown handed back to the SDK); a cancelled call is not timed.
    expect(summary.segments.filter((s) => s.to === 'modern http lane').reduce((n, s) => n + s.count, 0)).toBeGreaterThanOrEqual(4);
  }, 90_000);
});
