/**
 * A large result over Streamable HTTP is written on the SSE stream as the bytes it arrived in
 * (src/transports/http/raw-sse.ts), on the legacy call lane and on the SDK's path alike: escapes
 * an SDK server never writes (`\/`) reach the client as the upstream wrote them, and a result
 * whose bytes hold a carriage return (JSON whitespace, a line end to SSE) is serialised instead,
 * so the event stays whole. A 2026-07-28 client's call on the modern lane
 * (src/wire/direct-modern-http.ts) gets its JSON answer as those bytes too. Upstream:
 * test/fixtures/escaped-large.mjs.
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

describe('a large result to a 2026-07-28 client over HTTP, on the modern call lane', () => {
  let broker: HttpBroker;
  beforeAll(async () => {
    broker = await startHttpBroker({ servers });
  }, 60_000);
  afterAll(async () => broker?.close());

  const envelope = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'raw-results', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  const post = (id: number, which: string) =>
    fetch(`${broker.url}/mcp`, {
      method: 'POST',
      headers: { ...MCP_POST_HEADERS, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'big__text' },
      body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'big__text', arguments: { which }, _meta: envelope } }),
    });
  const read = async (res: Response) => {
    const body = await res.text();
    expect([res.status, res.headers.get('content-type'), Number(res.headers.get('content-length'))]).toEqual([200, 'application/json', Buffer.byteLength(body)]);
    return { body, result: JSON.parse(body).result as { resultType: string; content: Array<{ text: string }> } };
  };

  it("is written as the bytes the upstream wrote once the lane serves the envelope (the SDK's first answer is serialised)", async () => {
    const text = `${PROSE.repeat(1200)} see https://example.com/docs now`;
    // The first call with an envelope is the SDK's: it serialises the result.
    const first = await read(await post(1, 'slashes'));
    expect(first.body).not.toContain('\\/');
    expect(first.result.content[0]!.text).toBe(text);
    const second = await read(await post(2, 'slashes'));
    expect(second.body).toContain(' see https:\\/\\/example.com\\/docs now"}]');
    expect(second.body.endsWith('}')).toBe(true);
    expect(second.result).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text }] });
    expect(JSON.parse(second.body)).toMatchObject({ jsonrpc: '2.0', id: 2 });
  });
});
