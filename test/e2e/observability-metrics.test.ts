/**
 * `GET /metrics` (issue 20) on the real CLI over HTTP: Prometheus text behind the same bearer
 * auth as `/mcp` (open with `observability.metricsPublic`), scraped, parsed, and seen to move
 * under calls: calls by outcome/tool/principal, latency, attempts, records, breakers, upstream
 * states and restarts, budget use, sessions open. Upstreams: the echo fixture, the crashy one
 * (its `crash` exits the child: upstream_error, a restart, and with `threshold: 1` an open
 * breaker), and one that throws at start (failed).
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, waitFor } from './helpers.js';
import { connectHttp, http, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const OP = 'metrics-operator-token-0123456789';
const ALICE = 'metrics-alice-token-0123456789';

/** One sample line of the text format. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text exposition format (samples only; `# HELP`/`# TYPE` skipped). */
function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The value of the sample `name` whose labels include `labels`; 0 when there is none. */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const s = samples.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v));
  return s?.value ?? 0;
}

describe('GET /metrics', () => {
  let broker: HttpBroker;
  const scrape = async (token = OP) => {
    const res = await http(`${broker.url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return parseMetrics(res.text);
  };
  const call = (token: string, subject: string, args: Record<string, unknown> = {}) =>
    http(`${broker.url}/api/v1/mcp/call`, { headers: { authorization: `Bearer ${token}` }, body: { subject, args } });

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: {
        echo: nodeServer(fixture('echo.mjs')),
        crashy: { ...nodeServer(fixture('crashy.mjs')), tools: { crash: { readOnly: false } } },
        broken: nodeServer(fixture('throws-at-start.mjs')),
      },
      extra: {
        principals: { op: { token: OP, role: 'operator' }, alice: { token: ALICE } },
        broker: { breaker: { threshold: 1, openMs: 600_000 }, restart: { initialDelayMs: 10, maxDelayMs: 50 } },
      },
    });
  });
  afterAll(async () => {
    await broker?.close();
  });

  it('is behind the bearer auth', async () => {
    expect((await http(`${broker.url}/metrics`)).status).toBe(401);
    expect((await http(`${broker.url}/metrics`, { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(401);
  });

  it("is an operator's: a user, whose series would show every principal's calls, is refused 403", async () => {
    expect((await call(ALICE, 'echo__echo', { text: 'counted' })).status).toBe(200);
    const refused = await http(`${broker.url}/metrics`, { headers: { authorization: `Bearer ${ALICE}` } });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('forbidden');
    expect(refused.text).not.toContain('mcp_broker_calls_total');
    expect(value(await scrape(OP), 'mcp_broker_calls_total', { outcome: 'ok', tool: 'echo__echo', principal: 'alice', kind: 'tool' })).toBeGreaterThan(0);
  });

  it('shows upstream states, and calls, latency, attempts, records, breakers, restarts and budget moving', async () => {
    const before = await scrape();
    expect(value(before, 'mcp_broker_upstream_state', { upstream: 'echo', state: 'ready' })).toBe(1);
    // Failed at start, and retried with backoff since.
    const broken = before.filter((x) => x.name === 'mcp_broker_upstream_state' && x.labels.upstream === 'broken' && x.value === 1).map((x) => x.labels.state);
    expect(broken).toHaveLength(1);
    expect(['failed', 'backoff', 'connecting']).toContain(broken[0]);
    expect(value(before, 'mcp_broker_upstream_state', { upstream: 'broken', state: 'ready' })).toBe(0);

    for (let i = 0; i < 2; i++) expect((await call(ALICE, 'echo__echo', { text: 'hi' })).status).toBe(200);
    expect((await call(OP, 'crashy__crash')).body.outcome).toBe('upstream_error');
    await waitFor(async () => {
      const s = await scrape();
      return value(s, 'mcp_broker_upstream_restarts_total', { upstream: 'crashy' }) >= 1 && value(s, 'mcp_broker_upstream_state', { upstream: 'crashy', state: 'ready' }) === 1;
    }, 'the crashy upstream to be restarted and ready');
    // The breaker opened on that failure: the next call is refused without reaching the upstream.
    expect((await call(OP, 'crashy__crash')).body.outcome).toBe('breaker_open');

    const ok = { outcome: 'ok', tool: 'echo__echo', principal: 'alice', kind: 'tool' };
    const after = await scrape();
    expect(value(after, 'mcp_broker_calls_total', ok) - value(before, 'mcp_broker_calls_total', ok)).toBe(2);
    expect(value(after, 'mcp_broker_calls_total', { outcome: 'upstream_error', tool: 'crashy__crash', principal: 'op' })).toBe(1);
    expect(value(after, 'mcp_broker_calls_total', { outcome: 'breaker_open', tool: 'crashy__crash', principal: 'op' })).toBe(1);
    const count = { outcome: 'ok', tool: 'echo__echo' };
    expect(value(after, 'mcp_broker_call_duration_seconds_count', count) - value(before, 'mcp_broker_call_duration_seconds_count', count)).toBe(2);
    expect(value(after, 'mcp_broker_call_duration_seconds_bucket', { ...count, le: '+Inf' })).toBe(value(after, 'mcp_broker_call_duration_seconds_count', count));
    expect(value(after, 'mcp_broker_call_duration_seconds_sum', count)).toBeGreaterThan(0);
    expect(value(after, 'mcp_broker_attempts_total', { tool: 'echo__echo' }) - value(before, 'mcp_broker_attempts_total', { tool: 'echo__echo' })).toBe(2);
    expect(value(after, 'mcp_broker_attempts_total', { tool: 'crashy__crash' })).toBe(1);
    expect(value(after, 'mcp_broker_records_total', { result: 'written' }) - value(before, 'mcp_broker_records_total', { result: 'written' })).toBe(4);
    expect(value(after, 'mcp_broker_breaker_state', { tool: 'crashy__crash', state: 'open' })).toBe(1);
    expect(value(after, 'mcp_broker_breakers_open')).toBe(1);
    // Units api:alice (2 calls) and api:op (1 invoked; the breaker's refusal spent nothing).
    expect(value(after, 'mcp_broker_budget_used_calls') - value(before, 'mcp_broker_budget_used_calls')).toBe(3);
    expect(value(after, 'process_resident_memory_bytes')).toBeGreaterThan(0);
  });

  it('counts sessions open while a Streamable HTTP client is connected', async () => {
    const labels = { transport: 'streamable', era: '2025-11-25' };
    expect(value(await scrape(), 'mcp_broker_sessions_open', labels)).toBe(0);
    const client = await connectHttp(broker.url, 'streamable', { token: ALICE });
    try {
      expect(value(await scrape(), 'mcp_broker_sessions_open', labels)).toBe(1);
    } finally {
      await client.close();
    }
    await waitFor(async () => value(await scrape(), 'mcp_broker_sessions_open', labels) === 0 || undefined, 'the session to end');
  });

  it('counts a 2026-07-28 subscriptions/listen as a stream of that era', async () => {
    const modern = { era: '2026-07-28' };
    expect(value(await scrape(), 'mcp_broker_streams_open', modern)).toBe(0);
    const client = new Client({ name: 'metrics-modern', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${ALICE}` } } }));
    try {
      expect(client.getProtocolEra()).toBe('modern');
      const subscription = await client.listen({ toolsListChanged: true });
      await waitFor(async () => value(await scrape(), 'mcp_broker_streams_open', modern) === 1 || undefined, 'the listen to count');
      await subscription.close();
      await waitFor(async () => value(await scrape(), 'mcp_broker_streams_open', modern) === 0 || undefined, 'the listen to end');
    } finally {
      await client.close();
    }
  });
});

describe('GET /metrics with observability.metricsPublic', () => {
  let broker: HttpBroker;
  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs')) },
      extra: { principals: { op: { token: OP, role: 'operator' } }, observability: { metricsPublic: true } },
    });
  });
  afterAll(async () => {
    await broker?.close();
  });

  it('answers without a token, while the rest stays behind the auth', async () => {
    const res = await http(`${broker.url}/metrics`);
    expect(res.status).toBe(200);
    expect(value(parseMetrics(res.text), 'mcp_broker_upstream_state', { upstream: 'echo', state: 'ready' })).toBe(1);
    expect((await http(`${broker.url}/api/v1/status`)).status).toBe(401);
  });
});
