/**
 * Traces over a real OTLP/HTTP round trip (issue 20): an OTLP/HTTP receiver this test starts on
 * 127.0.0.1, two real CLIs chained (a stdio broker whose upstream is an HTTP broker in front of
 * the echo fixture), both exporting to it with `observability.otlp`. One MCP call is one trace
 * across both brokers; the inner call span is a child of the outer attempt; the record carries
 * the ids; the configured export headers arrive. And the HTTP `traceparent` header of a
 * request is taken as the call's parent.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CallToolResult, Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, startBroker, waitFor, type StartedBroker } from './helpers.js';
import { http, MCP_POST_HEADERS, openRawSession, readStream, sseMessages, startHttpBroker, type HttpBroker } from '../transports/harness.js';

interface ReceivedSpan {
  service: string;
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  attributes: Record<string, unknown>;
}

const OTLP_KEY = 'otlp-api-key-0123456789';

/** OTLP JSON ids are hex; a base64 one (the protobuf-JSON mapping) is turned into hex. */
function hexId(id: unknown): string {
  if (typeof id !== 'string' || id === '') return '';
  return /^[0-9a-f]+$/i.test(id) ? id.toLowerCase() : Buffer.from(id, 'base64').toString('hex');
}

function attributesOf(list: { key: string; value: Record<string, unknown> }[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of list ?? []) {
    const v = a.value;
    out[a.key] = v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue));
  }
  return out;
}

