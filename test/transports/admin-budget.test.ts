/**
 * The admin API's unit `api:<principal>` is sessionless: its budget renews every
 * `broker.budgetWindowMs`, so no principal is locked out until a restart (issue 13 §4). A real
 * gateway serving HTTP in this process, with the echo fixture upstream and a manual clock.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { serveHttp, type HttpServing } from '../../src/transports/http.js';
import { fixture, nodeServer } from '../e2e/helpers.js';

const TOKEN = 'alice-budget-token-0123456789';

describe('admin API budget window', () => {
  let dir: string;
  let gateway: Gateway | undefined;
  let serving: HttpServing | undefined;
  afterEach(async () => {
    await serving?.close();
    await gateway?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('api:<principal> renews after broker.budgetWindowMs (regression: it never renewed, refusing every API call until restart)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-api-budget-'));
    const config = parseConfig(
      {
        mcpServers: { echo: nodeServer(fixture('echo.mjs'), { required: true }) },
        broker: { budgetPerUnit: 2, budgetWindowMs: 60_000 },
        principals: { alice: { token: '${env:ALICE_TOKEN}' } },
        estate: { enabled: false },
      },
      { baseDir: dir, env: { ALICE_TOKEN: TOKEN } },
    );
    const clock = new ManualClock();
    gateway = new Gateway(config, { logger: silentLogger(), clock });
    serving = await serveHttp(gateway, { host: '127.0.0.1', port: 0 });
    const callOnce = async () => {
      const res = await fetch(`${serving!.url}/api/v1/mcp/call`, {
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
});
