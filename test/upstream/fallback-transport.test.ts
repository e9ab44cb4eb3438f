/**
 * URL-only upstreams (`{"url": …}`, as Cursor and Claude Code write them): Streamable HTTP first,
 * legacy SSE when the server answers the initialize POST with a 4xx, against real servers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import type { HttpServerConfig, SseServerConfig } from '../../src/config/schema.js';
import { silentLogger } from '../../src/shared/logger.js';
import { FallbackTransport } from '../../src/upstream/fallback-transport.js';
import { SseSessionGuard } from '../../src/upstream/sse-session-guard.js';
import { createUpstreamTransport } from '../../src/upstream/upstream-transport.js';
import { fixture } from '../e2e/helpers.js';

/** Starts `http-echo.mjs <mode> <name>`; resolves with its base URL. */
async function startFixture(mode: 'sse' | 'streamable', name: string, children: ChildProcess[]): Promise<string> {
  const child = spawn(process.execPath, [fixture('http-echo.mjs'), mode, name], { stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) => resolve((JSON.parse(line) as { port: number }).port));
    child.once('exit', (code) => reject(new Error(`fixture exited ${code}`)));
  });
  return `http://127.0.0.1:${port}`;
}

function serverConfig(entry: Record<string, unknown>): HttpServerConfig | SseServerConfig {
  return parseConfig({ mcpServers: { u: entry } }, { baseDir: '/tmp', env: {} }).mcpServers.u as HttpServerConfig | SseServerConfig;
}

/** Connects a client (`negotiate`: probing the era first with `server/discover`, as the broker's do) and calls `echo`. */
async function dial(entry: Record<string, unknown>, negotiate = false) {
  const transport = await createUpstreamTransport({ config: serverConfig(entry), inheritEnv: [], logger: silentLogger(), maxMessageBytes: 1 << 20 });
  const client = new Client({ name: 'test', version: '1.0.0' }, negotiate ? { versionNegotiation: { mode: 'auto' } } : {});
  await client.connect(transport, { timeout: 10_000 });
  const result = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
  return { transport, client, text: (result.content as Array<{ text: string }>)[0]!.text };
}

describe('a URL-only upstream', () => {
  const children: ChildProcess[] = [];
  let sseOnly: string;
  let streamable: string;
  beforeAll(async () => {
    [sseOnly, streamable] = await Promise.all([startFixture('sse', 'legacy', children), startFixture('streamable', 'modern', children)]);
  });
  afterAll(() => {
    for (const child of children) child.stdin?.end();
  });

  it('issue 18 §2: a URL-only entry of an SSE-only server falls back to legacy SSE after the 4xx to initialize', async () => {
    const { transport, client, text } = await dial({ url: `${sseOnly}/sse` });
    try {
      expect(text).toBe('legacy: hi');
      expect(transport).toBeInstanceOf(FallbackTransport);
      expect((transport as FallbackTransport).active).toBeInstanceOf(SseSessionGuard);
    } finally {
      await client.close();
    }
  });

  it('issue 18 §2: a URL-only entry of a Streamable HTTP server stays on Streamable HTTP', async () => {
    const { transport, client, text } = await dial({ url: `${streamable}/mcp` });
    try {
      expect(text).toBe('modern: hi');
      expect((transport as FallbackTransport).active).toBeInstanceOf(StreamableHTTPClientTransport);
    } finally {
      await client.close();
    }
  });

  it('issue 14: the era probe before initialize decides nothing: a 2025 Streamable HTTP server refusing it with a 4xx stays on Streamable HTTP', async () => {
    const { transport, client, text } = await dial({ url: `${streamable}/mcp` }, true);
    try {
      expect(text).toBe('modern: hi');
      expect(client.getProtocolEra()).toBe('legacy');
      expect((transport as FallbackTransport).active).toBeInstanceOf(StreamableHTTPClientTransport);
    } finally {
      await client.close();
    }
  });

  it('issue 14: with the era probe first, an SSE-only server still falls back to legacy SSE on the 4xx to initialize', async () => {
    const { transport, client, text } = await dial({ url: `${sseOnly}/sse` }, true);
    try {
      expect(text).toBe('legacy: hi');
      expect((transport as FallbackTransport).active).toBeInstanceOf(SseSessionGuard);
    } finally {
      await client.close();
    }
  });

  it('a message sent while the first one decides the transport goes where that one went (the first listing sends lists together)', async () => {
    const transport = await createUpstreamTransport({ config: serverConfig({ url: `${sseOnly}/sse` }), inheritEnv: [], logger: silentLogger(), maxMessageBytes: 1 << 20 });
    const answered = new Map<unknown, unknown>();
    let bothAnswered!: () => void;
    const both = new Promise<void>((resolve) => (bothAnswered = resolve));
    transport.onmessage = (message) => {
      const m = message as { id?: unknown; result?: unknown; error?: unknown };
      answered.set(m.id, m.result ?? m.error);
      if (answered.has(1) && answered.has(2)) bothAnswered();
    };
    await transport.start();
    try {
      const initialize = { jsonrpc: '2.0' as const, id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'test', version: '1' } } };
      // `ping` may precede initialization; sent before the 4xx to `initialize` has switched to SSE.
      await Promise.all([transport.send(initialize), transport.send({ jsonrpc: '2.0', id: 2, method: 'ping' })]);
      await both;
      expect((answered.get(1) as { serverInfo?: unknown }).serverInfo).toBeDefined();
      expect(answered.get(2)).toEqual({});
      expect((transport as FallbackTransport).active).toBeInstanceOf(SseSessionGuard);
    } finally {
      await transport.close();
    }
  });

  it('an entry typed "http" never falls back: the SSE-only server refuses it', async () => {
    // SDK v2's Streamable HTTP transport reports the refusal as an SdkHttpError carrying the status.
    await expect(dial({ type: 'http', url: `${sseOnly}/sse` })).rejects.toMatchObject({ name: 'SdkHttpError', status: 405 });
  });
});
