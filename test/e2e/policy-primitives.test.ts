/**
 * End to end over HTTP through the real CLI: the policy covers every primitive of a server, not
 * only its tools. Two principals, bob denied `evil__*`, two fixture upstreams (`evil`, `good`)
 * serving a resource, a resource template, a prompt and completions; in every run mode
 * (`normal`, `read-only`, `locked`): bob's lists leave out evil's prompts and resources, and his
 * reads, gets, completions and subscriptions are refused (JSON-RPC -32003, outcome `denied`)
 * without reaching evil, each with a record of its `kind`; alice is served and recorded `ok`
 * (unless the mode is `locked`, which refuses everyone). And fail closed over stdio: a read whose
 * record cannot be written is refused `guard_error`.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProtocolError } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, spawnRawBroker, startBroker, waitFor, type StartedBroker } from './helpers.js';
import { connectHttp, startHttpBroker, type ConnectedClient, type HttpBroker } from '../transports/harness.js';

const TOKENS = { ALICE_TOKEN: 'alice-token-0123456789abcdef', BOB_TOKEN: 'bob-token-0123456789abcdef00' };
const tmp = mkdtempSync(join(tmpdir(), 'mcp-broker-prims-e2e-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Events the fixtures logged (read, get, complete, subscribe), per upstream. */
function events(log: string, server: string): Array<{ event: string }> {
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((e) => e.server === server);
}

/** Every judged request of one upstream, as [kind, run]. */
function requestsOf(client: ConnectedClient, server: string): Array<[string, () => Promise<unknown>]> {
  const c = client.client;
  return [
    ['resource', () => c.readResource({ uri: `${server}://doc` })],
    ['prompt', () => c.getPrompt({ name: `${server}__greet`, arguments: { who: 'ada' } })],
    ['completion', () => c.complete({ ref: { type: 'ref/prompt', name: `${server}__greet` }, argument: { name: 'who', value: 'a' } })],
    ['completion', () => c.complete({ ref: { type: 'ref/resource', uri: `${server}://item/{id}` }, argument: { name: 'id', value: '' } })],
    ['subscribe', () => c.subscribeResource({ uri: `${server}://doc` })],
  ];
}

async function refusal(run: () => Promise<unknown>): Promise<ProtocolError> {
  const err = await run().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProtocolError);
  return err as ProtocolError;
}

