/**
 * The wire, on raw pipes (no SDK client in between): exact progress tokens (F02), cancellation
 * reaching exactly the upstream that had the call (F03), duplicate request ids (F04), and
 * every byte on the CLI's stdout being JSON-RPC at `--log-level debug` (F07a), malformed
 * requests answered (issue 17 §4) and a UTF-8 BOM at the start of either stream (issue 17 §1).
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

describe('issue 17 §4: malformed requests with a usable id got no answer', () => {
  const KNOWN = [
    'initialize', 'ping', 'tools/list', 'tools/call', 'resources/list', 'resources/templates/list', 'resources/read',
    'resources/subscribe', 'resources/unsubscribe', 'prompts/list', 'prompts/get', 'logging/setLevel', 'completion/complete',
    'tasks/get', 'tasks/result', 'tasks/list', 'tasks/cancel',
  ];

  it('every known method with `params: 42` is answered -32602 with its id, and serving goes on', async () => {
    for (const method of KNOWN) {
      const id = `p42-${method}`;
      const res = (await b.request(id, method, 42 as never, 5_000)) as Msg;
      expect(res.error?.code, method).toBe(-32602);
      expect(res.id).toBe(id);
    }
    // Also params that are an array, a string, null (sent as written: `request` drops a falsy params).
    for (const params of [[1, 2], 'x', null]) {
      const id = `bad-${JSON.stringify(params)}`;
      b.send({ jsonrpc: '2.0', id, method: 'prompts/list', params });
      const res = (await b.waitForMessage((m) => m.id === id, `the answer to params ${JSON.stringify(params)}`, 5_000)) as Msg;
      expect(res.error?.code).toBe(-32602);
    }
    const alive = (await call('u1__echo', { text: 'still serving' })) as Msg;
    expect(alive.result.content[0].text).toBe('still serving');
  });

  it('wrong-typed params of a known method are -32602 naming the field, never its value; the SDK fallback is not reached', async () => {
    const cases: Array<[string, object, string]> = [
      ['tools/call', { name: 5 }, 'params.name'],
      ['tools/call', { name: 'u1__echo', arguments: 'secret-value-1' }, 'params.arguments'],
      ['tools/call', {}, 'params.name'],
      ['resources/read', {}, 'params.uri'],
      ['resources/subscribe', { uri: 7 }, 'params.uri'],
      ['prompts/get', { arguments: {} }, 'params.name'],
      ['logging/setLevel', { level: 'secret-value-2' }, 'params.level'],
      ['completion/complete', { argument: { name: 'a', value: 'b' } }, 'params.ref'],
      ['initialize', { protocolVersion: 5 }, 'params.protocolVersion'],
    ];
    for (const [method, params, field] of cases) {
      const id = `wt-${nextId++}`;
      const res = (await b.request(id, method, params, 5_000)) as Msg;
      expect(res.error?.code, `${method} ${JSON.stringify(params)}`).toBe(-32602);
      expect(res.error.message).toContain(method);
      expect(res.error.message).toContain(field);
      expect(res.error.message).not.toContain('secret-value');
    }
    const alive = (await call('u1__echo', { text: 'after wrong types' })) as Msg;
    expect(alive.result.content[0].text).toBe('after wrong types');
  });

  it('a message that is not a request shape is -32600, with its id when it has one', async () => {
    const answerTo = async (line: string, id: unknown) => {
      const from = b.messages.length;
      b.child.stdin!.write(line + '\n');
      return (await b.waitForMessage((m) => b.messages.indexOf(m) >= from && m.id === id && 'error' in m, `answer to ${line}`, 5_000)) as Msg;
    };
    expect((await answerTo('{"jsonrpc":"1.0","id":"v1","method":"ping"}', 'v1')).error.code).toBe(-32600);
    expect((await answerTo('{"jsonrpc":"2.0","id":"m5","method":5}', 'm5')).error.code).toBe(-32600);
    expect((await answerTo('{"jsonrpc":"2.0","id":1.5,"method":"ping"}', 1.5)).error.code).toBe(-32600);
    expect((await answerTo('{"jsonrpc":"2.0","id":"bare"}', 'bare')).error.code).toBe(-32600);
    expect((await answerTo('[42]', null)).error.code).toBe(-32600);
    // A batch holding null crashed the broker (a member read off null); an empty batch got nothing.
    expect((await answerTo('[null]', null)).error.code).toBe(-32600);
    expect((await answerTo('[]', null)).error.code).toBe(-32600);
    // A member beyond the four: the SDK dropped it unanswered.
    expect((await answerTo('{"jsonrpc":"2.0","id":"xm","method":"ping","extra":1}', 'xm')).error.code).toBe(-32600);
    const alive = (await b.request(nextId++, 'ping')) as Msg;
    expect(alive.result).toEqual({});
  });

  it("a _meta the SDK's request schema refuses (not an object, a fractional progress token, a related-task of the wrong shape) is -32602; the fast path ran the call", async () => {
    const cases: Array<[object, string]> = [
      [{ progressToken: 1.5 }, 'params._meta.progressToken'],
      [{ progressToken: 1e20 }, 'params._meta.progressToken'],
      [{ 'io.modelcontextprotocol/related-task': 5 }, 'related-task'],
    ];
    for (const [meta, field] of cases) {
      const id = `meta-${nextId++}`;
      const res = (await b.request(id, 'tools/call', { name: 'u1__echo', arguments: { text: 'meta' }, _meta: meta }, 5_000)) as Msg;
      expect(res.error?.code, JSON.stringify(meta)).toBe(-32602);
      expect(res.error.message).toContain(field);
    }
    b.send({ jsonrpc: '2.0', id: 'meta-null', method: 'tools/call', params: { name: 'u1__echo', arguments: { text: 'meta' }, _meta: null } });
    expect(((await b.waitForMessage((m) => m.id === 'meta-null', 'the answer to _meta: null', 5_000)) as Msg).error.code).toBe(-32602);
    expect(readNdjson<{ args?: { text?: string } }>(b.recordsPath).filter((r) => r.args?.text === 'meta')).toEqual([]);
  });

  it('an upstream that writes a batch holding no message ([null], [1], []) is skipped with a warning; the broker and that upstream keep serving', async () => {
    for (const line of ['[null]', '[1]', '[]']) {
      const res = (await call('noisy__say', { line })) as Msg;
      expect(res.result, line).toBeDefined();
    }
    const alive = (await call('noisy__hi', {})) as Msg;
    expect(alive.result.content[0].text).toBe('hi despite the noise');
  });
});

describe('a legacy request before initialize', () => {
  it('waited for a dial only initialize starts, unanswered until stdin closed: now refused at once (-32600), and the session goes on after initialize', async () => {
    const early = spawnRawBroker({ servers: { u1: nodeServer(fixture('echo.mjs')) } });
    try {
      for (const method of ['tools/call', 'tools/list']) {
        const res = (await early.request(`early-${method}`, method, method === 'tools/call' ? { name: 'u1__echo', arguments: { text: 'early' } } : {}, 5_000)) as Msg;
        expect(res.error?.code, method).toBe(-32600);
        expect(res.error.message).toContain('before initialize');
      }
      expect(((await early.request('early-ping', 'ping', undefined, 5_000)) as Msg).result).toEqual({});
      expect((await early.initialize()).result).toBeDefined();
      const res = (await early.request('after', 'tools/call', { name: 'u1__echo', arguments: { text: 'after' } })) as Msg;
      expect(res.result.content[0].text).toBe('after');
      expect(readNdjson<{ args?: { text?: string } }>(early.recordsPath).map((r) => r.args?.text)).toEqual(['after']);
    } finally {
      await early.close();
    }
  });
});

describe('issue 17 §1: a UTF-8 BOM at the start of a stdio stream made its first line noise', () => {
  let bb: RawBroker;
  afterAll(async () => bb?.close());

  it('an upstream whose first answer follows a BOM connects (its tools listed), and a client may send one before initialize', async () => {
    bb = spawnRawBroker({ servers: { bom: nodeServer(fixture('bom.mjs')) } });
    const init = { jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bom', version: '1' } } };
    // The client's BOM, split across two writes.
    bb.child.stdin!.write(Buffer.from([0xef, 0xbb]));
    await new Promise((r) => setTimeout(r, 50));
    bb.child.stdin!.write(Buffer.concat([Buffer.from([0xbf]), Buffer.from(JSON.stringify(init) + '\n')]));
    const answer = (await bb.waitForMessage((m) => m.id === 'init', 'the answer to initialize', 20_000)) as Msg;
    expect(answer.result.serverInfo.name).toBe('mcp-broker');
    bb.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const list = (await bb.request(2, 'tools/list')) as Msg;
    expect(list.result.tools.map((t: Msg) => t.name)).toContain('bom__hi');
    const res = (await bb.request(3, 'tools/call', { name: 'bom__hi', arguments: {} })) as Msg;
    expect(res.result.content[0].text).toBe('hi past the BOM');
    expect(bb.messages.filter((m) => (m as Msg).error?.code === -32700)).toEqual([]);
    expect(bb.stderr()).not.toContain('non-JSON line');
  }, 40_000);
});

describe('a malformed 2026-07-28 tools/call on stdio', () => {
  it("is -32602 naming the field in one line, as a 2025 one's, not the SDK's multi-line schema issues; serving goes on", async () => {
    const modern = spawnRawBroker({ servers: { u1: nodeServer(fixture('echo.mjs')) } });
    const _meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientInfo': { name: 'm', version: '1' }, 'io.modelcontextprotocol/clientCapabilities': {} };
    try {
      expect(((await modern.request('d', 'server/discover', { _meta }, 20_000)) as Msg).result).toBeDefined();
      const cases: Array<[object, string]> = [
        [{ name: 5 }, 'params.name'],
        [{ arguments: {} }, 'params.name'],
        [{ name: 'u1__echo', arguments: ['secret-value-3'] }, 'params.arguments'],
      ];
      for (const [params, field] of cases) {
        const res = (await modern.request(`m-${field}-${JSON.stringify(params)}`, 'tools/call', { ...params, _meta }, 5_000)) as Msg;
        expect(res.error).toEqual({ code: -32602, message: `Invalid params for tools/call: ${field} is missing or of the wrong type` });
      }
      const alive = (await modern.request('alive', 'tools/call', { name: 'u1__echo', arguments: { text: 'served' }, _meta }, 10_000)) as Msg;
      expect(alive.result.content[0].text).toBe('served');
    } finally {
      await modern.close();
    }
  });
});
