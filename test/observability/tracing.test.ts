/**
 * Traces of the call path (issue 20), with an in-process exporter: two real gateways in this
 * process, the inner one served over HTTP (`serveHttp`) with the echo fixture behind it, the
 * outer one dialling it as an HTTP upstream. One call through the outer broker must be one
 * trace: its call span, stage spans and attempt span, and below the attempt the inner broker's
 * call span. No argument or result value may appear in any attribute.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallerSession } from '../../src/broker/types.js';
import { parseConfig } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway.js';
import { CallTracer } from '../../src/observability/tracing.js';
import { silentLogger } from '../../src/shared/logger.js';
import { serveHttp, type HttpServing } from '../../src/transports/http.js';
import { fixture, readNdjson, waitFor, type RecordLine } from '../e2e/helpers.js';

const SECRET_ARG = 'argument-value-that-must-not-be-an-attribute';

function tracer(exporter: InMemorySpanExporter): CallTracer {
  return new CallTracer({ exporter, samplingRatio: 1, serviceName: 'test', version: '0.0.0', exportDelayMs: 10 });
}

const caller: CallerSession = { sessionId: 's1', principal: 'local', unit: 'u1', isLive: () => true };

describe('call tracing', () => {
  let dir: string;
  let inner: Gateway;
  let serving: HttpServing;
  let outer: Gateway;
  const innerSpans = new InMemorySpanExporter();
  const outerSpans = new InMemorySpanExporter();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-tracing-'));
    const innerConfig = parseConfig(
      { mcpServers: { echo: { command: process.execPath, args: [fixture('echo.mjs')] } }, broker: { records: { path: join(dir, 'inner.ndjson') }, dataDir: join(dir, 'inner-data') } },
      { baseDir: dir },
    );
    inner = new Gateway(innerConfig, { logger: silentLogger(), tracer: tracer(innerSpans) });
    serving = await serveHttp(inner, { host: '127.0.0.1', port: 0 });
    const outerConfig = parseConfig(
      { mcpServers: { hop: { type: 'http', url: `${serving.url}/mcp` } }, broker: { records: { path: join(dir, 'outer.ndjson') }, dataDir: join(dir, 'outer-data') } },
      { baseDir: dir },
    );
    outer = new Gateway(outerConfig, { logger: silentLogger(), tracer: tracer(outerSpans) });
    await outer.start();
  }, 30_000);

  afterAll(async () => {
    await outer?.stop();
    await serving?.close();
    await inner?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('one call through two brokers is one trace: call span ▸ stage spans ▸ attempt ▸ the inner broker’s call span', async () => {
    const answer = await outer.broker.call({ name: 'hop__echo__echo', args: { text: SECRET_ARG }, signal: new AbortController().signal }, caller);
    expect(answer.outcome).toBe('ok');
    await outer.tracer!.flush();
    const innerCall = await waitFor(async () => {
      await inner.tracer!.flush();
      return innerSpans.getFinishedSpans().find((s) => s.name === 'tools/call echo__echo');
    }, 'the inner broker to finish its call span');
    const spans = outerSpans.getFinishedSpans();
    const call = spans.find((s) => s.name === 'tools/call hop__echo__echo')!;
    expect(call).toBeDefined();
    expect(call.parentSpanContext).toBeUndefined();
    const traceId = call.spanContext().traceId;
    for (const s of spans) expect(s.spanContext().traceId).toBe(traceId);
    expect(innerCall.spanContext().traceId).toBe(traceId);

    // The stages that ran, nested as they nest; the attempt below the retry stage.
    const byName = (name: string) => spans.find((s) => s.name === name)!;
    const chain = ['broker.publish', 'broker.record', 'broker.evaluate', 'broker.scrub', 'broker.judge', 'broker.relay', 'broker.budget', 'broker.breaker', 'broker.deadline', 'broker.retry', 'attempt 1'];
    let parent: ReadableSpan = call;
    for (const name of chain) {
      const span = byName(name);
      expect(span, name).toBeDefined();
      expect(span.parentSpanContext?.spanId, `${name}'s parent`).toBe(parent.spanContext().spanId);
      parent = span;
    }
    // The inner broker's call span is a child of the outer attempt (context sent upstream).
    expect(innerCall.parentSpanContext?.spanId).toBe(byName('attempt 1').spanContext().spanId);

    expect(call.attributes).toMatchObject({
      'mcp_broker.subject': 'hop/echo__echo',
      'mcp_broker.name': 'hop__echo__echo',
      'mcp_broker.principal': 'local',
      'mcp_broker.unit': 'u1',
      'mcp_broker.outcome': 'ok',
      'mcp_broker.status': 200,
      'mcp_broker.attempts': 1,
      'mcp_broker.era': '2025-11-25',
    });
    expect(call.attributes['mcp_broker.bytes_out']).toBeGreaterThan(0);
    for (const s of [...spans, ...innerSpans.getFinishedSpans()]) expect(JSON.stringify(s.attributes)).not.toContain(SECRET_ARG);

    // The record names the call span.
    const record = readNdjson<RecordLine & { traceId?: string; spanId?: string }>(join(dir, 'outer.ndjson')).find((r) => r.callId === answer.callId)!;
    expect(record.traceId).toBe(traceId);
    expect(record.spanId).toBe(call.spanContext().spanId);
  });

  it('continues the trace context the caller sent in _meta (traceparent, baggage)', async () => {
    const callerTrace = '0af7651916cd43dd8448eb211c80319c';
    const callerSpan = 'b7ad6b7169203331';
    const answer = await outer.broker.call(
      {
        name: 'hop__echo__echo',
        args: { text: 'x' },
        meta: { traceparent: `00-${callerTrace}-${callerSpan}-01`, baggage: 'tenant=t1' },
        signal: new AbortController().signal,
      },
      caller,
    );
    expect(answer.outcome).toBe('ok');
    await outer.tracer!.flush();
    const call = outerSpans.getFinishedSpans().find((s) => s.spanContext().traceId === callerTrace && s.name.startsWith('tools/call'))!;
    expect(call).toBeDefined();
    expect(call.parentSpanContext?.spanId).toBe(callerSpan);
    await waitFor(async () => {
      await inner.tracer!.flush();
      return innerSpans.getFinishedSpans().find((s) => s.spanContext().traceId === callerTrace);
    }, 'the inner broker to continue the caller’s trace');
  });

  it('labels a sessionless (2026-07-28) call with its era, though the SDK took its envelope off', async () => {
    const modern: CallerSession = { sessionId: null, principal: 'local', unit: 'modern:local', era: 'modern', isLive: () => true };
    const answer = await outer.broker.call({ name: 'hop__echo__echo', args: { text: 'era' }, signal: new AbortController().signal }, modern);
    expect(answer.outcome).toBe('ok');
    await outer.tracer!.flush();
    const call = outerSpans.getFinishedSpans().filter((s) => s.name === 'tools/call hop__echo__echo').at(-1)!;
    expect(call.attributes['mcp_broker.era']).toBe('2026-07-28');
  });

  it('a refused call has spans only for the stages that ran', async () => {
    outerSpans.reset();
    const answer = await outer.broker.call({ name: 'no_such_tool', args: {}, signal: new AbortController().signal }, caller);
    expect(answer.outcome).toBe('unregistered');
    await outer.tracer!.flush();
    const names = outerSpans.getFinishedSpans().map((s) => s.name);
    expect(names).toContain('broker.judge');
    expect(names).not.toContain('broker.budget');
    expect(names.some((n) => n.startsWith('attempt'))).toBe(false);
    const call = outerSpans.getFinishedSpans().find((s) => s.name.startsWith('tools/call'))!;
    expect(call.attributes['mcp_broker.outcome']).toBe('unregistered');
    expect(call.status.code).toBe(2);
  });
});