describe.each(['normal', 'read-only', 'locked'] as const)('run mode %s: a principal denied evil__* gets none of evil’s primitives', (mode) => {
  const log = join(tmp, `${mode}.log`);
  let broker: HttpBroker;
  let alice: ConnectedClient;
  let bob: ConnectedClient;

  beforeAll(async () => {
    const upstream = (name: string) => nodeServer(fixture('primitives.mjs'), { env: { FIXTURE_NAME: name, FIXTURE_LOG: log } });
    broker = await startHttpBroker({
      servers: { evil: upstream('evil'), good: upstream('good') },
      extra: {
        principals: { alice: { token: '${env:ALICE_TOKEN}' }, bob: { token: '${env:BOB_TOKEN}' } },
        policy: { mode, rules: [{ tools: ['evil__*'], principals: ['bob'], action: 'deny' }] },
      },
      env: TOKENS,
    });
    alice = await connectHttp(broker.url, 'streamable', { token: TOKENS.ALICE_TOKEN });
    bob = await connectHttp(broker.url, 'streamable', { token: TOKENS.BOB_TOKEN });
  }, 60_000);
  afterAll(async () => {
    await alice?.close();
    await bob?.close();
    await broker?.close();
  });

  it('lists leave out evil’s prompts, resources and templates for bob only', async () => {
    expect((await bob.client.listPrompts()).prompts.map((p) => p.name)).toEqual(['good__greet']);
    expect((await bob.client.listResources()).resources.map((r) => r.uri)).toEqual(['good://doc']);
    expect((await bob.client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate)).toEqual(['good://item/{id}']);
    expect((await alice.client.listPrompts()).prompts.map((p) => p.name)).toEqual(['evil__greet', 'good__greet']);
    expect((await alice.client.listResources()).resources.map((r) => r.uri)).toEqual(['evil://doc', 'good://doc']);
  });

  it('resources/read, prompts/get, completion/complete and resources/subscribe of evil are refused for bob, never reach evil, and are recorded', async () => {
    for (const [kind, run] of requestsOf(bob, 'evil')) {
      const err = await refusal(run);
      expect(err.code).toBe(-32003);
      expect(err.message).toContain('denied');
      const data = err.data as Record<string, string>;
      expect(data['mcp-broker/outcome']).toBe('denied');
      const record = broker.records().find((r) => r.callId === data['mcp-broker/callId']);
      expect(record).toMatchObject({ principal: 'bob', kind, outcome: 'denied', status: 403, attempts: 0 });
    }
    expect(events(log, 'evil')).toEqual([]);
  });

  it.runIf(mode === 'normal')('over legacy SSE too: bob is refused evil’s primitives, and his lists leave them out', async () => {
    const sse = await connectHttp(broker.url, 'sse', { token: TOKENS.BOB_TOKEN });
    try {
      expect((await sse.client.listPrompts()).prompts.map((p) => p.name)).toEqual(['good__greet']);
      for (const [, run] of requestsOf(sse, 'evil')) expect((await refusal(run)).code).toBe(-32003);
    } finally {
      await sse.close();
    }
    expect(events(log, 'evil')).toEqual([]);
  });

  it.runIf(mode !== 'locked')('alice is served evil’s primitives and bob good’s, each recorded ok with its kind', async () => {
    const read = (await alice.client.readResource({ uri: 'evil://doc' })).contents[0] as { text: string };
    expect(read.text).toBe('evil content of evil://doc');
    for (const [who, server] of [
      [alice, 'evil'],
      [bob, 'good'],
    ] as const) {
      for (const [, run] of requestsOf(who, server)) await run();
    }
    expect(events(log, 'evil').map((e) => e.event)).toEqual(['read', 'read', 'get', 'complete', 'complete', 'subscribe']);
    expect(events(log, 'good').map((e) => e.event)).toEqual(['read', 'get', 'complete', 'complete', 'subscribe']);
    const ok = broker.records().filter((r) => r.outcome === 'ok' && r.kind);
    const seen = ok.map((r) => `${r.principal} ${r.kind} ${r.subject}`);
    expect(seen).toEqual([
      'alice resource evil/evil://doc',
      'alice resource evil/evil://doc',
      'alice prompt evil/greet',
      'alice completion evil/greet',
      'alice completion evil/evil://item/{id}',
      'alice subscribe evil/evil://doc',
      'bob resource good/good://doc',
      'bob prompt good/greet',
      'bob completion good/greet',
      'bob completion good/good://item/{id}',
      'bob subscribe good/good://doc',
    ]);
    expect(ok.find((r) => r.kind === 'prompt' && r.principal === 'alice')).toMatchObject({ name: 'evil__greet', args: { who: 'ada' }, attempts: 1, status: 200 });
  });

  it.runIf(mode === 'locked')('locked refuses alice too, and nothing reaches an upstream', async () => {
    for (const server of ['evil', 'good']) {
      for (const [, run] of requestsOf(alice, server)) {
        const err = await refusal(run);
        expect(err.code).toBe(-32003);
        expect(err.message).toContain('run mode is locked');
      }
    }
    expect(events(log, 'evil')).toEqual([]);
    expect(events(log, 'good')).toEqual([]);
  });
});

describe('fail-closed record of a read', () => {
  const log = join(tmp, 'failclosed.log');
  const recordsDir = join(tmp, 'records-is-a-folder');
  let broker: StartedBroker;
  beforeAll(async () => {
    mkdirSync(recordsDir); // the records path names a folder, so every append fails
    broker = await startBroker({
      servers: { evil: nodeServer(fixture('primitives.mjs'), { env: { FIXTURE_NAME: 'evil', FIXTURE_LOG: log } }) },
      extra: { broker: { records: { path: recordsDir } } },
    });
  });
  afterAll(() => broker?.close());

  it('a resources/read or prompts/get whose record cannot be written is refused guard_error, its answer withheld', async () => {
    for (const run of [() => broker.client.readResource({ uri: 'evil://doc' }), () => broker.client.getPrompt({ name: 'evil__greet', arguments: { who: 'ada' } })]) {
      const err = await refusal(run);
      expect(err.code).toBe(-32603);
      expect((err.data as Record<string, string>)['mcp-broker/outcome']).toBe('guard_error');
      expect(err.message).not.toContain('content of');
    }
    expect(events(log, 'evil').map((e) => e.event)).toEqual(['read', 'get']); // they did reach the upstream
  });
});

