/**
 * The wire, on raw pipes (no SDK client in between): exact progress tokens (F02), cancellation
 * reaching exactly the upstream that had the call (F03), duplicate request ids (F04), and
 * every byte on the CLI's stdout being JSON-RPC at `--log-level debug` (F07a).
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, readNdjson, spawnRawBroker, waitFor, type RawBroker } from './helpers.js';

type Msg = Record<string, any>;
interface FixtureEvent {
  event: string;
  tool?: string;
  requestId?: number | string;
  progressToken?: unknown;
}

let b: RawBroker;
const log = (name: string) => readNdjson<FixtureEvent>(join(b.dir, `${name}.log`));

beforeAll(async () => {
  b = spawnRawBroker({
    servers: {
      u1: nodeServer(fixture('echo.mjs'), { env: { FIXTURE_LOG: '${configDir}/u1.log', FIXTURE_NAME: 'u1' } }),
      u2: nodeServer(fixture('echo.mjs'), { env: { FIXTURE_LOG: '${configDir}/u2.log', FIXTURE_NAME: 'u2' } }),
      noisy: nodeServer(fixture('noisy.mjs')),
    },
    args: ['--log-level', 'debug'],
  });
  const init = await b.initialize();
  expect(init.result).toBeDefined();
});

afterAll(async () => {
  await b?.close();
});

let nextId = 1000;
const call = (name: string, args: object, meta?: object) =>
  b.request(nextId++, 'tools/call', { name, arguments: args, ...(meta ? { _meta: meta } : {}) });

describe('raw JSON-RPC on the CLI stdio', () => {
  it('F02: the client token is mapped both ways; three non-decreasing progress updates carry it', async () => {
    const id = nextId++;
    const from = b.messages.length;
    const res = await b.request(id, 'tools/call', { name: 'u1__echo', arguments: { text: 'p' }, _meta: { progressToken: 'p-1' } });
    const progress = b.messages.slice(from).filter((m) => m.method === 'notifications/progress') as Msg[];
    expect(progress.map((m) => m.params.progressToken)).toEqual(['p-1', 'p-1', 'p-1']);
    expect(progress.map((m) => m.params.progress)).toEqual([1, 2, 3]);
    // All progress precedes the response.
    expect(b.messages.indexOf(progress[2]!)).toBeLessThan(b.messages.indexOf(res));
    // The upstream saw a token (the broker's own), not nothing.
    const seen = (res as Msg).result._meta.fixture;
    expect(seen.progressToken).not.toBeNull();

    // A numeric token stays numeric.
    const from2 = b.messages.length;
    await b.request(nextId++, 'tools/call', { name: 'u1__echo', arguments: { text: 'n' }, _meta: { progressToken: 7 } });
    const numeric = b.messages.slice(from2).filter((m) => m.method === 'notifications/progress') as Msg[];
    expect(numeric.length).toBe(3);
    for (const m of numeric) expect(m.params.progressToken).toBe(7);

    // No token, no progress.
    const from3 = b.messages.length;
    const plain = await call('u1__echo', { text: 'none' });
    expect((plain as Msg).result._meta.fixture.progressToken).toBeNull();
    expect(b.messages.slice(from3).filter((m) => m.method === 'notifications/progress')).toEqual([]);
  });

  it('F03: a cancel reaches exactly the upstream request it caused; the other upstream gets nothing; no late response', async () => {
    const u2Before = log('u2').length;
    b.send({ jsonrpc: '2.0', id: 101, method: 'tools/call', params: { name: 'u1__slow', arguments: { ms: 20_000 } } });
    const started = await waitFor(() => log('u1').find((e) => e.event === 'call' && e.tool === 'slow'), 'u1 to start slow');
    const fast = await b.request(102, 'tools/call', { name: 'u2__echo', arguments: { text: 'fast' } });
    expect((fast as Msg).result.content[0].text).toBe('fast');
    const sentAt = Date.now();
    b.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 101, reason: 'user pressed stop' } });
    const cancelled = await waitFor(() => log('u1').find((e) => e.event === 'cancelled'), 'u1 to see the cancel', 10_000);
    expect(Date.now() - sentAt).toBeLessThan(5_000);
    expect(cancelled.requestId).toBe(started.requestId);
    expect(cancelled.tool).toBe('slow');
    // U2 had the fast call, never a cancel.
    const u2 = log('u2').slice(u2Before);
    expect(u2.some((e) => e.event === 'call')).toBe(true);
    expect(u2.some((e) => e.event === 'cancelled')).toBe(false);
    // The record says cancelled; the client never gets a response for 101.
    const record = await waitFor(() => readNdjson(b.recordsPath).find((r) => r.name === 'u1__slow' && r.outcome === 'cancelled'), 'cancelled record');
    expect(record.status).toBe(499);
    await new Promise((r) => setTimeout(r, 500));
    expect(b.messages.filter((m) => m.id === 101)).toEqual([]);
  });

  it('F04: the same id twice in flight on one session is refused, never cross-wired; 1 and "1" stay distinct', async () => {
    const from = b.messages.length;
    const recordsBefore = readNdjson(b.recordsPath).length;
    b.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'u1__echo', arguments: { text: 'A', delayMs: 400 } } });
    b.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'u1__echo', arguments: { text: 'B' } } });
    const answer = await waitFor(() => b.messages.slice(from).find((m) => m.id === 1 && 'result' in m), 'the answer to id 1');
    expect((answer as Msg).result.content[0].text).toBe('A');
    await new Promise((r) => setTimeout(r, 600));
    const withId1 = b.messages.slice(from).filter((m) => m.id === 1) as Msg[];
    expect(withId1.length).toBe(2);
    const refusal = withId1.find((m) => 'error' in m)!;
    expect(refusal.error.code).toBe(-32600);
    expect(JSON.stringify(withId1)).not.toContain('"B"');
    // Only the first was dispatched.
    expect(readNdjson(b.recordsPath).length).toBe(recordsBefore + 1);

    const from2 = b.messages.length;
    b.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'u1__echo', arguments: { text: 'numeric', delayMs: 300 } } });
    b.send({ jsonrpc: '2.0', id: '1', method: 'tools/call', params: { name: 'u1__echo', arguments: { text: 'string' } } });
    const num = await waitFor(() => b.messages.slice(from2).find((m) => m.id === 1), 'numeric id 1');
    const str = await waitFor(() => b.messages.slice(from2).find((m) => m.id === '1'), 'string id "1"');
    expect((num as Msg).result.content[0].text).toBe('numeric');
    expect((str as Msg).result.content[0].text).toBe('string');
  });

  it('F07: at --log-level debug every byte on stdout is a JSON-RPC message', async () => {
    // Drive every kind of traffic, including upstream noise, a bad line and errors.
    await b.request(nextId++, 'tools/list');
    await b.request(nextId++, 'resources/list');
    await b.request(nextId++, 'resources/templates/list');
    await b.request(nextId++, 'prompts/list');
    await b.request(nextId++, 'prompts/get', { name: 'u1__greet', arguments: { name: 'x' } });
    await b.request(nextId++, 'resources/read', { uri: 'fixture://a' });
    await b.request(nextId++, 'logging/setLevel', { level: 'debug' });
    await b.request(nextId++, 'resources/subscribe', { uri: 'fixture://a' });
    await b.request(nextId++, 'ping');
    await call('noisy__hi', {});
    await call('u1__emit', {});
    await call('u1__fail', {});
    await call('nope__nothing', {});
    b.child.stdin!.write('this is not json\n');
    await b.waitForMessage((m) => m.id === null && 'error' in m, 'parse error answer');
    await new Promise((r) => setTimeout(r, 300));

    const raw = b.stdout().toString('utf8');
    expect(raw.endsWith('\n')).toBe(true);
    const lines = raw.split('\n').slice(0, -1);
    expect(lines.length).toBeGreaterThan(20);
    for (const line of lines) {
      let m: Msg;
      try {
        m = JSON.parse(line);
      } catch {
        throw new Error(`stdout line is not JSON: ${line.slice(0, 200)}`);
      }
      expect(m.jsonrpc, line.slice(0, 200)).toBe('2.0');
      const isRequestOrNotification = typeof m.method === 'string';
      const isResponse = 'id' in m && ('result' in m || 'error' in m);
      expect(isRequestOrNotification || isResponse, line.slice(0, 200)).toBe(true);
    }
    // The debug logs went to stderr instead.
    expect(b.stderr()).toContain('"level":20');
    expect(b.stderr()).toContain('Server started ✓');
  });
});
