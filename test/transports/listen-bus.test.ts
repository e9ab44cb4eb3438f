/**
 * The modern face's listen bus (src/transports/http/listen-bus.ts): each resource update is
 * judged for the principal of each stream, and a stream of no known principal gets none.
 */
import type { ServerEvent } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { ListenBus } from '../../src/transports/http/listen-bus.js';

describe('ListenBus', () => {
  const allowed = (principal: string, uri: string, server: string) => !(principal === 'alice' && uri === 'note://a' && server === 'm');
  const open = async (bus: ListenBus, principal?: string) => {
    const seen: ServerEvent[] = [];
    const subscribe = () => bus.subscribe((event) => void seen.push(event));
    const unsubscribe = principal === undefined ? subscribe() : await bus.serving(principal, subscribe);
    return { seen, unsubscribe };
  };

  it("sends a resource update only to the streams whose principal may have it now; list changes to every stream", async () => {
    const bus = new ListenBus(allowed, () => undefined);
    const alice = await open(bus, 'alice');
    const bob = await open(bus, 'bob');
    bus.resourceUpdated('note://a', 'm');
    bus.resourceUpdated('note://b', 'm');
    bus.publish({ kind: 'tools_list_changed' });
    expect(alice.seen).toEqual([{ kind: 'resource_updated', uri: 'note://b' }, { kind: 'tools_list_changed' }]);
    expect(bob.seen).toEqual([{ kind: 'resource_updated', uri: 'note://a' }, { kind: 'resource_updated', uri: 'note://b' }, { kind: 'tools_list_changed' }]);
    bob.unsubscribe();
    bus.resourceUpdated('note://b', 'm');
    expect(bob.seen).toHaveLength(3);
  });

  it('fails closed: a stream subscribed outside serving, and an update published with no upstream, reach no one', async () => {
    const bus = new ListenBus(() => true, () => undefined);
    const nobody = await open(bus);
    const bob = await open(bus, 'bob');
    bus.resourceUpdated('note://a', 'm');
    bus.publish({ kind: 'resource_updated', uri: 'note://b' });
    expect(nobody.seen).toEqual([]);
    expect(bob.seen).toEqual([{ kind: 'resource_updated', uri: 'note://a' }]);
  });

  it('a principal is the one of the request being served, across awaits', async () => {
    const bus = new ListenBus(allowed, () => undefined);
    const seen: Record<string, string[]> = { alice: [], bob: [] };
    const later = (principal: 'alice' | 'bob') =>
      bus.serving(principal, async () => {
        await Promise.resolve();
        bus.subscribe((event) => void (event.kind === 'resource_updated' && seen[principal]!.push(event.uri)));
      });
    await Promise.all([later('alice'), later('bob')]);
    bus.resourceUpdated('note://a', 'm');
    expect(seen).toEqual({ alice: [], bob: ['note://a'] });
  });

  it('keeps the principal of a request still being served when another finishes first, and none after', async () => {
    const bus = new ListenBus(allowed, () => undefined);
    const seen: Record<string, string[]> = { alice: [], after: [] };
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const alice = bus.serving('alice', async () => {
      await held;
      bus.subscribe((event) => void (event.kind === 'resource_updated' && seen.alice!.push(event.uri)));
    });
    await bus.serving('bob', () => undefined);
    release();
    await alice;
    bus.subscribe((event) => void (event.kind === 'resource_updated' && seen.after!.push(event.uri)));
    bus.resourceUpdated('note://b', 'm');
    expect(seen).toEqual({ alice: ['note://b'], after: [] });
  });
});
