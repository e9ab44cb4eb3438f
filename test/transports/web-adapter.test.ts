/**
 * serveWebTransport (src/transports/http/web-adapter.ts) with the SDK's real web-standard
 * transport, an event store and an `McpServer` whose tool waits until the test lets it answer.
 *
 * Regression (issue 6): `@hono/node-server` held back an SSE response whose first chunk (the
 * priming event) was ready, waiting a `setTimeout` turn for a second chunk to compute a
 * Content-Length: about 1 ms on every call. Here `setTimeout` is faked and never advanced, so a
 * response that waits for a timer never starts; the priming event must arrive while the tool is
 * still working.
 */
import { once } from 'node:events';
import { connect } from 'node:net';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as realDelay } from 'node:timers/promises';
import { McpServer, WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { BoundedEventStore } from '../../src/transports/http/event-store.js';
import { serveWebTransport } from '../../src/transports/http/web-adapter.js';

const PROTOCOL = '2025-11-25';

describe('serveWebTransport', () => {
  let http: Server;
  let port: number;
  let release: () => void = () => undefined;
  let sessionId = '';
  let closeTransport: () => Promise<void> = async () => undefined;
  // Bounds on waits that must not hang a failing test; cleared after each run.
  const bounds = new AbortController();
  const bounded = (ms: number) => realDelay(ms, undefined, { signal: bounds.signal }).catch(() => undefined);

  beforeAll(async () => {
    const mcp = new McpServer({ name: 'hold', version: '1.0.0' });
    mcp.registerTool('hold', { description: 'answers once released' }, async () => {
      await new Promise<void>((resolve) => (release = resolve));
      return { content: [{ type: 'text', text: 'released' }] };
    });
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => 'session-1',
      eventStore: new BoundedEventStore(100),
    });
    await mcp.connect(transport);
    closeTransport = () => mcp.close();
    http = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        void serveWebTransport(transport, req, res, text ? JSON.parse(text) : undefined);
      });
    });
    http.listen(0, '127.0.0.1');
    await once(http, 'listening');
    port = (http.address() as AddressInfo).port;
    const init = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 't', version: '1' } } });
    sessionId = String(init.headers['mcp-session-id']);
    await readAll(init);
    await readAll(await post({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  });

  afterAll(async () => {
    release();
    bounds.abort();
    await closeTransport();
    http?.closeAllConnections();
    await new Promise((resolve) => http?.close(resolve));
  });

  function post(body: unknown): Promise<IncomingMessage> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL,
    };
    if (sessionId) headers['mcp-session-id'] = sessionId;
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/mcp', headers });
    req.end(JSON.stringify(body));
    return once(req, 'response').then(([res]) => res as IncomingMessage);
  }

  it('sends the headers and the priming event at once, while the tool is still working', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    try {
      const pending = post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'hold', arguments: {} } });
      // Real time bounds the wait only; the faked setTimeout never fires.
      const res = await Promise.race([pending, bounded(5000).then(() => undefined)]);
      expect(res, 'no response while the tool works: held back for a timer').toBeDefined();
      expect(res!.headers['content-type']).toMatch(/^text\/event-stream/);
      expect(res!.headers['content-length']).toBeUndefined();
      res!.setEncoding('utf8');
      const [first] = (await Promise.race([once(res!, 'data'), bounded(5000).then(() => [''])])) as [string];
      expect(first).toMatch(/^id: \S+\ndata: \n\n$/);
      release();
      const rest = await readAll(res!);
      expect(rest).toContain('"text":"released"');
    } finally {
      vi.useRealTimers();
    }
  });

  it('leaves an HTTP/1.0 answer unchunked: the stream ends with the connection', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' });
    const socket = connect(port, '127.0.0.1');
    socket.write(
      [
        'POST /mcp HTTP/1.0',
        `host: 127.0.0.1:${port}`,
        'content-type: application/json',
        'accept: application/json, text/event-stream',
        `mcp-protocol-version: ${PROTOCOL}`,
        `mcp-session-id: ${sessionId}`,
        `content-length: ${Buffer.byteLength(body)}`,
        '',
        body,
      ].join('\r\n'),
    );
    socket.setEncoding('utf8');
    let raw = '';
    for await (const chunk of socket) raw += chunk as string;
    const [head, payload] = raw.split('\r\n\r\n', 2) as [string, string];
    expect(raw).toMatch(/^HTTP\/1\.[01] 200/);
    expect(head.toLowerCase()).not.toContain('transfer-encoding');
    expect(payload).toMatch(/^id: \S+\ndata: \n\n/);
    expect(payload).toContain('"name":"hold"');
  });
});

async function readAll(res: IncomingMessage): Promise<string> {
  res.setEncoding('utf8');
  let text = '';
  for await (const chunk of res) text += chunk as string;
  return text;
}
