/**
 * The upstreams' `server/discover` surface (src/upstream/surface.ts): which upstream settings key
 * a remembered surface, what the live one holds, and the store keeping the most recent ones.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { SqliteStore } from '../../src/store/index.js';
import { SURFACES_KEPT } from '../../src/store/store.js';
import { isUpstreamSurface, liveSurface, servedSurface, surfaceKey } from '../../src/upstream/surface.js';
import type { Upstream } from '../../src/upstream/types.js';

const servers = (mcpServers: Record<string, unknown>) => parseConfig({ mcpServers }, { baseDir: '/tmp', env: {} }).mcpServers;
const stdio = { command: 'node', args: ['server.js'], env: { A: '1' } };

describe('surfaceKey', () => {
  it('changes with what decides which servers answer, not with how they are served', () => {
    const key = surfaceKey(servers({ a: stdio }));
    expect(surfaceKey(servers({ a: { ...stdio, prefix: 'x', timeoutMs: 5_000 } }))).toBe(key);
    for (const changed of [{ ...stdio, args: ['other.js'] }, { ...stdio, env: { A: '2' } }, { ...stdio, disabled: true }]) {
      expect(surfaceKey(servers({ a: changed }))).not.toBe(key);
    }
    expect(surfaceKey(servers({ b: stdio }))).not.toBe(key);
    expect(surfaceKey(servers({ a: stdio, b: { url: 'http://127.0.0.1:9/mcp' } }))).not.toBe(key);
    expect(surfaceKey(servers({ b: { url: 'http://127.0.0.1:9/mcp' }, a: stdio }))).toBe(surfaceKey(servers({ a: stdio, b: { url: 'http://127.0.0.1:9/mcp' } })));
  });
});

describe('liveSurface', () => {
  const upstream = (name: string, state: string, extensions?: object, instructions?: string, kind = 'stdio') =>
    ({ name, kind, status: { state }, capabilities: extensions ? { extensions } : {}, instructions }) as unknown as Upstream;

  it('offers the extensions every ready upstream declares, and their instructions by name', () => {
    const surface = liveSurface([
      upstream('a', 'ready', { 'x/one': {}, 'x/two': { v: 1 } }, 'use a'),
      upstream('b', 'ready', { 'x/two': { v: 2 } }),
      upstream('c', 'failed', {}, 'never seen'),
      upstream('r', 'ready', {}, undefined, 'rest'),
    ]);
    expect(surface).toEqual({ extensions: { 'x/two': { v: 1 } }, instructions: [{ server: 'a', text: 'use a' }] });
    expect(liveSurface([upstream('c', 'connecting', { 'x/one': {} }, 'not yet')])).toEqual({});
  });
});

describe('servedSurface', () => {
  const surface = { extensions: { 'x/one': {} }, instructions: [{ server: 'a', text: 'use a' }, { server: 'b', text: 'use b' }] };

  it('gives a principal the instructions of the upstreams it sees, one paragraph each', () => {
    expect(servedSurface(surface, () => true)).toEqual({ extensions: { 'x/one': {} }, instructions: 'a: use a\n\nb: use b' });
    expect(servedSurface(surface, (server) => server === 'b')).toEqual({ extensions: { 'x/one': {} }, instructions: 'b: use b' });
    expect(servedSurface(surface, () => false)).toEqual({ extensions: { 'x/one': {} } });
  });

  it('takes a stored surface only in its own shape (an older broker stored the instructions as one text)', () => {
    expect(isUpstreamSurface(surface)).toBe(true);
    expect(isUpstreamSurface({ extensions: { 'x/one': {} } })).toBe(true);
    expect(isUpstreamSurface({ instructions: 'a: use a' })).toBe(false);
    expect(isUpstreamSurface({ instructions: [{ server: 'a' }] })).toBe(false);
    expect(isUpstreamSurface(null)).toBe(false);
  });
});

describe('the store of surfaces', () => {
  it('gives back the one stored under a key, and keeps the most recent keys only', async () => {
    const store = SqliteStore.open(':memory:');
    expect(await store.getSurface('k0')).toBeUndefined();
    for (let i = 0; i <= SURFACES_KEPT; i++) await store.setSurface(`k${i}`, { instructions: `i${i}` }, new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString());
    expect(await store.getSurface('k0')).toBeUndefined();
    expect(await store.getSurface('k1')).toEqual({ instructions: 'i1' });
    expect(await store.getSurface(`k${SURFACES_KEPT}`)).toEqual({ instructions: `i${SURFACES_KEPT}` });
    await store.setSurface('k1', { extensions: { 'x/one': {} } }, new Date(Date.UTC(2026, 0, 2)).toISOString());
    expect(await store.getSurface('k1')).toEqual({ extensions: { 'x/one': {} } });
    await store.close();
  });
});
