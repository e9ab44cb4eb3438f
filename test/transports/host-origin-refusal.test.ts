/**
 * A refused Host or Origin (DNS-rebinding protection, 403) is named in the JSON-RPC error and in
 * the warning logged with it. It was echoed as the caller sent it: up to Node's 16 KiB header
 * limit, with any C1 control (CSI `\x9b`, NEL `\x85`) or invisible character (a soft hyphen)
 * raw, and unscrubbed in the answer (an Origin's `user:password@`, a configured secret). Now it
 * is scrubbed whole, then cut at SHOWN_HEADER_MAX_CHARS with `…`, and every control character is
 * shown as an escape. A real broker (the built CLI) over real HTTP: `/mcp` (the Streamable HTTP
 * handler's own guard) and `/healthz` (the express guard).
 */
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHOWN_HEADER_MAX_CHARS } from '../../src/transports/http/guards.js';
import { fixture, nodeServer, waitFor } from '../e2e/helpers.js';
import { startHttpBroker, type HttpBroker } from './harness.js';

/** Lowercase, as a secret may be written; guards.test.ts has a mixed-case one. */
const SECRET = `guard${randomBytes(16).toString('hex')}`;
/** Any character `printable` escapes (C0, DEL, C1, bidi, invisible format, line separators). */
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/;
const REFUSED = 'http request refused (Host/Origin)';

describe('a refused Host or Origin is named cut, scrubbed and escaped', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs'), { env: { API_TOKEN: '${env:GUARD_TOKEN}' } }) },
      env: { GUARD_TOKEN: SECRET },
    });
  });
  afterAll(async () => broker?.close());

  /** The `why` of every refusal warning logged so far. */
  const logged = () =>
    broker
      .stderr()
      .split('\n')
      .filter((line) => line.includes(REFUSED))
      .map((line) => (JSON.parse(line) as { why: string }).why);

  /**
   * Sends `GET path` with `headers` written as latin1 bytes, one character a byte (as Node reads
   * header values), over a raw socket; the 403's error message, and the warning logged with it.
   */
  async function refusal(path: string, headers: Record<string, string>): Promise<{ message: string; why: string }> {
    const before = logged().length;
    const { port } = new URL(broker.url);
    const lines = [`GET ${path} HTTP/1.1`, ...Object.entries({ host: `127.0.0.1:${port}`, ...headers }).map(([k, v]) => `${k}: ${v}`), 'connection: close', '', ''];
    const socket = connect(Number(port), '127.0.0.1');
    socket.end(Buffer.from(lines.join('\r\n'), 'latin1'));
    const chunks: Buffer[] = [];
    for await (const chunk of socket) chunks.push(chunk as Buffer);
    const answer = Buffer.concat(chunks).toString('utf8');
    expect(answer.slice(0, answer.indexOf('\r\n'))).toBe('HTTP/1.1 403 Forbidden');
    const message = (JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { error: { message: string } }).error.message;
    const why = await waitFor(() => logged()[before], 'the refusal warning');
    return { message, why };
  }

  it('a 10,000-character Host is cut at 200 characters with a marker, in the answer and the log (regression: echoed whole)', async () => {
    const host = `${'h'.repeat(10_000)}.example`;
    for (const path of ['/mcp', '/healthz']) {
      const { message, why } = await refusal(path, { host });
      expect(message).toBe(`Forbidden: Host "${'h'.repeat(SHOWN_HEADER_MAX_CHARS - 1)}…" is not in http.allowedHosts`);
      expect(why).toBe(message.slice('Forbidden: '.length));
    }
  });

  it('control and invisible characters in a Host are shown as escapes (regression: C1 controls and the soft hyphen were sent raw)', async () => {
    // Header bytes are latin1: 0x9b is C1 CSI, 0x85 NEL, 0xad the soft hyphen; E2 80 AE is U+202E's UTF-8.
    const host = 'evil\u009b2J\u0085\u00adx\u00e2\u0080\u00ae.example';
    for (const path of ['/mcp', '/healthz']) {
      const { message, why } = await refusal(path, { host });
      expect(message).not.toMatch(UNPRINTABLE);
      expect(why).not.toMatch(UNPRINTABLE);
      // Shown as sent (compared lowercased): the scrub must see a secret as it was written.
      expect(message).toBe('Forbidden: Host "evil\\x9b2J\\x85\\xadx\u00e2\\x80\u00ae.example" is not in http.allowedHosts');
      expect(why).toBe(message.slice('Forbidden: '.length));
    }
  });

  it('an Origin holding a secret across the cut is scrubbed before it is cut: no part of the secret is shown (regression: echoed unscrubbed)', async () => {
    // The secret starts 20 characters before the cut: cut first, its first 20 characters would stand unrecognised.
    const origin = `http://${'o'.repeat(SHOWN_HEADER_MAX_CHARS - 20 - 'http://'.length)}${SECRET}.example\u0085`;
    for (const path of ['/mcp', '/healthz']) {
      const { message, why } = await refusal(path, { origin });
      for (const shown of [message, why]) {
        expect(shown).not.toContain(SECRET.slice(0, 6));
        expect(shown).toContain('[REDACTED]');
        expect(shown).not.toMatch(UNPRINTABLE);
      }
      expect(message).toBe(`Forbidden: Origin "http://${'o'.repeat(SHOWN_HEADER_MAX_CHARS - 27)}[REDACTED].example\\x85" is not in http.allowedOrigins`);
      expect(why).toBe(message.slice('Forbidden: '.length));
    }
  });
});
