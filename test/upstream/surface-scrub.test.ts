/**
 * The upstreams' `instructions` in the broker's `server/discover` surface are scrubbed as the
 * surface is served, not only when each upstream was dialled: a secret a reload adds is redacted
 * from them too. A real gateway with the modern fixture upstream (its FIXTURE_INSTRUCTIONS).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway.js';
import { silentLogger } from '../../src/shared/logger.js';
import { fixture, nodeServer } from '../e2e/helpers.js';

describe('discover surface: instructions', () => {
  let dir: string;
  let gateway: Gateway | undefined;
  afterEach(async () => {
    await gateway?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a secret added after the upstream was dialled (a reload) is redacted from its instructions as the surface is served (regression: they were served as scrubbed at dial time)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-surface-'));
    const later = 'instructions-secret-after-dial-2c8e';
    const config = parseConfig(
      {
        mcpServers: { up: nodeServer(fixture('modern-upstream.mjs'), { env: { FIXTURE_INSTRUCTIONS: `use key ${later}` }, required: true }) },
        estate: { enabled: false },
        broker: { dataDir: join(dir, 'data') },
      },
      { baseDir: dir, env: {} },
    );
    gateway = new Gateway(config, { logger: silentLogger() });
    await gateway.start();
    expect(gateway.surface('local').instructions).toBe(`up: use key ${later}`);
    gateway.scrubber.addSecrets([later]);
    expect(gateway.surface('local').instructions).toBe('up: use key [REDACTED]');
  });
});
