/** One session's `logging/setLevel` must not silence what another session asked to see (upstreams are shared). */
import { EventEmitter } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { Upstream, UpstreamCatalog, UpstreamEvents } from '../../src/upstream/types.js';

class RecordingUpstream extends EventEmitter<UpstreamEvents> {
  readonly name = 'rec';
  readonly kind = 'stdio' as const;
  readonly status = { state: 'ready' as const };
  readonly catalog: UpstreamCatalog = { tools: [], prompts: [], resources: [], resourceTemplates: [] };
  readonly capabilities = { logging: {} };
  readonly secrets: string[] = [];
  readonly levels: string[] = [];
  async start() {}
  async reconnect() {
    return this.status;
  }
  async close() {}
  async callTool(): Promise<never> {
    throw new Error('not used');
  }
  async request(method: string, params: Record<string, unknown> | undefined) {
    if (method === 'logging/setLevel') this.levels.push(String(params?.level));
    return {};
  }
}

describe('UpstreamLogLevel.set (gateway.logLevel)', () => {
  let dir: string;
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('sends upstreams the most verbose level any live session asked for, and recomputes when one ends', async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-loglevel-'));
    const gateway = new Gateway(parseConfig({ estate: { enabled: false } }, { baseDir: dir }), { logger: silentLogger() });
    const upstream = new RecordingUpstream();
    gateway.registry.add({ upstream: upstream as unknown as Upstream, prefix: 'rec' });
    gateway.logLevel.set('a', 'debug');
    gateway.logLevel.set('b', 'error'); // must not override a's debug
    expect(upstream.levels).toEqual(['debug']);
    gateway.logLevel.set('a', undefined); // a ended: b's error is what is wanted now
    expect(upstream.levels).toEqual(['debug', 'error']);
    await gateway.stop();
  });
});
