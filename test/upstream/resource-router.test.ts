/**
 * ResourceRouter's upstream subscriptions: held exactly while some subscriber may have the
 * resource (judged again by recheck after a config reload), let go when none may, taken again
 * when one may again.
 */
import { describe, expect, it } from 'vitest';
import { ResourceRouter, type MayHave } from '../../src/upstream/resources.js';
import type { Registry } from '../../src/upstream/registry.js';
import type { Upstream } from '../../src/upstream/types.js';
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
