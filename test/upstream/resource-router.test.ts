/**
 * ResourceRouter's upstream subscriptions: held exactly while some subscriber may have the
 * resource (judged again by recheck after a config reload), let go when none may, taken again
 * when one may again.
 */
import { describe, expect, it } from 'vitest';
import { ResourceRouter, type MayHave } from '../../src/upstream/resources.js';
import { EventEmitter } from 'node:events';
import { Registry } from '../../src/upstream/registry.js';
import type { Upstream, UpstreamCatalog } from '../../src/upstream/types.js';
import { silentLogger } from '../../src/shared/logger.js';

function router() {
  const sent: string[] = [];
  const upstream = {
    name: 'm',
    status: { state: 'ready' },
    capabilities: { resources: { subscribe: true } },
    request: async (method: string, params: { uri: string }) => void sent.push(`${method} ${params.uri}`),
  } as unknown as Upstream;
  const registry = { roster: { resourceServer: () => 'm' }, upstream: () => upstream, upstreams: [upstream] } as unknown as Registry;
  return { resources: new ResourceRouter({ registry, logger: silentLogger(), timeoutMs: 1000 }), sent };
}

describe('ResourceRouter upstream subscriptions', () => {
  it('kept while one subscriber may still have the resource; let go when none may; taken again when one may again', async () => {
    const { resources, sent } = router();
    const policy = { alice: true, bob: true };
    const alice: MayHave = () => policy.alice;
    const bob: MayHave = () => policy.bob;
    await resources.subscribe('note://a', alice);
    await resources.subscribe('note://a', bob);
    expect(sent).toEqual(['resources/subscribe note://a']);
    policy.alice = false;
    await resources.recheck();
    expect(sent).toHaveLength(1);
    policy.bob = false;
    await resources.recheck();
    expect(sent).toEqual(['resources/subscribe note://a', 'resources/unsubscribe note://a']);
    // The denied subscribers leave: nothing more to let go.
    await resources.unsubscribe('note://a', bob);
    expect(sent).toHaveLength(2);
    policy.alice = true;
    await resources.recheck();
    expect(sent).toEqual(['resources/subscribe note://a', 'resources/unsubscribe note://a', 'resources/subscribe note://a']);
    await resources.unsubscribe('note://a', alice);
    expect(sent.at(-1)).toBe('resources/unsubscribe note://a');
    expect(sent).toHaveLength(4);
  });

  it('a subscriber that is not there leaving takes no one else\'s place', async () => {
    const { resources, sent } = router();
    const alice: MayHave = () => true;
    const stranger: MayHave = () => true;
    await resources.subscribe('note://a', alice);
    await resources.unsubscribe('note://a', stranger);
    expect(sent).toEqual(['resources/subscribe note://a']);
    await resources.unsubscribe('note://a', alice);
    expect(sent).toEqual(['resources/subscribe note://a', 'resources/unsubscribe note://a']);
  });

  it('the allowed subscriber leaving lets go when only denied ones remain; a verdict that throws counts as no', async () => {
    const { resources, sent } = router();
    const allowed: MayHave = () => true;
    const denied: MayHave = () => false;
    const throws: MayHave = () => {
      throw new Error('policy failed');
    };
    await resources.subscribe('note://a', denied);
    await resources.subscribe('note://a', throws);
    expect(sent).toEqual([]);
    await resources.subscribe('note://a', allowed);
    expect(sent).toEqual(['resources/subscribe note://a']);
    await resources.unsubscribe('note://a', allowed);
    expect(sent).toEqual(['resources/subscribe note://a', 'resources/unsubscribe note://a']);
  });
});

describe('ResourceRouter while the upstream holding a subscription is down', () => {
  /** A stand-in upstream registered in a real Registry: its catalog, state and the subscriptions it was asked for. */
  function upstream(name: string, uris: string[]) {
    const sent: string[] = [];
    const u = Object.assign(new EventEmitter(), {
      name,
      status: { state: 'ready' } as { state: string },
      capabilities: { resources: { subscribe: true } },
      catalog: { tools: [], prompts: [], resources: uris.map((uri) => ({ uri, name: uri })), resourceTemplates: [] } as UpstreamCatalog,
      subscribeResource: async (uri: string) => void sent.push(`subscribe ${uri}`),
      unsubscribeResource: async (uri: string) => void sent.push(`unsubscribe ${uri}`),
    });
    return { u, sent, upstream: u as unknown as Upstream };
  }

  it('a subscriber joining, and a reload, while it re-dials leave the subscription with it, not with the one other ready upstream (regression: it was moved there, and a modern upstream forgot it for its next dial)', async () => {
    const registry = new Registry(silentLogger());
    const a = upstream('a', ['note://a']);
    const b = upstream('b', ['other://b']);
    registry.add({ upstream: a.upstream, prefix: 'a' });
    registry.add({ upstream: b.upstream, prefix: 'b' });
    registry.rebuild();
    const resources = new ResourceRouter({ registry, logger: silentLogger(), timeoutMs: 1000 });
    await resources.subscribe('note://a', () => true);
    expect(a.sent).toEqual(['subscribe note://a']);
    // a's connection is lost: its lists are withdrawn while it re-dials (McpUpstream.withdraw).
    a.u.status = { state: 'backoff' };
    a.u.catalog = { tools: [], prompts: [], resources: [], resourceTemplates: [] };
    registry.rebuild();
    await resources.subscribe('note://a', () => true);
    await resources.recheck();
    expect(a.sent).toEqual(['subscribe note://a']);
    expect(b.sent).toEqual([]);
    // Back, with its lists: the last subscribers leaving let go of it there.
    a.u.status = { state: 'ready' };
    a.u.catalog = { tools: [], prompts: [], resources: [{ uri: 'note://a', name: 'note://a' }], resourceTemplates: [] };
    registry.rebuild();
    await resources.unsubscribe('note://a');
    await resources.unsubscribe('note://a');
    expect(a.sent).toEqual(['subscribe note://a', 'unsubscribe note://a']);
    expect(b.sent).toEqual([]);
  });
});
