/**
 * The spec's `basic/versioning.mdx`: every request carries its protocol revision, and the server
 * accepts or refuses each on its own (-32022 with the supported list). Over stdio the SDK's entry
 * checks the request that picks the era; the broker checks every later request of a modern
 * connection too (`unsupportedRevisionAnswer`, transports/era.ts), and serves on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { fixture, nodeServer, readNdjson, spawnRawBroker, type RawBroker } from './helpers.js';

const envelope = (revision: unknown) => ({
  _meta: { 'io.modelcontextprotocol/protocolVersion': revision, 'io.modelcontextprotocol/clientCapabilities': {} },
});

let raw: RawBroker | undefined;
afterEach(async () => {
  await raw?.close();
  raw = undefined;
});

describe('the protocol revision of each stdio request (modern)', () => {
  it('a later request naming a revision not served is refused -32022 with the supported list, and the connection serves on', async () => {
    raw = spawnRawBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) } });
    const first = await raw.request(1, 'tools/list', envelope('2026-07-28'));
    expect((first.result as { tools: Array<{ name: string }> }).tools.map((t) => t.name)).toContain('echo__echo');

    const unknown = await raw.request(2, 'tools/call', { name: 'echo__echo', arguments: { text: 'hi' }, ...envelope('1999-01-01') });
    expect(unknown.error).toEqual({ code: -32022, message: 'Unsupported protocol version: 1999-01-01', data: { supported: ['2026-07-28'], requested: '1999-01-01' } });
    // A legacy revision named in the modern envelope is not a modern one either (as the SDK answers a first request).
    const legacy = await raw.request(3, 'tools/list', envelope('2025-11-25'));
    expect(legacy.error).toMatchObject({ code: -32022, data: { supported: ['2026-07-28'], requested: '2025-11-25' } });

    const served = await raw.request(4, 'tools/call', { name: 'echo__echo', arguments: { text: 'still here' }, ...envelope('2026-07-28') });
    expect(JSON.stringify(served.result)).toContain('still here');
    // Nothing refused reached the broker path: the one call that ran is the one recorded.
    const calls = readNdjson(raw.recordsPath).filter((r) => r.name === 'echo__echo');
    expect(calls.map((r) => [r.outcome, r.args])).toEqual([['ok', { text: 'still here' }]]);
  });

  it('the first request naming a revision not served is refused by the entry the same way', async () => {
    raw = spawnRawBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) } });
    const first = await raw.request(1, 'tools/list', envelope('1999-01-01'));
    expect(first.error).toEqual({ code: -32022, message: 'Unsupported protocol version: 1999-01-01', data: { supported: ['2026-07-28'], requested: '1999-01-01' } });
  });

  it('a request that arrives with the opening one, before the era is picked, is refused the same way and never runs', async () => {
    raw = spawnRawBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) } });
    // One write: the entry queues the second line while it builds the modern instance.
    const line = (id: number, method: string, params: object) => JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n';
    raw.child.stdin!.write(
      line(1, 'tools/list', envelope('2026-07-28')) + line(2, 'tools/call', { name: 'echo__echo', arguments: { text: 'must not run' }, ...envelope('1999-01-01') }),
    );
    const refused = await raw.waitForMessage((m) => m.id === 2, 'the answer to request 2');
    expect(refused.error).toMatchObject({ code: -32022, data: { supported: ['2026-07-28'], requested: '1999-01-01' } });
    expect((await raw.waitForMessage((m) => m.id === 1, 'the answer to request 1')).result).toBeDefined();
    // A notification naming the same revision is not answered, and the connection serves on.
    raw.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 99, ...envelope('1999-01-01') } });
    const served = await raw.request(3, 'tools/call', { name: 'echo__echo', arguments: { text: 'runs' }, ...envelope('2026-07-28') });
    expect(JSON.stringify(served.result)).toContain('runs');
    expect(raw.messages.filter((m) => m.id === undefined || m.id === 99).filter((m) => 'error' in m)).toEqual([]);
    expect(readNdjson(raw.recordsPath).filter((r) => r.name === 'echo__echo').map((r) => r.args)).toEqual([{ text: 'runs' }]);
  });
});
