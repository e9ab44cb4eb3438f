/**
 * A modern upstream's cache hints on its lists drive the broker's roster (2026-07-28
 * server/utilities/caching): a list whose upstream declares no `listChanged` is fetched again
 * when it is next needed once its `ttlMs` has passed (and not before), and our own answers stay
 * `ttlMs: 0`, `cacheScope: "private"` whatever the upstream said (never its `public`).
 * Upstream: test/fixtures/modern-resources.mjs (tools/list: `ttlMs` from FIXTURE_TTL_MS, `public`).
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, startBroker, waitFor, writeConfig, type StartedBroker } from './helpers.js';

const toolLists = (dir: string, name: string): number => {
  const file = join(dir, `${name}.log`);
  if (!existsSync(file)) return 0;
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { method?: string }).filter((e) => e.method === 'tools/list').length;
};
const upstream = (name: string, ttlMs: number) =>
  nodeServer(fixture('modern-resources.mjs'), { env: { FIXTURE_LOG: `\${configDir}/${name}.log`, FIXTURE_TTL_MS: String(ttlMs) } });
const servers = { stale: upstream('stale', 0), fresh: upstream('fresh', 3_600_000) };

describe('upstream cache hints', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({ servers });
  }, 60_000);
  afterAll(async () => broker?.close());

  const names = async () => (await broker.client.listTools()).tools.map((t) => t.name);

  it('a list past its ttlMs (0) is fetched again when next listed, so a silent change shows', async () => {
    expect(await names()).not.toContain('stale__added');
    await broker.client.callTool({ name: 'stale__add_tool', arguments: {} });
    await waitFor(async () => (await names()).includes('stale__added'), 'stale__added in the roster', 15_000, 200);
  });

  it('a list within its ttlMs (1 h) is not fetched again, however often it is listed', async () => {
    const before = toolLists(broker.dir, 'fresh');
    await broker.client.callTool({ name: 'fresh__add_tool', arguments: {} });
    for (let i = 0; i < 5; i++) expect(await names()).not.toContain('fresh__added');
    expect(toolLists(broker.dir, 'fresh')).toBe(before);
  });

  it("answers a modern client's tools/list with ttlMs 0 and cacheScope private, not the upstream's public", async () => {
    const { dir, configPath } = writeConfig(servers);
    const client = new Client({ name: 'cache-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    try {
      await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), { timeout: 30_000 });
      expect(client.getProtocolEra()).toBe('modern');
      const listed = (await client.request({ method: 'tools/list', params: {} } as never)) as Record<string, unknown>;
      expect(listed).toMatchObject({ ttlMs: 0, cacheScope: 'private' });
    } finally {
      await client.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
