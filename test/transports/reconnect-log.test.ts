/**
 * `POST /v1/mcp/reconnect {server}` logs the server the caller named ('reconnect via admin api').
 * It logged it whole, as the caller sent it: any string up to `http.maxBodyBytes`, on every
 * attempt. Now it is scrubbed whole, then cut at SHOWN_SERVER_MAX_CHARS with `…`. A real broker
 * (the built CLI) over HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cut } from '../../src/shared/cut.js';
import { SHOWN_SERVER_MAX_CHARS } from '../../src/transports/http/reconnect-route.js';
import { fixture, nodeServer, waitFor } from '../e2e/helpers.js';
import { http, startHttpBroker, type HttpBroker } from './harness.js';

const OPS = 'reconnectlog-ops-token-5d0e3a9c71b2f468';
const LOGGED = 'reconnect via admin api';

describe('the server a reconnect names is logged scrubbed whole, then cut', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs')) },
      extra: { principals: { ops: { token: OPS, role: 'operator' } } },
    });
  });
  afterAll(async () => broker?.close());

  /** The `server` of every 'reconnect via admin api' log line so far. */
  const logged = () =>
    broker
      .stderr()
      .split('\n')
      .filter((line) => line.startsWith('{') && (JSON.parse(line) as { msg: string }).msg === LOGGED)
      .map((line) => (JSON.parse(line) as { server: string }).server);

  async function reconnect(server: string): Promise<string> {
    const before = logged().length;
    const res = await http(`${broker.url}/v1/mcp/reconnect`, { headers: { authorization: `Bearer ${OPS}` }, body: { server } });
    expect(res.status).toBeLessThan(500);
    return waitFor(() => logged()[before], 'the reconnect log line');
  }

  it('a 10,000-character server is cut at 200 characters with a marker (regression: logged whole)', async () => {
    const server = 's'.repeat(10_000);
    expect(await reconnect(server)).toBe(cut(server, SHOWN_SERVER_MAX_CHARS));
    expect(cut(server, SHOWN_SERVER_MAX_CHARS)).toHaveLength(200);
  });

  it('a token across the cut is scrubbed before the cut: no part of it is logged (regression: the logger scrubbed the cut value)', async () => {
    const head = 'o'.repeat(SHOWN_SERVER_MAX_CHARS - 20);
    const shown = await reconnect(`${head}${OPS}${'z'.repeat(100)}`);
    expect(shown).not.toContain(OPS.slice(0, 6));
    expect(shown).toBe(cut(`${head}[REDACTED]${'z'.repeat(100)}`, SHOWN_SERVER_MAX_CHARS));
  });
});
