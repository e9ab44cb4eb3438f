/**
 * `subscriptions/listen` for modern (2026-07-28) clients (issue 13 §2), over stdio and over
 * Streamable HTTP, in front of the conformance fixture (a legacy-talked upstream): the
 * acknowledgement names the honoured subset, and an upstream's `tools/list_changed` reaches the
 * open stream.
 */
import { rmSync } from 'node:fs';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, spawnRawBroker, writeConfig } from './helpers.js';
import { startHttpBroker, type HttpBroker } from '../transports/harness.js';

const servers = { conformance: nodeServer(fixture('conformance-server.mjs'), { prefix: false }) };

/** Opens a listen, triggers a tool change upstream, and resolves once the stream carried it. */
async function listenAndChange(client: Client): Promise<void> {
  expect(client.getProtocolEra()).toBe('modern');
  let changed!: () => void;
  const seen = new Promise<void>((resolve) => (changed = resolve));
  client.setNotificationHandler('notifications/tools/list_changed', async () => changed());
  const subscription = await client.listen({ toolsListChanged: true });
  expect(subscription.honoredFilter).toEqual({ toolsListChanged: true });
  await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
  await seen;
  await subscription.close();
  expect(await subscription.closed).toBe('local');
}

describe('modern subscriptions', () => {
  it('stdio: a listen is acknowledged with the honoured subset and carries an upstream tools/list_changed', async () => {
    const { dir, configPath } = writeConfig(servers);
    const client = new Client({ name: 'listen-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    try {
      await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), { timeout: 30_000 });
      await listenAndChange(client);
    } finally {
      await client.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('stdio: an open listen does not hold the broker at stdin EOF for broker.drainTimeoutMs, nor get a -32603', async () => {
    const broker = spawnRawBroker({ servers, extra: { broker: { drainTimeoutMs: 30_000 } } });
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    try {
      await broker.request(1, 'server/discover', { _meta: meta }, 20_000);
      broker.send({ jsonrpc: '2.0', id: 2, method: 'subscriptions/listen', params: { _meta: meta, notifications: { toolsListChanged: true } } });
      await broker.waitForMessage((m) => m.method === 'notifications/subscriptions/acknowledged', 'the acknowledgement');
      const ended = Date.now();
      broker.child.stdin!.end();
      expect(await broker.exited).toBe(0);
      expect(Date.now() - ended).toBeLessThan(15_000);
      expect(broker.messages.filter((m) => m.id === 2 && m.error !== undefined)).toEqual([]);
    } finally {
      await broker.close();
    }
  });

  describe('streamable http', () => {
    let broker: HttpBroker;
    beforeAll(async () => {
      broker = await startHttpBroker({ servers });
    });
    afterAll(async () => broker?.close());

    it('a listen is acknowledged with the honoured subset and carries an upstream tools/list_changed', async () => {
      const client = new Client({ name: 'listen-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
      try {
        await client.connect(new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`)), { timeout: 30_000 });
        await listenAndChange(client);
      } finally {
        await client.close().catch(() => undefined);
      }
    });
  });
});
