/**
 * The log line of a refused request (400 for several `Authorization` headers, 401, 403 for a Host
 * or Origin, 413 for a body over `http.maxBodyBytes`) names the request's path. It named it whole,
 * as the caller sent it: up to Node's 16 KiB header limit, on every refusal, to a terminal or a
 * log file; and cut by nobody, a secret in it was left to the logger's scrub. Now the path is
 * scrubbed whole, then cut at SHOWN_PATH_MAX_CHARS with `…`. A real broker (the built CLI) over
 * a raw socket, so the request target goes out exactly as written.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cut } from '../../src/shared/cut.js';
import { SHOWN_PATH_MAX_CHARS } from '../../src/transports/http/guards.js';
import { fixture, nodeServer, waitFor } from '../e2e/helpers.js';
import { startHttpBroker, type HttpBroker } from './harness.js';

/** A principal's token: one of the secrets the broker scrubs (a client that put it in a path). */
const TOKEN = 'pathlog-alice-token-4b1f0c9e27d85a36';

describe('a refused request names its path scrubbed whole, then cut', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs')) },
      extra: { principals: { alice: { token: TOKEN } }, http: { maxBodyBytes: 1024 } },
    });
  });
  afterAll(async () => broker?.close());

  /** The `path` of every log line with message `msg` so far. */
  const logged = (msg: string) =>
    broker
      .stderr()
      .split('\n')
      .filter((line) => line.startsWith('{') && (JSON.parse(line) as { msg: string }).msg === msg)
      .map((line) => (JSON.parse(line) as { path: string }).path);

  /**
   * Sends `method target` with `headers` (a header given as an array is sent once per value) over
   * a raw socket; resolves with the answer's status line.
   */
  async function send(method: string, target: string, headers: Record<string, string | string[]>, body = ''): Promise<string> {
    const { port } = new URL(broker.url);
    const all = { host: `127.0.0.1:${port}`, ...headers, ...(body ? { 'content-length': String(body.length) } : {}), connection: 'close' };
    const lines = [`${method} ${target} HTTP/1.1`, ...Object.entries(all).flatMap(([k, v]) => (Array.isArray(v) ? v : [v]).map((one) => `${k}: ${one}`)), '', body];
    const socket = connect(Number(port), '127.0.0.1');
    socket.on('error', () => undefined);
    socket.end(Buffer.from(lines.join('\r\n'), 'latin1'));
    const chunks: Buffer[] = [];
    for await (const chunk of socket) chunks.push(chunk as Buffer);
    const answer = Buffer.concat(chunks).toString('latin1');
    return answer.slice(0, answer.indexOf('\r\n'));
  }

  /** Sends the request, expects `status`, and resolves with the path the new `msg` log line names. */
  async function refusal(msg: string, status: string, method: string, target: string, headers: Record<string, string | string[]>, body?: string): Promise<string> {
    const before = logged(msg).length;
    expect(await send(method, target, headers, body)).toBe(`HTTP/1.1 ${status}`);
    return waitFor(() => logged(msg)[before], `the log line "${msg}"`);
  }

  const long = `/api/v1/${'p'.repeat(10_000)}`;
  const shown = cut(long, SHOWN_PATH_MAX_CHARS);

  it('a 10,000-character path is cut at 200 characters with a marker in the 400, 401, 403 and 413 log lines (regression: logged whole)', async () => {
    expect(shown).toHaveLength(SHOWN_PATH_MAX_CHARS);
    expect(await refusal('http request refused (authentication)', '401 Unauthorized', 'GET', long, {})).toBe(shown);
    expect(await refusal('http request refused (several Authorization headers)', '400 Bad Request', 'GET', long, { authorization: [`Bearer ${TOKEN}`, 'Bearer other'] })).toBe(shown);
    expect(await refusal('http request refused (Host/Origin)', '403 Forbidden', 'GET', long, { host: 'elsewhere.example' })).toBe(shown);
    const body = 'x'.repeat(2048);
    expect(await refusal('http request body too large', '413 Payload Too Large', 'POST', long, { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body)).toBe(shown);
  });

  it('a token across the cut is scrubbed before the path is cut: no part of it is logged (regression: the logger scrubbed the cut path)', async () => {
    // The token starts 20 characters before the cut: cut first, its first 19 characters would stand unrecognised.
    const head = `/x/${'o'.repeat(SHOWN_PATH_MAX_CHARS - 20 - '/x/'.length)}`;
    const path = await refusal('http request refused (authentication)', '401 Unauthorized', 'GET', `${head}${TOKEN}/${'z'.repeat(100)}?q=1`, {});
    expect(path).not.toContain(TOKEN.slice(0, 6));
    expect(path).toBe(cut(`${head}[REDACTED]/${'z'.repeat(100)}`, SHOWN_PATH_MAX_CHARS));
  });

  it('a path with a control character or a byte outside ASCII is refused 400 by Node before any listener, and never logged (so shownPath need not escape one)', async () => {
    const lines = () => broker.stderr().split('\n').length;
    const before = lines();
    for (const target of ['/api/v1/a\u001b[2Jb', '/api/v1/a\u009b2Jb', '/api/v1/a\u00e2\u0080\u00aeb', '/api/v1/a\u007fb']) {
      expect(await send('GET', target, {})).toBe('HTTP/1.1 400 Bad Request');
    }
    expect(lines()).toBe(before);
  });
});
