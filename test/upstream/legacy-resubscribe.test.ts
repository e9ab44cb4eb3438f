/**
 * A legacy (2025-11-25) upstream that crashed and was dialled again is a new server process with
 * no subscriptions: the broker, which keeps holding its resource subscriptions across the re-dial
 * (upstream/resources.ts), asks for them again, as a modern upstream's listen is reopened.
 */
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { fixture, nodeServer, waitFor } from '../e2e/helpers.js';
import { serveInProcess, type InProcessHttp } from '../transports/in-process.js';

const events = (log: string): { pid: number; event: string; uri?: string }[] =>
  existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)) : [];

describe('a held resource subscription of a legacy upstream that restarted', () => {
  let served: InProcessHttp | undefined;
  afterEach(async () => served?.close());

  it('is asked for again on the new connection (regression: updates of the restarted upstream were never heard again)', async () => {
    served = await serveInProcess({
      mcpServers: { prims: nodeServer(fixture('primitives.mjs'), { env: { FIXTURE_LOG: '${configDir}/prims.log' } }) },
      broker: { restart: { initialDelayMs: 50, maxDelayMs: 100 } },
      estate: { enabled: false },
    });
    const { gateway, dir } = served;
    const log = join(dir, 'prims.log');
    await gateway.ready;
    await gateway.resources.subscribe('prims://doc');
    const first = events(log).filter((e) => e.event === 'subscribe');
    expect(first).toMatchObject([{ uri: 'prims://doc' }]);
    // The upstream process dies; the broker restarts it.
    process.kill(first[0]!.pid, 'SIGKILL');
    const upstream = gateway.registry.upstream('prims')!;
    await waitFor(() => upstream.status.state !== 'ready', 'the upstream seen down');
    await waitFor(() => upstream.status.state === 'ready', 'the upstream ready again');
    await waitFor(() => events(log).filter((e) => e.event === 'subscribe' && e.pid !== first[0]!.pid).length === 1, 'prims://doc subscribed on the new process');
  }, 30_000);
});
