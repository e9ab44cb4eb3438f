/**
 * An upstream that never answers `initialize` (test/fixtures/held-start.mjs, until it is sent
 * SIGUSR1) held every call to the other upstreams, and every list, until its `connectTimeoutMs`
 * (30 s) passed: the gateway's `ready` waited for every first dial. Now the others serve as soon
 * as they are ready, lists wait at most `broker.startGraceMs`, a call to the silent one is
 * `upstream_error` (it is starting), and when it does come up its tools join with `list_changed`.
 */
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { connectHttp, startHttpBroker, type HttpBroker } from '../transports/harness.js';
import { fixture, nodeServer, readNdjson, startBroker, waitFor, type StartedBroker } from './helpers.js';

const text = (r: CallToolResult) => (r.content[0] as { text: string }).text;

let broker: StartedBroker | undefined;
let http: HttpBroker | undefined;
afterEach(async () => {
  await broker?.close();
  await http?.close();
  broker = http = undefined;
});

describe('an upstream that never answers initialize', () => {
  it('holds up neither the calls nor the lists of the others; its calls fail upstream_error; its tools join with list_changed when it comes up', async () => {
    broker = await startBroker({
      servers: {
        e: nodeServer(fixture('echo.mjs')),
        // era "legacy": its first message is `initialize` (no era probe to wait out). connectTimeoutMs is the default 30 s.
        quiet: nodeServer(fixture('held-start.mjs'), { era: 'legacy', env: { FIXTURE_LOG: '${configDir}/quiet.log' } }),
      },
      extra: { broker: { startGraceMs: 1500 } },
    });
    // Well inside the silent upstream's 30 s: the previous build answered this after them.
    expect(text((await broker.client.callTool({ name: 'e__echo', arguments: { text: 'hi' } }, { timeout: 15_000 })) as CallToolResult)).toBe('hi');
    expect((await broker.client.listTools({}, { timeout: 15_000 })).tools.map((t) => t.name)).toContain('e__echo');
    expect((await broker.client.listTools()).tools.map((t) => t.name)).not.toContain('quiet__late');
    const refused = (await broker.client.callTool({ name: 'quiet__late', arguments: {} }, { timeout: 15_000 })) as CallToolResult;
    expect(refused.isError).toBe(true);
    expect(refused._meta?.['mcp-broker/outcome']).toBe('upstream_error');
    expect(text(refused)).toContain('upstream "quiet" is not running: it is starting');

    const [started] = await waitFor(() => readNdjson<{ pid: number; event: string }>(join(broker!.dir, 'quiet.log')), 'the silent upstream to start');
    const before = broker.notifications.length;
    process.kill(started!.pid, 'SIGUSR1');
    await waitFor(() => broker!.notifications.slice(before).some((n) => n.method === 'notifications/tools/list_changed'), 'tools/list_changed', 20_000);
    expect((await broker.client.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(['e__echo', 'quiet__late']));
    expect(text((await broker.client.callTool({ name: 'quiet__late', arguments: {} })) as CallToolResult)).toBe('late');
  }, 60_000);

  it('over --transport http does not keep the socket from listening until it times out', async () => {
    // Its dial may take 60 s; the harness gives up on the "serving" line after 30 s (the previous build listened after the 60).
    const quiet = nodeServer(fixture('held-start.mjs'), { era: 'legacy', connectTimeoutMs: 60_000 });
    http = await startHttpBroker({ servers: { e: nodeServer(fixture('echo.mjs')), quiet }, extra: { broker: { startGraceMs: 1500 } } });
    const { client, close } = await connectHttp(http.url, 'streamable');
    try {
      expect(text((await client.callTool({ name: 'e__echo', arguments: { text: 'over http' } })) as CallToolResult)).toBe('over http');
      const refused = (await client.callTool({ name: 'quiet__late', arguments: {} })) as CallToolResult;
      expect(refused._meta?.['mcp-broker/outcome']).toBe('upstream_error');
    } finally {
      await close();
    }
  }, 60_000);
});
