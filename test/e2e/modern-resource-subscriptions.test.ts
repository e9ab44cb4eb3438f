/**
 * Resource subscriptions on a modern (2026-07-28) upstream, which has no `resources/subscribe`:
 * the broker names the subscribed URIs in a `subscriptions/listen` (`resourceSubscriptions`), so
 * a legacy client's `resources/subscribe` and a modern client's listen with
 * `resourceSubscriptions` both get the upstream's `notifications/resources/updated`.
 * Upstream: test/fixtures/modern-resources.mjs over stdio.
 */
import { readFileSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, startBroker, waitFor, writeConfig, type StartedBroker } from './helpers.js';

interface FixtureEvent {
  event: string;
  method?: string;
  filter?: { resourceSubscriptions?: string[] };
}

const upstreamLog = (dir: string): FixtureEvent[] => {
  const file = join(dir, 'upstream.log');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as FixtureEvent);
};
const servers = { m: nodeServer(fixture('modern-resources.mjs'), { env: { FIXTURE_LOG: '${configDir}/upstream.log' } }) };
const resourceListens = (dir: string) =>
  upstreamLog(dir).filter((e) => e.method === 'subscriptions/listen' && e.filter?.resourceSubscriptions).map((e) => e.filter!.resourceSubscriptions);

describe('a legacy client subscribed to a modern upstream resource', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({ servers });
  }, 60_000);
  afterAll(async () => broker?.close());

  const updates = () => broker.notifications.filter((n) => n.method === 'notifications/resources/updated').map((n) => n.params?.uri);

  it('gets notifications/resources/updated through a listen, never a resources/subscribe upstream', async () => {
    await broker.client.subscribeResource({ uri: 'note://a' });
    await waitFor(() => resourceListens(broker.dir).some((uris) => uris?.includes('note://a')), 'a listen naming note://a');
    await broker.client.callTool({ name: 'm__touch', arguments: { uri: 'note://a' } });
    await waitFor(() => updates().includes('note://a'), 'the update of note://a');
    expect(upstreamLog(broker.dir).filter((e) => e.method === 'resources/subscribe')).toEqual([]);
    expect(broker.stderr()).not.toContain('resources/subscribe failed');
  });

  it('a second URI reopens the listen with both; unsubscribing one leaves the other', async () => {
    await broker.client.subscribeResource({ uri: 'note://b' });
    await waitFor(() => resourceListens(broker.dir).some((uris) => uris?.length === 2), 'a listen naming both notes');
    await broker.client.unsubscribeResource({ uri: 'note://a' });
    await waitFor(() => JSON.stringify(resourceListens(broker.dir).at(-1)) === JSON.stringify(['note://b']), 'a listen naming note://b only');
    const before = updates().length;
    await broker.client.callTool({ name: 'm__touch', arguments: { uri: 'note://a' } });
    await broker.client.callTool({ name: 'm__touch', arguments: { uri: 'note://b' } });
    await waitFor(() => updates().slice(before).includes('note://b'), 'the update of note://b');
    // In order on the one stream: a's update would have come first.
    expect(updates().slice(before)).toEqual(['note://b']);
  });
});

describe('a modern client listening on a modern upstream resource', () => {
  it('gets notifications/resources/updated on its listen with resourceSubscriptions', async () => {
    const { dir, configPath } = writeConfig(servers);
    const client = new Client({ name: 'listen-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    try {
      await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), { timeout: 30_000 });
      expect(client.getProtocolEra()).toBe('modern');
      const seen: string[] = [];
      let got!: () => void;
      const updated = new Promise<void>((resolve) => (got = resolve));
      client.setNotificationHandler('notifications/resources/updated', async (n) => {
        seen.push(n.params.uri);
        got();
      });
      const subscription = await client.listen({ resourceSubscriptions: ['note://a'] });
      expect(subscription.honoredFilter).toEqual({ resourceSubscriptions: ['note://a'] });
      await waitFor(() => resourceListens(dir).some((uris) => uris?.includes('note://a')), 'the upstream listen naming note://a');
      await client.callTool({ name: 'm__touch', arguments: { uri: 'note://a' } });
      await updated;
      expect(seen).toEqual(['note://a']);
      await subscription.close();
      expect(upstreamLog(dir).filter((e) => e.method === 'resources/subscribe')).toEqual([]);
    } finally {
      await client.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('a modern listen naming resources the policy denies or would ask about', () => {
  it('leaves out both (a listen cannot ask): the acknowledgement and the upstream listen name only the allowed one', async () => {
    const { dir, configPath } = writeConfig(servers, { policy: { rules: [{ resources: ['note://asked'], action: 'ask' }, { resources: ['note://denied'], action: 'deny' }] } });
    const client = new Client({ name: 'listen-policy', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    try {
      await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), { timeout: 30_000 });
      const subscription = await client.listen({ resourceSubscriptions: ['note://a', 'note://asked', 'note://denied'] });
      expect(subscription.honoredFilter).toEqual({ resourceSubscriptions: ['note://a'] });
      await waitFor(() => resourceListens(dir).some((uris) => uris?.includes('note://a')), 'the upstream listen naming note://a');
      for (const uris of resourceListens(dir)) expect(uris).toEqual(['note://a']);
      await subscription.close();
    } finally {
      await client.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
