/**
 * Legacy SSE (`GET /sse` + `POST /messages?sessionId=`) through the real CLI: several clients at
 * once, each its own session; a reconnect after a dropped stream; stray and malformed POSTs get
 * a 4xx and the process keeps serving everyone else.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, waitFor } from './helpers.js';
import { connectHttp, http, readStream, startHttpBroker, type HttpBroker } from '../transports/harness.js';

describe('legacy SSE', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) } });
  });
  afterAll(async () => broker?.close());

  it('serves two SSE clients at once, each with its own session', async () => {
    const a = await connectHttp(broker.url, 'sse');
    const b = await connectHttp(broker.url, 'sse');
    try {
      const [ra, rb] = await Promise.all([
        a.client.callTool({ name: 'echo__echo', arguments: { text: 'from a', delayMs: 200 } }),
        b.client.callTool({ name: 'echo__echo', arguments: { text: 'from b', delayMs: 100 } }),
      ]);
      expect((ra.content as { text: string }[])[0]!.text).toBe('from a');
      expect((rb.content as { text: string }[])[0]!.text).toBe('from b');
      const records = await waitFor(() => {
        const rs = broker.records().filter((r) => r.callId === ra._meta?.['mcp-broker/callId'] || r.callId === rb._meta?.['mcp-broker/callId']);
        return rs.length === 2 ? rs : undefined;
      }, 'both records');
      expect(new Set(records.map((r) => r.sessionId)).size).toBe(2);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('a client that drops its stream reconnects as a new session; the old id is gone', async () => {
    const first = await connectHttp(broker.url, 'sse');
    const oldId = (first.transport as unknown as { _endpoint?: URL })._endpoint?.searchParams.get('sessionId');
    expect(oldId).toBeTruthy();
    await first.client.close();
    await waitFor(async () => (await http(`${broker.url}/messages?sessionId=${oldId}`, { body: { jsonrpc: '2.0', id: 1, method: 'ping' } })).status === 404, 'the old session to end');
    const second = await connectHttp(broker.url, 'sse');
    try {
      const result = await second.client.callTool({ name: 'echo__echo', arguments: { text: 'again' } });
      expect((result.content as { text: string }[])[0]!.text).toBe('again');
    } finally {
      await second.close();
    }
  });

  it('answers stray and malformed POSTs with a 4xx and keeps serving', async () => {
    const live = await connectHttp(broker.url, 'sse');
    try {
      const id = (live.transport as unknown as { _endpoint?: URL })._endpoint!.searchParams.get('sessionId')!;
      const noId = await http(`${broker.url}/messages`, { body: { jsonrpc: '2.0', id: 1, method: 'ping' } });
      expect(noId.status).toBe(400);
      const unknown = await http(`${broker.url}/messages?sessionId=not-a-session`, { body: { jsonrpc: '2.0', id: 1, method: 'ping' } });
      expect(unknown.status).toBe(404);
      const badJson = await http(`${broker.url}/messages?sessionId=${id}`, { headers: { 'content-type': 'application/json' }, rawBody: '{"jsonrpc":' });
      expect(badJson.status).toBe(400);
      expect(badJson.body.error.code).toBe(-32700);
      const notRpc = await http(`${broker.url}/messages?sessionId=${id}`, { body: { hello: 'world' } });
      expect(notRpc.status).toBe(400);
      expect(notRpc.body.error.code).toBe(-32600);
      const empty = await http(`${broker.url}/messages?sessionId=${id}`, { headers: { 'content-type': 'application/json' }, rawBody: '' });
      expect(empty.status).toBe(400);
      // Another content type: the SDK's transport answered it in plain text, not JSON.
      const plain = await http(`${broker.url}/messages?sessionId=${id}`, { headers: { 'content-type': 'text/plain' }, rawBody: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
      expect(plain.status).toBe(415);
      expect(plain.body.error.code).toBe(-32600);
      // The session and the process still serve.
      const result = await live.client.callTool({ name: 'echo__echo', arguments: { text: 'unharmed' } });
      expect((result.content as { text: string }[])[0]!.text).toBe('unharmed');
      expect((await http(`${broker.url}/healthz`)).status).toBe(200);
    } finally {
      await live.close();
    }
  });

  it('sends the endpoint event first', async () => {
    const stream = await readStream(`${broker.url}/sse`, { headers: { accept: 'text/event-stream' } }, (t) => t.includes('event: endpoint'), 5000);
    expect(stream.status).toBe(200);
    expect(stream.text).toMatch(/event: endpoint\ndata: \/messages\?sessionId=[0-9a-f-]+/);
  });
});
