/**
 * Protocol era as served today: the broker speaks the 2025-11-25 (legacy) era only, so an SDK v2
 * client that negotiates (`versionNegotiation: {mode: 'auto'}`, probing `server/discover`) falls
 * back to `initialize` and works as a legacy client, over stdio and over Streamable HTTP. Over
 * HTTP the probe, sent without a session, is refused with 400 like any request but `initialize`.
 */
import { rmSync } from 'node:fs';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, writeConfig } from './helpers.js';
import { MCP_POST_HEADERS, http, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const servers = { echo: nodeServer(fixture('echo.mjs')) };

function negotiatingClient(): Client {
  return new Client({ name: 'era-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
}

async function listAndCall(client: Client): Promise<void> {
  expect(client.getProtocolEra()).toBe('legacy');
  const tools = await client.listTools();
  expect(tools.tools.map((t) => t.name)).toContain('echo__echo');
  const result = await client.callTool({ name: 'echo__echo', arguments: { text: 'hi' } });
  expect(JSON.stringify(result.content)).toContain('hi');
}

describe('protocol era', () => {
  it('stdio: a negotiating v2 client falls back to the legacy era and lists and calls', async () => {
    const { dir, configPath } = writeConfig(servers);
    const client = negotiatingClient();
    try {
      await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), {
        timeout: 20_000,
      });
      await listAndCall(client);
    } finally {
      await client.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('streamable http', () => {
    let broker: HttpBroker;
    beforeAll(async () => {
      broker = await startHttpBroker({ servers });
    });
    afterAll(async () => broker?.close());

    it('a server/discover probe without a session is refused with 400, as any non-initialize request', async () => {
      const res = await http(`${broker.url}/mcp`, { headers: MCP_POST_HEADERS, body: { jsonrpc: '2.0', id: 1, method: 'server/discover', params: {} } });
      expect(res.status).toBe(400);
    });

    it('a negotiating v2 client falls back to the legacy era and lists and calls', async () => {
      const client = negotiatingClient();
      const transport = new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`));
      try {
        await client.connect(transport, { timeout: 20_000 });
        await listAndCall(client);
      } finally {
        await transport.terminateSession().catch(() => undefined);
        await client.close().catch(() => undefined);
      }
    });
  });
});
