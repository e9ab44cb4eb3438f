/**
 * A `subscriptions/listen` the entry answers at once, refused (-32602) or ended, leaves no upstream
 * subscription behind: the broker subscribes upstream for a listen's resources before the SDK's
 * entry checks it (`ListenSubscriptions.observe`, transports/subscriptions.ts), so the answer
 * that ends the listen must end the broker's side too. Upstream: test/fixtures/modern-resources.mjs.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { fixture, nodeServer, spawnRawBroker, waitFor, type RawBroker } from './helpers.js';

const envelope = {
  _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} },
};
const servers = (dir = '${configDir}') => ({ m: nodeServer(fixture('modern-resources.mjs'), { env: { FIXTURE_LOG: `${dir}/upstream.log` } }) });

/** The `resourceSubscriptions` of every listen the upstream was sent, in order. */
const upstreamListens = (dir: string): string[][] => {
  const file = join(dir, 'upstream.log');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { method?: string; filter?: { resourceSubscriptions?: string[] } })
    .filter((e) => e.method === 'subscriptions/listen' && e.filter?.resourceSubscriptions)
    .map((e) => e.filter!.resourceSubscriptions!);
};

let raw: RawBroker | undefined;
afterEach(async () => {
  await raw?.close();
  raw = undefined;
});

describe('a modern listen the entry answers at once', () => {
  it('refused -32602: the upstream subscription it opened is dropped', async () => {
    raw = spawnRawBroker({ servers: servers() });
    expect((await raw.request(1, 'tools/list', envelope)).result).toBeDefined();
    // A well-formed resource filter beside a malformed member: the broker's side sees the
    // resources, the SDK refuses the whole request.
    const refused = await raw.request(2, 'subscriptions/listen', { notifications: { resourceSubscriptions: ['note://a'], toolsListChanged: 'yes' }, ...envelope });
    expect(refused.error).toMatchObject({ code: -32602 });
    // Whatever the broker opened upstream for it is closed again: the last upstream listen names nothing.
    await waitFor(() => {
      const listens = upstreamListens(raw!.dir);
      return listens.length === 0 || listens.at(-1)!.length === 0 ? true : undefined;
    }, 'no upstream listen naming note://a');
    // And a real listen still subscribes.
    raw.send({ jsonrpc: '2.0', id: 3, method: 'subscriptions/listen', params: { notifications: { resourceSubscriptions: ['note://b'] }, ...envelope } });
    await waitFor(() => (upstreamListens(raw!.dir).at(-1)?.includes('note://b') ? true : undefined), 'an upstream listen naming note://b');
    expect(upstreamListens(raw.dir).at(-1)).toEqual(['note://b']);
  });
});
