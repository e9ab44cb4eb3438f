import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import type { StdioServerConfig } from '../../src/config/schema.js';
import { systemClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { McpUpstream } from '../../src/upstream/connection.js';
import { DEFAULT_INHERITED_ENV } from '../../src/upstream/spawn-env.js';

const paged = fileURLToPath(new URL('../fixtures/paged.mjs', import.meta.url));

describe('McpUpstream listing', () => {
  it('follows pagination of tools, prompts, resources and templates at dial and on a list_changed refresh', async () => {
    const config = parseConfig({ mcpServers: { paged: { command: 'node', args: [paged] } } }, { env: {} }).mcpServers.paged as StdioServerConfig;
    const upstream = new McpUpstream({
      name: 'paged',
      config,
      logger: silentLogger(),
      clock: systemClock,
      inheritEnv: DEFAULT_INHERITED_ENV,
      maxMessageBytes: 1024 * 1024,
      restart: { initialDelayMs: 100, maxDelayMs: 1000 },
    });
    try {
      await upstream.start();
      expect(upstream.status.state).toBe('ready');
      expect(upstream.catalog.tools.map((t) => t.name)).toEqual(['t1', 't2', 't3', 't4', 't5']);
      expect(upstream.catalog.prompts.map((p) => p.name)).toEqual(['p1', 'p2']);
      expect(upstream.catalog.resources.map((r) => r.uri)).toEqual(['paged://r1', 'paged://r2']);
      expect(upstream.catalog.resourceTemplates.map((t) => t.uriTemplate)).toEqual(['paged://t/{a}', 'paged://u/{b}']);

      const changed = new Promise<string>((resolve) => upstream.once('changed', resolve));
      const result = await upstream.callTool('t1', {}, { signal: new AbortController().signal, timeoutMs: 10_000 });
      expect(result.content).toEqual([{ type: 'text', text: 't1' }]);
      expect(await changed).toBe('tools');
      expect(upstream.catalog.tools.map((t) => t.name)).toEqual(['t1', 't2', 't3', 't4', 't5', 't6', 't7']);
    } finally {
      await upstream.close();
    }
    expect(upstream.status.state).toBe('closed');
  });
});
