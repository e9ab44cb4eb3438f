/**
 * Call timing (`MCP_BROKER_CALL_TIMING=<file>`, the bench's `--timing`): the CLI times each call
 * alone on its path and writes the summary when it exits.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, startBroker, waitFor } from './helpers.js';

interface Summary {
  calls: number;
  overlapped: number;
  path: string[];
  segments: Array<{ from: string; to: string; count: number; medianUs: number }>;
}

const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-timing-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function callsThroughBroker(env: Record<string, string>, sequential: number): Promise<void> {
  const log = join(dir, 'fixture.ndjson');
  const broker = await startBroker({ servers: { fx: nodeServer(fixture('echo.mjs'), { env: { FIXTURE_LOG: log } }) }, env });
  try {
    for (let i = 0; i < sequential; i++) {
      const result = await broker.client.callTool({ name: 'fx__echo', arguments: { text: `t${i}` } });
      expect(result.isError).toBeFalsy();
    }
    // A call while another is in flight: the two overlap, so they are counted and not timed.
    const abort = new AbortController();
    const slow = broker.client.callTool({ name: 'fx__slow', arguments: { ms: 30_000 } }, { signal: abort.signal }).catch(() => undefined);
    await waitFor(() => existsSync(log) && readFileSync(log, 'utf8').includes('"slow"'), 'the slow call at the upstream');
    expect((await broker.client.callTool({ name: 'fx__echo', arguments: { text: 'during' } })).isError).toBeFalsy();
    abort.abort();
    await slow;
  } finally {
    await broker.close();
  }
}

describe('call timing', () => {
  it('with MCP_BROKER_CALL_TIMING, the broker writes where each call alone spent its time, along the stdio path, when it exits', async () => {
    const file = join(dir, 'on.json');
    await callsThroughBroker({ MCP_BROKER_CALL_TIMING: file }, 5);
    const summary = await waitFor(() => (existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Summary) : undefined), 'the timing file');
    for (const point of ['stdin read', 'parse', 'judge in', 'invoke in', 'upstream write', 'upstream read', 'scrub out', 'records write', 'record out', 'stdout write']) {
      expect(summary.path, point).toContain(point);
    }
    expect(summary.path[0]).toBe('stdin read');
    expect(summary.path.at(-1)).toBe('stdout write');
    // In order: in through the stages, out to the upstream and back, recorded, answered.
    const at = (p: string) => summary.path.indexOf(p);
    expect(at('judge in')).toBeLessThan(at('upstream write'));
    expect(at('upstream write')).toBeLessThan(at('upstream read'));
    expect(at('upstream read')).toBeLessThan(at('scrub out'));
    expect(at('scrub out')).toBeLessThan(at('records write'));
    expect(at('records write')).toBeLessThan(at('stdout write'));
    const toUpstream = summary.segments.find((s) => s.from === 'upstream write' && s.to === 'upstream read');
    expect(toUpstream?.count).toBeGreaterThanOrEqual(5);
    expect(summary.overlapped).toBeGreaterThanOrEqual(1);
  }, 60_000);
});