/** A minimal OTLP/HTTP JSON trace receiver on loopback. */
async function startReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; headers: IncomingHttpHeaders[]; close(): Promise<void> }> {
  const spans: ReceivedSpan[] = [];
  const headers: IncomingHttpHeaders[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') return void res.writeHead(404).end();
      headers.push(req.headers);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      for (const rs of body.resourceSpans ?? []) {
        const service = String(attributesOf(rs.resource?.attributes)['service.name'] ?? '');
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({ service, name: s.name, traceId: hexId(s.traceId), spanId: hexId(s.spanId), parentSpanId: hexId(s.parentSpanId), attributes: attributesOf(s.attributes) });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1/traces`,
    spans,
    headers,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('traces over OTLP/HTTP through two chained brokers', () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let inner: HttpBroker;
  let outer: StartedBroker;
  let client: Client;

  beforeAll(async () => {
    receiver = await startReceiver();
    const otlp = (serviceName: string) => ({
      observability: { otlp: { endpoint: receiver.url, serviceName, exportDelayMs: 50, headers: { 'x-api-key': '${env:OTLP_KEY}' } } },
    });
    inner = await startHttpBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) }, extra: otlp('inner'), env: { OTLP_KEY } });
    outer = await startBroker({ servers: { hop: { type: 'http', url: `${inner.url}/mcp` } }, extra: otlp('outer'), env: { OTLP_KEY } });
    client = outer.client;
  });
  afterAll(async () => {
    await outer?.close();
    await inner?.close();
    await receiver?.close();
  });

  it('one MCP call is one trace: outer call span ▸ stages ▸ attempt ▸ inner call span', async () => {
    const result = (await client.callTool({ name: 'hop__echo__echo', arguments: { text: 'traced' } })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    const callId = (result._meta as Record<string, string>)['mcp-broker/callId'];
    const record = await waitFor(async () => (await outer.records()).find((r) => r.callId === callId), 'the outer record');
    const traceId = (record as unknown as { traceId: string }).traceId;
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    const innerCall = await waitFor(
      () => receiver.spans.find((s) => s.service === 'inner' && s.traceId === traceId && s.name === 'tools/call echo__echo'),
      'the inner call span at the receiver',
    );
    const outerCall = await waitFor(() => receiver.spans.find((s) => s.service === 'outer' && s.traceId === traceId && s.name === 'tools/call hop__echo__echo'), 'the outer call span');
    expect(outerCall.spanId).toBe((record as unknown as { spanId: string }).spanId);
    expect(outerCall.parentSpanId).toBe('');
    const attempt = receiver.spans.find((s) => s.service === 'outer' && s.traceId === traceId && s.name === 'attempt 1')!;
    expect(attempt).toBeDefined();
    expect(innerCall.parentSpanId).toBe(attempt.spanId);
    expect(outerCall.attributes).toMatchObject({ 'mcp_broker.outcome': 'ok', 'mcp_broker.status': 200, 'mcp_broker.subject': 'hop/echo__echo', 'mcp_broker.principal': 'local' });
    expect(innerCall.attributes).toMatchObject({ 'mcp_broker.outcome': 'ok', 'mcp_broker.subject': 'echo/echo' });
    // Every stage that ran, in both brokers.
    for (const service of ['outer', 'inner']) {
      const names = receiver.spans.filter((s) => s.service === service && s.traceId === traceId).map((s) => s.name);
      for (const stage of ['publish', 'record', 'evaluate', 'scrub', 'judge', 'budget', 'breaker', 'deadline', 'retry']) expect(names, service).toContain(`broker.${stage}`);
    }
    for (const s of receiver.spans) expect(JSON.stringify(s.attributes)).not.toContain('traced');
    expect(receiver.headers.every((h) => h['x-api-key'] === OTLP_KEY)).toBe(true);
  });

  it('exports no caller text unscrubbed: a unit key holding a secret is redacted, an era claim that is no revision is not taken', async () => {
    // A 2026-07-28 request naming its unit with a configured secret (the OTLP key): the record
    // redacts it, and so must the span.
    const modern = await fetch(`${inner.url}/mcp`, {
      method: 'POST',
      headers: { ...MCP_POST_HEADERS, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'echo__echo' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: 'echo__echo',
          arguments: { text: 'unit' },
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
            'io.modelcontextprotocol/clientCapabilities': {},
            'mcp-broker/unit': OTLP_KEY,
          },
        },
      }),
    });
    const modernCallId = ((await modern.json()) as { result: { _meta: Record<string, string> } }).result._meta['mcp-broker/callId'];
    // A 2025-11-25 session's call whose _meta claims a "protocol version" that is a credential.
    const session = await openRawSession(inner.url);
    const legacy = await readStream(
      `${inner.url}/mcp`,
      {
        method: 'POST',
        headers: { ...MCP_POST_HEADERS, 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 2,
          method: 'tools/call',
          params: { name: 'echo__echo', arguments: { text: 'era' }, _meta: { 'io.modelcontextprotocol/protocolVersion': `Bearer ${OTLP_KEY}` } },
        }),
      },
      (t) => t.includes('"result"'),
    );
    const legacyCallId = sseMessages(legacy.text).find((m) => m.id === 2).result._meta['mcp-broker/callId'];
    const spanOf = (callId: string) =>
      waitFor(() => receiver.spans.find((s) => s.service === 'inner' && s.attributes['mcp_broker.call_id'] === callId && s.name.startsWith('tools/call')), `the call span of ${callId}`);
    const modernSpan = await spanOf(modernCallId);
    const legacySpan = await spanOf(legacyCallId);
    const record = await waitFor(() => inner.records().find((r) => r.callId === modernCallId), 'the modern record');
    expect(record.unit).toBe('modern:local/[REDACTED]');
    expect(modernSpan.attributes['mcp_broker.unit']).toBe('modern:local/[REDACTED]');
    expect(legacySpan.attributes['mcp_broker.era']).toBe('2025-11-25');
    // A 2025-11-25 session's unit is its session id, a credential: the span shows its first 8
    // characters only, as the logs do (enough to correlate the session's spans).
    expect(legacySpan.attributes['mcp_broker.unit']).toBe(session.slice(0, 8));
    for (const s of receiver.spans) expect(JSON.stringify(s.attributes)).not.toContain(session);
    for (const s of receiver.spans) expect(JSON.stringify(s.attributes)).not.toContain(OTLP_KEY);
  });

  it('takes the HTTP traceparent header of a request as the call’s parent', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const parent = '00f067aa0ba902b7';
    const res = await http(`${inner.url}/api/v1/mcp/call`, { headers: { traceparent: `00-${traceId}-${parent}-01` }, body: { subject: 'echo__echo', args: { text: 'x' } } });
    expect(res.status).toBe(200);
    const span = await waitFor(() => receiver.spans.find((s) => s.service === 'inner' && s.traceId === traceId && s.name === 'tools/call echo__echo'), 'the call span of that trace');
    expect(span.parentSpanId).toBe(parent);
  });
});
