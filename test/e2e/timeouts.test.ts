/**
 * F18: deadlines come from our config, per tool and per upstream; progress extends them only
 * up to the hard cap; a timeout cancels the upstream request and is recorded as `timeout`.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, readNdjson, startBroker, waitFor, type StartedBroker } from './helpers.js';

let broker: StartedBroker;
const outcome = (r: { _meta?: unknown }) => (r._meta as Record<string, unknown> | undefined)?.['mcp-broker/outcome'];
const log = (name: string) => readNdjson<{ event: string; tool?: string; requestId?: number }>(join(broker.dir, `${name}.log`));

beforeAll(async () => {
  broker = await startBroker({
    servers: {
      // Per tool: only `slow` has a 300 ms deadline; `echo` keeps the broker's.
      pertool: nodeServer(fixture('echo.mjs'), { env: { FIXTURE_LOG: '${configDir}/pertool.log' }, tools: { slow: { timeoutMs: 300 } } }),
      // Per upstream: every tool has 500 ms.
      perserver: nodeServer(fixture('echo.mjs'), { env: { FIXTURE_LOG: '${configDir}/perserver.log' }, timeoutMs: 500 }),
      // 400 ms, extended by progress up to the 1500 ms cap.
      progress: nodeServer(fixture('echo.mjs'), { timeoutMs: 400 }),
    },
    extra: { broker: { timeoutMs: 90_000, extendOnProgress: true, maxTotalTimeoutMs: 1_500 } },
  });
}, 60_000);

afterAll(async () => {
  await broker?.close();
});

async function timed<T>(p: Promise<T>): Promise<{ r: T; ms: number }> {
  const t0 = Date.now();
  const r = await p;
  return { r, ms: Date.now() - t0 };
}

describe('F18: timeouts', () => {
  it('F18: a per-tool timeoutMs makes a slow tool time out; the record says timeout; the upstream got notifications/cancelled', async () => {
    const { r, ms } = await timed(broker.client.callTool({ name: 'pertool__slow', arguments: { ms: 20_000 } }));
    expect(r.isError).toBe(true);
    expect(outcome(r)).toBe('timeout');
    expect(ms).toBeGreaterThanOrEqual(290);
    expect(ms).toBeLessThan(5_000);
    const call = log('pertool').find((e) => e.event === 'call' && e.tool === 'slow')!;
    await waitFor(() => log('pertool').find((e) => e.event === 'cancelled' && e.requestId === call.requestId), 'the upstream to get the cancel', 5_000);
    const record = (await broker.records()).find((x) => x.name === 'pertool__slow')!;
    expect(record).toMatchObject({ outcome: 'timeout', status: 504 });
    // The other tool of that upstream keeps the broker's deadline.
    const echo = await broker.client.callTool({ name: 'pertool__echo', arguments: { text: 'late but fine', delayMs: 700 } });
    expect(outcome(echo)).toBe('ok');
  });

  it('F18: a per-upstream timeoutMs applies to every tool of that upstream', async () => {
    const { r, ms } = await timed(broker.client.callTool({ name: 'perserver__echo', arguments: { text: 'x', delayMs: 10_000 } }));
    expect(outcome(r)).toBe('timeout');
    expect(ms).toBeGreaterThanOrEqual(490);
    expect(ms).toBeLessThan(5_000);
    await waitFor(() => log('perserver').some((e) => e.event === 'cancelled'), 'the upstream to get the cancel', 5_000);
  });

  it('F18: progress extends the deadline only up to maxTotalTimeoutMs, whether or not the client asked for progress; without progress the plain deadline holds', async () => {
    const updates: unknown[] = [];
    const { r, ms } = await timed(
      broker.client.callTool({ name: 'progress__slow', arguments: { ms: 20_000, tickMs: 150 } }, {
        onprogress: (p) => updates.push(p),
      }),
    );
    expect(outcome(r)).toBe('timeout');
    expect(updates.length).toBeGreaterThanOrEqual(3);
    expect(ms).toBeGreaterThanOrEqual(1_400);
    expect(ms).toBeLessThan(8_000);

    // Progress the client did not ask for still moves the deadline (the client is sent none of it).
    const quiet = await timed(broker.client.callTool({ name: 'progress__slow', arguments: { ms: 20_000, tickMs: 150 } }));
    expect(outcome(quiet.r)).toBe('timeout');
    expect(quiet.ms).toBeGreaterThanOrEqual(1_400);

    // A tool that reports no progress keeps the plain deadline.
    const plain = await timed(broker.client.callTool({ name: 'progress__echo', arguments: { text: 'x', delayMs: 10_000 } }));
    expect(outcome(plain.r)).toBe('timeout');
    expect(plain.ms).toBeLessThan(1_400);
  });
});
