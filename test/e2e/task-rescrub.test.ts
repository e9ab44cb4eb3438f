/**
 * A task's stored result is scrubbed again as it is read: a secret a reload adds is scrubbed from
 * then on (README "Live config"), also from the results kept for a task's TTL (found by a review
 * hunting for paths around the scrubber: `tasks/result` still answered it as stored).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, spawnRawBroker, waitFor, type RawBroker } from './helpers.js';

const LATER = 'later-secret-7f3a9c2e1b55d0';

describe('a stored task result and a secret a reload adds', () => {
  let broker: RawBroker;
  let id = 0;
  const request = (method: string, params?: object) => broker.request(++id, method, params, 20_000) as Promise<{ result?: any; error?: any }>;
  beforeAll(async () => {
    broker = spawnRawBroker({ servers: { c: nodeServer(fixture('conformance-server.mjs'), { args: [fixture('conformance-server.mjs'), '--legacy'] }) } });
    await broker.initialize({});
  });
  afterAll(() => broker?.close());

  it('tasks/result, tasks/get and tasks/list after the reload carry [REDACTED], not the value', async () => {
    const created = await request('tools/call', { name: 'c__slow_compute', arguments: { seconds: 0, label: LATER }, task: { ttl: 600_000 } });
    const taskId = created.result.task.taskId as string;
    const before = await waitFor(async () => {
      const got = await request('tasks/result', { taskId });
      return got.result?.content ? got : undefined;
    }, 'the task result');
    expect(JSON.stringify(before.result.content)).toContain(LATER); // not a secret yet

    const path = join(broker.dir, 'servers.json');
    const config = JSON.parse(readFileSync(path, 'utf8'));
    config.mcpServers.other = nodeServer(fixture('echo.mjs'), { env: { API_KEY: LATER } });
    const seen = broker.stderr().split('config reloaded').length;
    writeFileSync(path, JSON.stringify(config, null, 2));
    await waitFor(() => broker.stderr().split('config reloaded').length > seen, 'config reloaded', 20_000, 50);

    const after = await request('tasks/result', { taskId });
    expect(JSON.stringify(after.result.content)).toContain('[REDACTED]');
    for (const answer of [after, await request('tasks/get', { taskId }), await request('tasks/list')]) expect(JSON.stringify(answer)).not.toContain(LATER);
  });
});
