/**
 * The admin API's unit `api:<principal>` and a modern request's `modern:<principal>` are
 * sessionless: their budgets renew every `broker.budgetWindowMs`, so no principal is locked out
 * until a restart (issue 13 §4). A real
 * gateway serving HTTP in this process, with the echo fixture upstream and a manual clock.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/shared/clock.js';
import { fixture, nodeServer } from '../e2e/helpers.js';
import { serveInProcess, type InProcessHttp } from './in-process.js';

const TOKEN = 'alice-budget-token-0123456789';

describe('sessionless budget windows', () => {
  let served: InProcessHttp | undefined;
  afterEach(async () => served?.close());

  /** A gateway serving HTTP: alice's budget is 2 calls per 60 s window, on the returned manual clock. */
  const start = async (alice: Record<string, unknown> = {}): Promise<ManualClock> => {
    const clock = new ManualClock();
    served = await serveInProcess(
      {
        mcpServers: { echo: nodeServer(fixture('echo.mjs'), { required: true }) },
        broker: { budgetPerUnit: 2, budgetWindowMs: 60_000 },
        principals: { alice: { token: '${env:ALICE_TOKEN}', ...alice } },
        estate: { enabled: false },
      },
      { env: { ALICE_TOKEN: TOKEN }, clock },
    );
    return clock;
  };

  it('api:<principal> renews after broker.budgetWindowMs (regression: it never renewed, refusing every API call until restart)', async () => {
    const clock = await start();
    const callOnce = async () => {
      const res = await fetch(`${served!.serving.url}/api/v1/mcp/call`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ subject: 'echo__echo', args: { text: 'hi' } }),
      });
      return ((await res.json()) as { outcome: string }).outcome;
    };
    const outcomes = async (n: number) => {
      const out: string[] = [];
      for (let i = 0; i < n; i++) out.push(await callOnce());
      return out;
    };
    expect(await outcomes(3)).toEqual(['ok', 'ok', 'budget_exhausted']);
    await clock.advance(60_000);
    expect(await outcomes(3)).toEqual(['ok', 'ok', 'budget_exhausted']);
  });

  it('POST /v1/mcp/reconnect charges the modern unit it names to its current window, renewed when it ended (regression: the route\'s caller was no sessionless one, so it was refused in an ended window and its charge was lost at the next renewal)', async () => {
    const clock = await start({ role: 'operator' });
    let id = 0;
    const callOnce = async () => {
      const res = await fetch(`${served!.serving.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${TOKEN}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'tools/call',
          'mcp-name': 'echo__echo',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: ++id,
          method: 'tools/call',
          params: {
            name: 'echo__echo',
            arguments: { text: 'hi' },
            _meta: {
              'io.modelcontextprotocol/protocolVersion': '2026-07-28',
              'io.modelcontextprotocol/clientCapabilities': {},
              'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
              'mcp-broker/unit': 'ops-1',
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
    const reconnect = async () => {
      const res = await fetch(`${served!.serving.url}/v1/mcp/reconnect`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ server: 'echo', unit: 'ops-1' }),
      });
      return { status: res.status, body: (await res.json()) as { outcome?: string } };
    };
    expect([await callOnce(), await callOnce(), await callOnce()]).toEqual(['ok', 'ok', 'budget_exhausted']);
    await clock.advance(60_000);
    // The window ended: the re-dial is the new window's first call ...
    expect(await reconnect()).toMatchObject({ status: 200, body: { outcome: 'accepted' } });
    // ... so the unit has one call left in it.
    expect([await callOnce(), await callOnce()]).toEqual(['ok', 'budget_exhausted']);
  });

  it('modern:<principal> (a 2026-07-28 request naming no unit key) renews after broker.budgetWindowMs (regression: it lasted as long as the process, locking the principal out)', async () => {
    const clock = await start();
    let id = 0;
    const callOnce = async () => {
      const res = await fetch(`${served!.serving.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${TOKEN}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'tools/call',
          'mcp-name': 'echo__echo',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: ++id,
          method: 'tools/call',
          params: {
            name: 'echo__echo',
            arguments: { text: 'hi' },
            _meta: {
              'io.modelcontextprotocol/protocolVersion': '2026-07-28',
              'io.modelcontextprotocol/clientCapabilities': {},
              'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
            },
          },
        }),
      });
      const text = await res.text();
      // JSON or one SSE event; either way the outcome is in the result's _meta.
      const body = JSON.parse(text.startsWith('{') ? text : text.split('\n').find((l) => l.startsWith('data: '))!.slice(6)) as {
        result?: { _meta?: Record<string, unknown> };
      };
      return body.result?._meta?.['mcp-broker/outcome'];
    };
    const outcomes = async (n: number) => {
      const out: unknown[] = [];
      for (let i = 0; i < n; i++) out.push(await callOnce());
      return out;
    };
    expect(await outcomes(3)).toEqual(['ok', 'ok', 'budget_exhausted']);
    await clock.advance(60_000);
    expect(await outcomes(3)).toEqual(['ok', 'ok', 'budget_exhausted']);
  });
});
