/**
 * A large result over Streamable HTTP is written on the SSE stream as the bytes it arrived in
 * (src/transports/http/raw-sse.ts), on the legacy call lane and on the SDK's path alike: escapes
 * an SDK server never writes (`\/`) reach the client as the upstream wrote them, and a result
 * whose bytes hold a carriage return (JSON whitespace, a line end to SSE) is serialised instead,
 * so the event stays whole. Upstream: test/fixtures/escaped-large.mjs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer } from './helpers.js';
import { MCP_POST_HEADERS, openRawSession, sseMessages, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const servers = { big: nodeServer(fixture('escaped-large.mjs')) };
const PROSE = 'The quick brown fox jumps over the lazy dog; "quotes" and a path /usr/share/doc.\n';

/** The SSE body of a `tools/call` of `big__text` with `which`, on a new legacy session. */
async function callText(broker: HttpBroker, which: string): Promise<string> {
  const session = await openRawSession(broker.url);
  const res = await fetch(`${broker.url}/mcp`, {
    method: 'POST',
    headers: { ...MCP_POST_HEADERS, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'big__text', arguments: { which } } }),
  });
  expect(res.status).toBe(200);
  return res.text();
}

const textOf = (body: string) => (sseMessages(body).at(-1) as { result: { content: Array<{ text: string }> } }).result.content[0]!.text;

describe.each([
  ['the legacy call lane', {}],
  ["the SDK's path", { MCP_BROKER_NO_HTTP_CALL_LANE: '1' }],
])('a large result over Streamable HTTP, %s', (_path, env) => {
  let broker: HttpBroker;
  beforeAll(async () => {
    broker = await startHttpBroker({ servers, env });
  }, 60_000);
  afterAll(async () => broker?.close());

  it('reaches the client as the bytes the upstream wrote', async () => {
    const body = await callText(broker, 'slashes');
    expect(body).toContain(' see https:\\/\\/example.com\\/docs now"}]}');
    expect(textOf(body)).toBe(`${PROSE.repeat(1200)} see https://example.com/docs now`);
  });

  it('with a carriage return among its bytes, arrives serialised, in one whole event', async () => {
    const body = await callText(broker, 'cr');
    expect(body).not.toContain('\r');
    expect(textOf(body)).toBe(`${PROSE.repeat(1200)} all clean`);
  });
});