describe('fail-closed record of a resources/subscribe', () => {
  it('refused guard_error, it holds nothing: once records can be written again, no update reaches the session (they did)', async () => {
    const records = join(tmp, 'subscribe-records');
    mkdirSync(records); // a folder at the records path: every append fails until it goes
    const b = await startBroker({ servers: { e: nodeServer(fixture('echo.mjs')) }, extra: { broker: { records: { path: records } } } });
    try {
      await b.client.setLoggingLevel('info');
      const err = await refusal(() => b.client.subscribeResource({ uri: 'fixture://a' }));
      expect((err.data as Record<string, string>)['mcp-broker/outcome']).toBe('guard_error');
      rmSync(records, { recursive: true });
      const count = (method: string) => b.notifications.filter((n) => n.method === method).length;
      await b.client.callTool({ name: 'e__emit', arguments: {} });
      // The emit's log message follows its resources/updated: once the log is here, no update is still coming.
      await waitFor(() => count('notifications/message') === 1, 'the log of the emit');
      expect(count('notifications/resources/updated')).toBe(0);
      expect(readFileSync(records, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l).name)).toEqual(['e__emit']);
    } finally {
      await b.close();
    }
  });
});

describe('a denied resource under another spelling of its URI (a file server reads them all as one file)', () => {
  it('scheme case, file://localhost, file:/, an empty segment, backslashes and dots, stray whitespace: each is refused denied, the file never read', async () => {
    const tree = join(tmp, 'spellings');
    mkdirSync(join(tree, 'public'), { recursive: true });
    mkdirSync(join(tree, 'secrets'), { recursive: true });
    writeFileSync(join(tree, 'public', 'a.txt'), 'public text');
    writeFileSync(join(tree, 'secrets', 'key.txt'), 'TOP-SECRET-FILE-CONTENT');
    const broker = spawnRawBroker({
      servers: { fs: nodeServer(fixture('file-resources.mjs'), { env: { FIXTURE_PUBLIC: join(tree, 'public', 'a.txt') } }) },
      extra: { policy: { rules: [{ resources: [`file://${tree}/secrets/**`], action: 'deny' }] } },
    });
    try {
      await broker.initialize();
      const read = (uri: string) => broker.request(`read-${uri}`, 'resources/read', { uri }, 10_000) as Promise<{ result?: { contents: { text: string }[] }; error?: { code: number } }>;
      expect((await read(`file://${tree}/public/a.txt`)).result?.contents[0]?.text).toBe('public text');
      const secret = `${tree}/secrets/key.txt`;
      for (const uri of [
        `file://${secret}`,
        `FILE://${secret}`,
        `file://localhost${secret}`,
        `file:${secret}`,
        `file://${tree}//secrets/key.txt`,
        `file://${tree}/public\\..\\secrets\\key.txt`,
        ` file://${secret}`,
        `file://${tree}/sec\trets/key.txt`,
      ]) {
        const answer = await read(uri);
        expect(answer.error?.code, JSON.stringify(uri)).toBe(-32003);
        expect(JSON.stringify(answer)).not.toContain('TOP-SECRET');
      }
    } finally {
      await broker.close();
    }
  });

  it('a query or fragment after a URI a rule names by itself or by its suffix: refused denied, the file never read (each was read through)', async () => {
    const tree = join(tmp, 'suffixes');
    mkdirSync(join(tree, 'public'), { recursive: true });
    mkdirSync(join(tree, 'secrets'), { recursive: true });
    writeFileSync(join(tree, 'public', 'a.txt'), 'public text');
    writeFileSync(join(tree, 'public', 'server.pem'), 'PEM-KEY-MATERIAL');
    writeFileSync(join(tree, 'secrets', 'key.txt'), 'TOP-SECRET-FILE-CONTENT');
    const secret = `${tree}/secrets/key.txt`;
    const broker = spawnRawBroker({
      servers: { fs: nodeServer(fixture('file-resources.mjs'), { env: { FIXTURE_PUBLIC: join(tree, 'public', 'a.txt') } }) },
      extra: { policy: { rules: [{ resources: [`file://${secret}`, 'file:///**/*.pem'], action: 'deny' }] } },
    });
    try {
      await broker.initialize();
      const read = (uri: string) => broker.request(`read-${uri}`, 'resources/read', { uri }, 10_000) as Promise<{ result?: { contents: { text: string }[] }; error?: { code: number } }>;
      expect((await read(`file://${tree}/public/a.txt?x`)).result?.contents[0]?.text).toBe('public text');
      // The fixture reads a URI with fileURLToPath(new URL(uri)), which drops a query and a fragment.
      for (const uri of [`file://${secret}`, `file://${secret}?x`, `file://${secret}#x`, `file://${secret}?`, `file://${tree}/public/server.pem?`, `file://${tree}/public/server.pem#k`]) {
        const answer = await read(uri);
        expect(answer.error?.code, JSON.stringify(uri)).toBe(-32003);
        expect(JSON.stringify(answer)).not.toMatch(/TOP-SECRET|PEM-KEY/);
      }
    } finally {
      await broker.close();
    }
  });
});
