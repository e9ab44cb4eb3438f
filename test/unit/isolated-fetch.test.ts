/**
 * The SDK's HTTP client transports share one abort signal across every request; the wrapper
 * must keep undici's per-request listeners off it, and still abort what is in flight when it
 * fires. Against a real local HTTP server.
 */
import { getEventListeners } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isolatedAbortFetch } from '../../src/upstream/isolated-fetch.js';

let server: Server;
let base: string;
/** Responses of `/slow` still open, so a test can finish them. */
const slow: ServerResponse[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/empty') return void res.writeHead(204).end();
    if (req.url === '/slow') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: first\n\n');
      slow.push(res);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'x-probe': 'yes' }).end('{"ok":true}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const res of slow) res.end();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const listeners = (signal: AbortSignal) => getEventListeners(signal, 'abort').length;

describe('isolatedAbortFetch', () => {
  it('leaves no listener on the shared signal once each response is over', async () => {
    const shared = new AbortController();
    const fetchImpl = isolatedAbortFetch(fetch);
    for (let i = 0; i < 300; i++) {
      const res = await fetchImpl(`${base}/json`, { method: 'POST', body: '{}', signal: shared.signal });
      expect(await res.json()).toEqual({ ok: true });
      expect(listeners(shared.signal)).toBe(0);
    }
    const empty = await fetchImpl(`${base}/empty`, { signal: shared.signal });
    expect(empty.status).toBe(204);
    expect(listeners(shared.signal)).toBe(0);
    // Plain fetch with the same shared signal keeps them (what the wrapper is for).
    for (let i = 0; i < 20; i++) await (await fetch(`${base}/json`, { signal: shared.signal })).text();
    expect(listeners(shared.signal)).toBeGreaterThan(0);
  });

  it('keeps status, headers and URL, and a cancelled body lets go of the shared signal', async () => {
    const shared = new AbortController();
    const res = await isolatedAbortFetch(fetch)(`${base}/json`, { signal: shared.signal });
    expect(res.status).toBe(200);
    expect(res.ok).toBe(true);
    expect(res.headers.get('x-probe')).toBe('yes');
    expect(res.url).toBe(`${base}/json`);
    expect(res.redirected).toBe(false);
    expect(listeners(shared.signal)).toBe(1);
    await res.body!.cancel();
    expect(listeners(shared.signal)).toBe(0);
  });

  it('aborting the shared signal still aborts a body being read', async () => {
    const shared = new AbortController();
    const res = await isolatedAbortFetch(fetch)(`${base}/slow`, { signal: shared.signal });
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('first');
    const next = reader.read();
    shared.abort(new Error('connection closed'));
    await expect(next).rejects.toThrow();
    expect(listeners(shared.signal)).toBe(0);
  });
});

describe('an HTTP upstream connection', () => {
  it('hands every request its own signal, so the SDK transport\'s shared one collects nothing', async () => {
    const { McpServer } = await import('@modelcontextprotocol/server');
    const { NodeStreamableHTTPServerTransport: StreamableHTTPServerTransport } = await import('@modelcontextprotocol/node');
    const { parseConfig } = await import('../../src/config/load.js');
    const { systemClock } = await import('../../src/shared/clock.js');
    const { silentLogger } = await import('../../src/shared/logger.js');
    const { McpUpstream } = await import('../../src/upstream/connection.js');
    const transports = new Map<string, InstanceType<typeof StreamableHTTPServerTransport>>();
    const mcp = createServer(async (req, res) => {
      const id = req.headers['mcp-session-id'] as string | undefined;
      let transport = id ? transports.get(id) : undefined;
      if (!transport) {
        transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => `s${transports.size + 1}`, onsessioninitialized: (sid) => void transports.set(sid, transport!) });
        const server = new McpServer({ name: 'probe', version: '1' });
        server.registerTool('ping', { description: 'ping' }, async () => ({ content: [{ type: 'text', text: 'pong' }] }));
        await server.connect(transport);
      }
      await transport.handleRequest(req, res);
    });
    await new Promise<void>((resolve) => mcp.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(mcp.address() as AddressInfo).port}/mcp`;
    const seen: AbortSignal[] = [];
    const spy: typeof fetch = (input, init) => {
      if (init?.signal) seen.push(init.signal);
      return fetch(input, init);
    };
    const config = parseConfig({ mcpServers: { probe: { type: 'http', url } } }, { env: {} }).mcpServers.probe!;
    if (config.type !== 'http') throw new Error(`parsed as ${config.type}`);
    const upstream = new McpUpstream({
      name: 'probe',
      config,
      logger: silentLogger(),
      clock: systemClock,
      inheritEnv: [],
      maxMessageBytes: 1024 * 1024,
      restart: { initialDelayMs: 100, maxDelayMs: 1000 },
      fetch: spy,
    });
    try {
      await upstream.start();
      expect(upstream.status.state).toBe('ready');
      for (let i = 0; i < 20; i++) {
        const result = await upstream.callTool('ping', {}, { signal: new AbortController().signal, timeoutMs: 10_000 });
        expect(result.content).toEqual([{ type: 'text', text: 'pong' }]);
      }
      // Without the wrapper every request would carry the transport's one shared signal.
      expect(seen.length).toBeGreaterThanOrEqual(20);
      expect(new Set(seen).size).toBe(seen.length);
    } finally {
      await upstream.close();
      mcp.closeAllConnections();
      await new Promise((r) => mcp.close(r));
    }
  });
});
