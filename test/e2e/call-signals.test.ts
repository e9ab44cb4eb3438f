/**
 * A plain `tools/call` makes no AbortController (shared/cancel.ts, issue 19): its cancellation is
 * a `Cancellation` from the lane to the upstream request, and a real `AbortSignal` is made only
 * for code that asks for one. Counted in the CLI's own process by a preload
 * (test/fixtures/count-abort.cjs), for a legacy and a modern client over stdio to a 2025-11-25
 * upstream. A cancelled call still cancels the upstream request, for either era of client and of
 * upstream (a modern upstream's request goes through the SDK, with the real signal made for it).
 */
import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, readyEras, spawnRawBroker, waitFor } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-signals-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const CALLS = 200;
const envelope = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'signals', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

/** Runs `calls` against a fresh CLI and returns the AbortControllers its process made. */
async function countedRun(name: string, calls: (broker: ReturnType<typeof spawnRawBroker>) => Promise<void>): Promise<number> {
  const counts = join(dir, `${name}.txt`);
  const log = join(dir, `${name}.ndjson`);
  const broker = spawnRawBroker({
    servers: { fx: nodeServer(fixture('echo.mjs'), { env: { FIXTURE_LOG: log } }) },
    env: { NODE_OPTIONS: `--require ${fixture('count-abort.cjs')}`, COUNT_ABORT_FILE: counts },
  });
  try {
    await calls(broker);
    expect(readyEras(broker.stderr()).fx).toBe('legacy');
  } finally {
    await broker.close();
  }
  // The CLI's own line (its upstream, also a Node process, writes one too); argv[1] may be the real path.
  const cli = [CLI, realpathSync(CLI)];
  const line = readFileSync(counts, 'utf8')
    .split('\n')
    .find((l) => cli.some((path) => l.startsWith(`${path} `)));
  expect(line, `no count from the CLI's process in ${counts}`).toBeDefined();
  return Number(line!.split(' ').pop());
}

describe('a plain tools/call makes no AbortController', () => {
  it.each([
    ['legacy', 'a 2025-11-25 client (initialize)'],
    ['modern', 'a 2026-07-28 client (per-request _meta)'],
  ])('%s: %s, calls one at a time and 100 at once', async (era) => {
    const made = await countedRun(era, async (broker) => {
      const meta = era === 'modern' ? { _meta: envelope } : {};
      if (era === 'legacy') await broker.initialize();
      else await broker.request('open', 'server/discover', meta);
      for (let i = 0; i < CALLS / 2; i++) {
        const res = await broker.request(`s${i}`, 'tools/call', { name: 'fx__echo', arguments: { text: `${i}` }, ...meta });
        expect((res.result as { content: Array<{ text: string }> }).content[0]!.text).toBe(`${i}`);
      }
      await Promise.all(Array.from({ length: CALLS / 2 }, (_, i) => broker.request(`c${i}`, 'tools/call', { name: 'fx__echo', arguments: { text: `c${i}` }, ...meta })));
    });
    // Start-up and the first call of an envelope (served by the SDK) make a few; one a call would be ≥ CALLS.
    expect(made, `${made} AbortControllers in the CLI for ${CALLS} calls`).toBeLessThan(CALLS / 4);
  });

  it.each([
    ['legacy', 'echo.mjs', 'legacy'],
    ['legacy', 'modern-upstream.mjs', 'modern'],
    ['modern', 'echo.mjs', 'legacy'],
    ['modern', 'modern-upstream.mjs', 'modern'],
  ])('a %s client cancelling a call to %s (a %s upstream): the upstream request is cancelled, the call recorded cancelled, no answer sent', async (era, upstream, upstreamEra) => {
    const log = join(dir, `cancel-${era}-${upstreamEra}.ndjson`);
    const broker = spawnRawBroker({ servers: { fx: nodeServer(fixture(upstream), { env: { FIXTURE_LOG: log } }) } });
    try {
      const meta = era === 'modern' ? { _meta: envelope } : {};
      if (era === 'legacy') await broker.initialize();
      else await broker.request('open', 'server/discover', meta);
      // A first call under the envelope, so the slow one is served by the modern lane (the SDK serves an envelope's first).
      await broker.request('warm', 'tools/call', { name: 'fx__echo', arguments: { text: 'w' }, ...meta });
      broker.send({ jsonrpc: '2.0', id: 'slow', method: 'tools/call', params: { name: 'fx__slow', arguments: { ms: 30_000 }, ...meta } });
      await waitFor(() => readLines(log).find((e) => e.event === 'call' && e.tool === 'slow'), 'the upstream call to start');
      broker.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'slow', reason: 'changed my mind', ...meta } });
      await waitFor(() => readLines(log).find((e) => e.event === 'cancelled'), 'the upstream to see the cancel');
      const record = await waitFor(() => readLines(broker.recordsPath).find((r) => r.name === 'fx__slow'), 'the record');
      expect(record.outcome).toBe('cancelled');
      expect(readyEras(broker.stderr()).fx).toBe(upstreamEra);
      expect(broker.messages.find((m) => m.id === 'slow')).toBeUndefined();
    } finally {
      await broker.close();
    }
  });
});

function readLines(path: string): Array<Record<string, unknown>> {
  try {
    return readFileSync(path, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  } catch {
    return [];
  }
}
