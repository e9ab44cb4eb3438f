/**
 * F04 (a): two downstream clients send requests with the same JSON-RPC ids (every SDK client
 * counts from 0) to one shared upstream at the same time; each gets its own answer, because the
 * broker numbers upstream requests itself.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer } from './helpers.js';
import { connectHttp, MCP_POST_HEADERS, openRawSession, startHttpBroker, type HttpBroker } from '../transports/harness.js';

describe('F04: request ids across sessions', () => {
  let broker: HttpBroker;
  beforeAll(async () => {
    broker = await startHttpBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) } });
  });
  afterAll(async () => broker?.close());

  it('F04: two sessions sending the same ids to one upstream each get their own answers', async () => {
    const a = await connectHttp(broker.url, 'streamable');
    const b = await connectHttp(broker.url, 'streamable');
    try {
      for (let round = 0; round < 5; round++) {
        // Both clients are at the same request id on each round; the upstream answers B first.
        const [ra, rb] = await Promise.all([
          a.client.callTool({ name: 'echo__echo', arguments: { text: `A${round}`, delayMs: 60 } }),
          b.client.callTool({ name: 'echo__echo', arguments: { text: `B${round}` } }),
        ]);
        expect(ra.content).toEqual([{ type: 'text', text: `A${round}` }]);
        expect(rb.content).toEqual([{ type: 'text', text: `B${round}` }]);
      }
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe('F04 over Streamable HTTP: the same id twice in flight on one session', () => {
  let broker: HttpBroker;
  beforeAll(async () => {
    broker = await startHttpBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) } });
  });
  afterAll(async () => broker?.close());

  const post = (session: string, body: unknown) =>
    fetch(`${broker.url}/mcp`, {
      method: 'POST',
      headers: { ...MCP_POST_HEADERS, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify(body),
    });
  const call = (id: number, name: string, args: object) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });

  it('the second is refused -32600 and the first still gets its answer (it was lost); a batch repeating an id is refused whole', async () => {
    const session = await openRawSession(broker.url);
    // The first: a slow call sending progress, so its stream shows when the upstream has it.
    const slow = { ...call(7, 'echo__slow', { ms: 600, tickMs: 100 }), params: { name: 'echo__slow', arguments: { ms: 600, tickMs: 100 }, _meta: { progressToken: 'p7' } } };
    const reader = (await post(session, slow)).body!.getReader();
    let first = '';
    while (!first.includes('notifications/progress')) {
      const { value, done } = await reader.read();
      if (done) break;
      first += new TextDecoder().decode(value);
    }
    const second = await post(session, call(7, 'echo__echo', { text: 'the second' }));
    expect(second.status).toBe(200);
    expect(await second.json()).toMatchObject({ id: 7, error: { code: -32600, message: expect.stringContaining('already in flight') } });
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      first += new TextDecoder().decode(value);
    }
    expect(first).toContain('slept 600 ms');
    // Free again once answered: the id is taken by the next call.
    expect(await (await post(session, call(7, 'echo__echo', { text: 'again' }))).text()).toContain('again');
    const batch = await post(session, [call(9, 'echo__echo', { text: 'a' }), call(9, 'echo__echo', { text: 'b' })]);
    expect(batch.status).toBe(400);
    expect(await batch.json()).toMatchObject({ error: { code: -32600 } });
  });
});
