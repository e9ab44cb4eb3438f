/**
 * A parked call of a 2026-07-28 (sessionless) caller, approved after its broker restarted, runs
 * again from its stored row: it must be charged to its unit's budget window as the original
 * modern call would have been (README "Budget": a modern unit's budget is per
 * `broker.budgetWindowMs` window and renews). Two real gateways in this process, one after the
 * other, on one SQLite store; the echo fixture upstream; a manual clock; calls over HTTP.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { listParked } from '../../src/tasks/index.js';
import { serveHttp, type HttpServing } from '../../src/transports/http.js';
import { fixture, nodeServer, readNdjson, waitFor, type RecordLine } from '../e2e/helpers.js';

const TOKEN = 'alice-parked-budget-token-0123456789';
const UNIT_KEY = 'job-1';

const config = {
  mcpServers: { echo: nodeServer(fixture('echo.mjs'), { required: true }) },
  broker: { budgetPerUnit: 2, budgetWindowMs: 60_000, records: { path: './calls.ndjson' } },
  policy: { askMode: 'park', rules: [{ tools: ['echo__slow'], action: 'ask' }] },
  principals: { alice: { token: '${env:ALICE_TOKEN}' } },
  estate: { enabled: false },
};

describe('an approved parked call of a modern caller, run again from its row after a restart', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-parked-budget-'));
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A gateway on `dir` (so on its one store), serving HTTP, on `clock`. */
  const serve = async (clock: ManualClock): Promise<{ gateway: Gateway; serving: HttpServing; stop: () => Promise<void> }> => {
    const gateway = new Gateway(parseConfig(config, { baseDir: dir, env: { ALICE_TOKEN: TOKEN } }), { logger: silentLogger(), clock });
    const serving = await serveHttp(gateway, { host: '127.0.0.1', port: 0 });
    let stopped = false;
    const stop = async () => {
      if (stopped) return;
      stopped = true;
      await serving.close();
      await gateway.stop();
    };
    cleanups.push(stop);
    return { gateway, serving, stop };
  };

  /** One 2026-07-28 `tools/call` by alice in unit `UNIT_KEY`; resolves to the outcome. */
  const call = async (url: string, name: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<unknown> => {
    const res = await fetch(`${url}/mcp`, {
      method: 'POST',
      signal,
      headers: {
        authorization: `Bearer ${TOKEN}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call',
        'mcp-name': name,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name,
          arguments: args,
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientCapabilities': {},
            'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
            'mcp-broker/unit': UNIT_KEY,
          },
        },
      }),
    });
    const text = await res.text();
    const body = JSON.parse(text.startsWith('{') ? text : text.split('\n').find((l) => l.startsWith('data: '))!.slice(6)) as {
      result?: { _meta?: Record<string, unknown> };
    };
    return body.result?._meta?.['mcp-broker/outcome'];
  };

  it('is charged to its unit\'s current window, renewed when it ended (regression: the re-run was no sessionless caller, so it was refused in an ended window and its charge was lost at the next renewal)', async () => {
    const clock = new ManualClock();

    // Broker one: alice's call asks, parks; alice leaves (it stays parked); the broker stops.
    const first = await serve(clock);
    const leave = new AbortController();
    const parked = call(first.serving.url, 'echo__slow', { ms: 0 }, leave.signal).catch(() => 'left');
    const row = await waitFor(async () => (await listParked(first.gateway.store, clock.now())).items[0], 'the call parked');
    expect(row).toMatchObject({ principal: 'alice', unit: `modern:alice/${UNIT_KEY}`, sessionId: '' });
    leave.abort();
    expect(await parked).toBe('left');
    await first.stop();

    // Broker two, same store: alice spends her unit's window.
    const second = await serve(clock);
    const url = second.serving.url;
    expect([await call(url, 'echo__echo', { text: 'a' }), await call(url, 'echo__echo', { text: 'b' }), await call(url, 'echo__echo', { text: 'c' })]).toEqual([
      'ok',
      'ok',
      'budget_exhausted',
    ]);

    // The window ends; the operator approves; the call runs from its row in the new window.
    await clock.advance(60_000);
    await second.gateway.tasks.decide(row.id, { approve: true, by: 'cli' });
    const settled = await waitFor(async () => {
      const now = await second.gateway.tasks.get(row.id, undefined);
      return now && (now.status === 'completed' || now.status === 'failed') ? now : undefined;
    }, 'the approved call settled');
    const records = readNdjson<RecordLine>(join(dir, 'calls.ndjson')).filter((r) => r.name === 'echo__slow' && r.callId === settled.callId);
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ outcome: 'ok', unit: `modern:alice/${UNIT_KEY}`, sessionId: null });
    expect(settled.status).toBe('completed');

    // It spent one of the new window's two calls: one more, then refused.
    expect([await call(url, 'echo__echo', { text: 'd' }), await call(url, 'echo__echo', { text: 'e' })]).toEqual(['ok', 'budget_exhausted']);
  });
});
