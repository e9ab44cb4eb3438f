/**
 * A real gateway serving HTTP in this process (127.0.0.1, any free port), for tests that need to
 * look inside it (listener counts, a manual clock) while clients reach it over the wire.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway.js';
import type { Clock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { serveHttp, type HttpServing } from '../../src/transports/http.js';

export interface InProcessHttp {
  gateway: Gateway;
  serving: HttpServing;
  /** The temp folder the config was parsed in (its `baseDir`). */
  dir: string;
  /** Stops serving, stops the gateway, removes the folder. */
  close(): Promise<void>;
}

/** Parses `raw` (a servers.json value) in a new temp folder with `env`, and serves it over HTTP. */
export async function serveInProcess(raw: unknown, options: { env?: Record<string, string>; clock?: Clock } = {}): Promise<InProcessHttp> {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-in-process-'));
  const gateway = new Gateway(parseConfig(raw, { baseDir: dir, env: options.env ?? {} }), { logger: silentLogger(), ...(options.clock && { clock: options.clock }) });
  const serving = await serveHttp(gateway, { host: '127.0.0.1', port: 0 });
  return {
    gateway,
    serving,
    dir,
    async close() {
      await serving.close();
      await gateway.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
