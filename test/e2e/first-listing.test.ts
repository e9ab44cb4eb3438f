/**
 * An upstream's first listing after it connects asks for every list its capabilities declare
 * together, not each after the last one's answer (issue 19, `fetchCatalog` in
 * upstream/connection.ts).
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fixture, nodeServer, readNdjson, startBroker, waitFor } from './helpers.js';

describe('the first listing of an upstream', () => {
  it('asks for its tools, prompts, resources and resource templates together, and serves all of them', async () => {
    const broker = await startBroker({
      servers: { lt: nodeServer(fixture('lists-together.mjs'), { env: { FIXTURE_LOG: '${configDir}/lt.log', WAIT_MS: '3000' } }) },
    });
    try {
      await waitFor(async () => (await broker.client.listTools()).tools.some((t) => t.name === 'lt__hello'), 'the upstream to be listed', 20_000);
      // The fixture answered its tools/list only after its other three lists had been asked for.
      const asked = readNdjson<{ event: string; together: boolean }>(join(broker.dir, 'lt.log')).filter((e) => e.event === 'tools/list');
      expect(asked.map((e) => e.together)).toEqual([true]);
      expect((await broker.client.listPrompts()).prompts.map((p) => p.name)).toEqual(['lt__greet']);
      expect((await broker.client.listResources()).resources.map((r) => r.uri)).toContain('memo://one');
      expect((await broker.client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate)).toContain('memo://{id}');
    } finally {
      await broker.close();
    }
  }, 30_000);
});
