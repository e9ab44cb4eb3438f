/**
 * Streamable HTTP sessions over the real CLI: status codes (case F11), DELETE, idle reaping,
 * a second GET stream, resumption with Last-Event-ID, keep-alive comments, the body limit, and
 * Host/Origin checks.
 */
import { request as httpRequest } from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, waitFor } from './helpers.js';
import {
  http,
  initializeBody,
  MCP_POST_HEADERS,
  nodeRequest,
  openRawSession,
  readStream,
  sseMessages,
  startHttpBroker,
  type HttpBroker,
} from '../transports/harness.js';

const SESSION_HEADERS = (id: string) => ({ ...MCP_POST_HEADERS, 'mcp-session-id': id, 'mcp-protocol-version': '2025-06-18' });
const toolsList = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/list' });

describe('Streamable HTTP sessions', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs')) },
      extra: {
        http: { keepAliveMs: 200, maxBodyBytes: 4096, allowedOrigins: ['https://app.example.com'] },
        broker: { budgetPerUnit: 1000 },
      },
    });
  });
  afterAll(async () => broker?.close());

  it('F11: a request without Mcp-Session-Id that is not initialize gets 400', async () => {
    const post = await http(`${broker.url}/mcp`, { headers: MCP_POST_HEADERS, body: toolsList(1) });
    expect(post.status).toBe(400);
    expect(post.body.error.message).toMatch(/Mcp-Session-Id/);
    expect((await http(`${broker.url}/mcp`, { headers: { accept: 'text/event-stream' } })).status).toBe(400);
    expect((await http(`${broker.url}/mcp`, { method: 'DELETE' })).status).toBe(400);
  });

  it('answers what /mcp cannot serve with a JSON-RPC error, and keeps serving', async () => {
    const badJson = await http(`${broker.url}/mcp`, { headers: MCP_POST_HEADERS, rawBody: '{"jsonrpc":' });
    expect(badJson.status).toBe(400);
    expect(badJson.body.error.code).toBe(-32700);
    const put = await http(`${broker.url}/mcp`, { method: 'PUT', headers: MCP_POST_HEADERS, body: toolsList(1) });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, POST, DELETE');
    expect(put.body.error.code).toBe(-32000);
    // HEAD is not GET here: 405 as well.
    expect((await nodeRequest(`${broker.url}/mcp`, { method: 'HEAD' })).status).toBe(405);
    // Bodies are decoded as express decoded them (gzip, deflate, br), else 415; one that does
    // not decode is 400. Every body counts against http.maxBodyBytes, whatever the method.
    const gzipped = gzipSync(JSON.stringify(initializeBody()));
    const gz = await fetch(`${broker.url}/mcp`, { method: 'POST', headers: { ...MCP_POST_HEADERS, 'content-encoding': 'gzip' }, body: gzipped });
    expect(gz.status).toBe(200);
    expect(gz.headers.get('mcp-session-id')).toBeTruthy();
    await gz.body?.cancel();
    const broken = await http(`${broker.url}/mcp`, { headers: { ...MCP_POST_HEADERS, 'content-encoding': 'gzip' }, rawBody: 'not really gzip' });
    expect(broken.status).toBe(400);
    expect(broken.body.error.message).toMatch(/gzip body does not decode/);
    // A refused body that was not read to the end closes its connection, so the next request
    // (here on a fresh connection) is answered at once.
    const corrupt = await http(`${broker.url}/mcp`, { headers: { ...MCP_POST_HEADERS, 'content-encoding': 'gzip' }, rawBody: 'z'.repeat(300_000) });
    expect(corrupt.status).toBe(400);
    expect(corrupt.headers.get('connection')).toBe('close');
    expect((await http(`${broker.url}/healthz`)).status).toBe(200);
    const zstd = await http(`${broker.url}/mcp`, { headers: { ...MCP_POST_HEADERS, 'content-encoding': 'zstd' }, rawBody: '{}' });
    expect(zstd.status).toBe(415);
    expect(zstd.body.error.message).toMatch(/Content-Encoding "zstd"/);
    const bomb = gzipSync('x'.repeat(64 * 1024));
    expect((await fetch(`${broker.url}/mcp`, { method: 'POST', headers: { ...MCP_POST_HEADERS, 'content-encoding': 'gzip' }, body: bomb })).status).toBe(413);
    expect((await nodeRequest(`${broker.url}/mcp`, { method: 'DELETE', headers: { 'content-length': '8192' }, body: 'y'.repeat(8192) })).status).toBe(413);
    // An absolute-form request target is /mcp too.
    const absolute = await new Promise<number>((resolve, reject) => {
      const u = new URL(broker.url);
      const req = httpRequest({ host: u.hostname, port: u.port, method: 'POST', path: `${broker.url}/mcp`, headers: MCP_POST_HEADERS }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end(JSON.stringify(initializeBody()));
    });
    expect(absolute).toBe(200);
    // Matched as express matched it: any case, one trailing slash; a longer path is not /mcp.
    const upper = await http(`${broker.url}/MCP/`, { headers: MCP_POST_HEADERS, body: initializeBody() });
    expect(upper.status).toBe(200);
    expect(upper.headers.get('mcp-session-id')).toBeTruthy();
    expect((await http(`${broker.url}/mcp/x`, { headers: MCP_POST_HEADERS, body: initializeBody() })).status).toBe(404);
    expect((await http(`${broker.url}/healthz`)).status).toBe(200);
  });

  it('F11: an unknown session id gets 404 on POST, GET and DELETE', async () => {
    const unknown = SESSION_HEADERS('00000000-0000-0000-0000-000000000000');
    const post = await http(`${broker.url}/mcp`, { headers: unknown, body: toolsList(1) });
    expect(post.status).toBe(404);
    expect(post.body.error.code).toBe(-32001);
    expect((await http(`${broker.url}/mcp`, { headers: { ...unknown, accept: 'text/event-stream' } })).status).toBe(404);
    expect((await http(`${broker.url}/mcp`, { method: 'DELETE', headers: unknown })).status).toBe(404);
  });

  it('serves a session, and DELETE ends it: the id then gets 404', async () => {
    const id = await openRawSession(broker.url);
    const list = await readStream(`${broker.url}/mcp`, { method: 'POST', headers: SESSION_HEADERS(id), body: JSON.stringify(toolsList(2)) }, (t) => t.includes('"result"'));
    expect(list.status).toBe(200);
    expect(sseMessages(list.text)[0].result.tools.map((t: { name: string }) => t.name)).toContain('echo__echo');
    const del = await http(`${broker.url}/mcp`, { method: 'DELETE', headers: SESSION_HEADERS(id) });
    expect(del.status).toBe(200);
    await waitFor(() => new RegExp(`"session":"${id.slice(0, 8)}"[^\\n]*"reason":"deleted"`).test(broker.stderr()), 'the session-ended log line');
    const after = await http(`${broker.url}/mcp`, { headers: SESSION_HEADERS(id), body: toolsList(3) });
    expect(after.status).toBe(404);
  });

  it('F11: a second GET stream on one session gets 409 and kills nothing', async () => {
    const id = await openRawSession(broker.url);
    const headers = { ...SESSION_HEADERS(id), accept: 'text/event-stream' };
    const first = fetch(`${broker.url}/mcp`, { headers });
    const firstRes = await first;
    expect(firstRes.status).toBe(200);
    const second = await http(`${broker.url}/mcp`, { headers });
    expect(second.status).toBe(409);
    // The session and its upstream still serve.
    const call = await readStream(
      `${broker.url}/mcp`,
      { method: 'POST', headers: SESSION_HEADERS(id), body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'echo__echo', arguments: { text: 'still here' } } }) },
      (t) => t.includes('"result"'),
    );
    expect(sseMessages(call.text).find((m) => m.id === 9).result.content[0].text).toBe('still here');
    await firstRes.body?.cancel();
    expect(broker.stderr()).not.toMatch(/connection lost|upstream restart scheduled/);
  });

  it('sends keep-alive comments on an open stream every http.keepAliveMs', async () => {
    const id = await openRawSession(broker.url);
    const stream = await readStream(`${broker.url}/mcp`, { headers: { ...SESSION_HEADERS(id), accept: 'text/event-stream' } }, (t) => t.includes(': keepalive'), 5000);
    expect(stream.status).toBe(200);
    expect(stream.text).toContain(': keepalive');
  });

  it('resumes a stream with Last-Event-ID: the events after it are replayed', async () => {
    const id = await openRawSession(broker.url);
    const body = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo__echo', arguments: { text: 'resume me' }, _meta: { progressToken: 'tok' } } };
    const first = await readStream(`${broker.url}/mcp`, { method: 'POST', headers: SESSION_HEADERS(id), body: JSON.stringify(body) }, (t) => t.includes('"result"'));
    const ids = [...first.text.matchAll(/^id: (.+)$/gm)].map((m) => m[1]!);
    expect(ids.length).toBeGreaterThanOrEqual(2);
    const replay = await readStream(
      `${broker.url}/mcp`,
      { headers: { ...SESSION_HEADERS(id), accept: 'text/event-stream', 'last-event-id': ids[0]! } },
      (t) => t.includes('"result"'),
    );
    expect(replay.status).toBe(200);
    const replayed = sseMessages(replay.text);
    expect(replayed.find((m) => m.id === 7)?.result.content[0].text).toBe('resume me');
    // The first event itself is not replayed.
    expect([...replay.text.matchAll(/^id: (.+)$/gm)].map((m) => m[1])).not.toContain(ids[0]);
  });

  it('streams a call answer as SSE: chunked, the priming event first, no Content-Length', async () => {
    const id = await openRawSession(broker.url);
    const headers = { ...SESSION_HEADERS(id), 'mcp-protocol-version': '2025-11-25' };
    const body = { jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'echo__echo', arguments: { text: 'streamed' } } };
    const res = await readStream(`${broker.url}/mcp`, { method: 'POST', headers, body: JSON.stringify(body) }, (t) => t.includes('"result"'));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('transfer-encoding')).toBe('chunked');
    expect(res.headers.get('content-length')).toBeNull();
    expect(res.text).toMatch(/^id: \S+\ndata: \n\n/);
    expect(sseMessages(res.text).find((m) => m.id === 8)?.result.content[0].text).toBe('streamed');
  });

  it('refuses a body over http.maxBodyBytes with 413 and keeps serving', async () => {
    const big = { ...initializeBody(), padding: 'x'.repeat(8192) };
    const res = await http(`${broker.url}/mcp`, { headers: MCP_POST_HEADERS, body: big });
    expect(res.status).toBe(413);
    expect((await http(`${broker.url}/messages?sessionId=x`, { body: { padding: 'y'.repeat(8192) } })).status).toBe(413);
    expect((await http(`${broker.url}/api/v1/mcp/call`, { body: { subject: 'echo__echo', args: { text: 'z'.repeat(8192) } } })).status).toBe(413);
    const id = await openRawSession(broker.url);
    expect(id).toBeTruthy();
  });

  it('a body under the limit passes', async () => {
    const res = await http(`${broker.url}/api/v1/mcp/call`, { body: { subject: 'echo__echo', args: { text: 'k'.repeat(3000) } } });
    expect(res.status).toBe(200);
    expect(res.body.result.content[0].text).toHaveLength(3000);
  });

  it('answers 403 to a Host or Origin that is not allowed, and accepts loopback and listed origins', async () => {
    const evilHost = await nodeRequest(`${broker.url}/mcp`, { method: 'POST', headers: { ...MCP_POST_HEADERS, host: 'evil.example.com' }, body: JSON.stringify(initializeBody()) });
    expect(evilHost.status).toBe(403);
    const goodHost = await nodeRequest(`${broker.url}/healthz`, { headers: { host: `localhost:${new URL(broker.url).port}` } });
    expect(goodHost.status).toBe(200);
    const evilOrigin = await http(`${broker.url}/mcp`, { headers: { ...MCP_POST_HEADERS, origin: 'http://evil.example.com' }, body: initializeBody() });
    expect(evilOrigin.status).toBe(403);
    expect((await nodeRequest(`${broker.url}/healthz`, { headers: { host: 'evil.example.com' } })).status).toBe(403);
    expect((await http(`${broker.url}/healthz`, { headers: { origin: 'http://localhost:5173' } })).status).toBe(200);
    expect((await http(`${broker.url}/healthz`, { headers: { origin: 'https://app.example.com' } })).status).toBe(200);
    expect((await http(`${broker.url}/healthz`, { headers: { origin: 'https://other.example.com' } })).status).toBe(403);
  });
});

describe('Streamable HTTP idle sessions', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) }, extra: { http: { sessionIdleMs: 1500 } } });
  });
  afterAll(async () => broker?.close());

  it('F11: an idle session is reaped after http.sessionIdleMs and its id then gets 404', async () => {
    const id = await openRawSession(broker.url);
    await waitFor(() => new RegExp(`"session":"${id.slice(0, 8)}"[^\\n]*"reason":"idle"`).test(broker.stderr()), 'the idle reaper', 15_000);
    const after = await http(`${broker.url}/mcp`, { headers: SESSION_HEADERS(id), body: toolsList(4) });
    expect(after.status).toBe(404);
  });
});
