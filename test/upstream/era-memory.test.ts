/**
 * The era memory (issue 14 §1): which verdict a dial is handed, against the real SQLite store and
 * a manual clock.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import type { HttpServerConfig, SseServerConfig, StdioServerConfig } from '../../src/config/schema.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { SqliteStore } from '../../src/store/index.js';
import { EraMemory, upstreamDefinitionHash } from '../../src/upstream/era-memory.js';

const DAY_MS = 24 * 60 * 60 * 1000;
const DISCOVER = { supportedVersions: ['2026-07-28'], capabilities: { tools: {} }, ttlMs: 0, cacheScope: 'private' };

function server(entry: Record<string, unknown>): StdioServerConfig | HttpServerConfig | SseServerConfig {
  return parseConfig({ mcpServers: { u: entry } }, { baseDir: '/tmp', env: {} }).mcpServers.u as StdioServerConfig;
}

function memory(entry: Record<string, unknown>, store: SqliteStore, clock: ManualClock): EraMemory {
  return new EraMemory({ name: 'u', config: server(entry), store, clock, logger: silentLogger(), legacyMaxAgeMs: DAY_MS });
}

describe('EraMemory', () => {
  const stdio = { command: 'node', args: ['server.js'], env: { A: '1' } };

  it('hands a modern verdict back with its discover result, with no age limit', async () => {
    const store = SqliteStore.open(':memory:');
    const clock = new ManualClock();
    expect(await memory(stdio, store, clock).prior()).toBeUndefined();
    await memory(stdio, store, clock).remember(DISCOVER as never);
    await clock.advance(30 * DAY_MS);
    expect(await memory(stdio, store, clock).prior()).toEqual({ kind: 'modern', discover: DISCOVER });
  });

  it('uses a legacy verdict until broker.legacyEraMaxAgeMs has passed since its probe, then probes again', async () => {
    const store = SqliteStore.open(':memory:');
    const clock = new ManualClock();
    await memory(stdio, store, clock).remember(undefined);
    await clock.advance(DAY_MS - 1);
    expect(await memory(stdio, store, clock).prior()).toEqual({ kind: 'legacy' });
    await clock.advance(1);
    expect(await memory(stdio, store, clock).prior()).toBeUndefined();
  });

  it('does not use a verdict found for another definition (command, args, env, cwd, URL, headers)', async () => {
    const store = SqliteStore.open(':memory:');
    const clock = new ManualClock();
    await memory(stdio, store, clock).remember(DISCOVER as never);
    for (const changed of [{ ...stdio, args: ['other.js'] }, { ...stdio, env: { A: '2' } }, { ...stdio, cwd: '/elsewhere' }]) {
      expect(await memory(changed, store, clock).prior()).toBeUndefined();
    }
    // Settings that do not pick the server leave it unchanged.
    expect(await memory({ ...stdio, prefix: 'x', timeoutMs: 5 }, store, clock).prior()).toEqual({ kind: 'modern', discover: DISCOVER });
    const http = { type: 'http', url: 'http://127.0.0.1:1/mcp', headers: { authorization: 'Bearer a' } };
    expect(upstreamDefinitionHash(server(http))).not.toBe(upstreamDefinitionHash(server({ ...http, headers: { authorization: 'Bearer b' } })));
    expect(upstreamDefinitionHash(server(http))).not.toBe(upstreamDefinitionHash(server({ ...http, url: 'http://127.0.0.1:2/mcp' })));
  });

  it('never probes an SSE upstream and stores nothing for it', async () => {
    const store = SqliteStore.open(':memory:');
    const clock = new ManualClock();
    const sse = memory({ type: 'sse', url: 'http://127.0.0.1:1/sse' }, store, clock);
    expect(sse.negotiates).toBe(false);
    expect(await sse.prior()).toEqual({ kind: 'legacy' });
    await sse.remember(undefined);
    expect(await store.getEraVerdict('u')).toBeUndefined();
  });

  it('store: a verdict round-trips, replaces the previous one, and can be forgotten', async () => {
    const store = SqliteStore.open(':memory:');
    const verdict = { upstream: 'u', definitionHash: 'h', era: 'modern' as const, discover: DISCOVER, at: new Date(0).toISOString() };
    await store.setEraVerdict(verdict);
    expect(await store.getEraVerdict('u')).toEqual(verdict);
    await store.setEraVerdict({ upstream: 'u', definitionHash: 'h2', era: 'legacy', at: new Date(1).toISOString() });
    expect(await store.getEraVerdict('u')).toEqual({ upstream: 'u', definitionHash: 'h2', era: 'legacy', at: new Date(1).toISOString() });
    expect(await store.forgetEraVerdict('u')).toBe(true);
    expect(await store.getEraVerdict('u')).toBeUndefined();
  });
});
