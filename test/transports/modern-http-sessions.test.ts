/**
 * Over modern Streamable HTTP the SDK's handler builds a `DownstreamSession` for each request;
 * every one of them must let go of the gateway when the request is done. A real gateway serving
 * HTTP in this process, with the echo fixture upstream, and a 2026-07-28 SDK client.
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { fixture, nodeServer } from '../e2e/helpers.js';
import { serveInProcess, type InProcessHttp } from './in-process.js';

describe('modern HTTP: per-request sessions', () => {
  let served: InProcessHttp | undefined;
  afterEach(async () => served?.close());

  it('a subscriptions/listen leaves no session listening on the gateway once it closes (regression: the instance the SDK closed unconnected kept its log and task-status listeners)', async () => {
    served = await serveInProcess({ mcpServers: { echo: nodeServer(fixture('echo.mjs'), { required: true }) }, estate: { enabled: false } });
    const { gateway, serving } = served;
    const listening = () => ({ log: gateway.listenerCount('log'), status: gateway.tasks.listenerCount('status') });
    const before = listening();

    const client = new Client({ name: 'listen-sessions', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(`${serving.url}/mcp`)), { timeout: 30_000 });
      expect(client.getProtocolEra()).toBe('modern');
      for (let i = 0; i < 5; i++) {
        const subscription = await client.listen({ toolsListChanged: true });
        await subscription.close();
        expect(await subscription.closed).toBe('local');
      }
      expect((await client.callTool({ name: 'echo__echo', arguments: { text: 'hi' } })).isError).toBeFalsy();
    } finally {
      await client.close().catch(() => undefined);
    }
    await vi.waitFor(() => expect(listening()).toEqual(before));
  });
});
