/**
 * Found by a review hunting for paths around the policy: a call approved after a wait (parked in
 * the approval inbox, or a human asked through elicitation) ran on the verdict taken before the
 * wait, so a `deny` a config reload added meanwhile did not stop it (README "Approvals": "a deny
 * added meanwhile still denies"). It is judged again after the approval now. And resource rules
 * covered neither names starting with `.` nor URIs with `..` or percent-encoded segments.
 * Through the real CLI over stdio, with the reload read from the file as a user would edit it.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { callsOf } from './broker-support.js';
import { fixture, nodeServer, startBroker, waitFor, type StartedBroker } from './helpers.js';
import { startHttpBroker, type HttpBroker } from '../transports/harness.js';

const tmp = mkdtempSync(join(tmpdir(), 'mcp-broker-judged-again-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** What the primitives fixture logged of one kind (`read`, `get`). */
const logged = (log: string, event: string): Array<{ event: string; uri?: string }> =>
  existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((e) => e.event === event) : [];

const outcome = (r: unknown) => (r as CallToolResult)._meta?.['mcp-broker/outcome'];
const text = (r: unknown) => ((r as CallToolResult).content as Array<{ text?: string }>).map((c) => c.text ?? '').join(' ');

/** Rewrites the policy in the broker's servers.json and waits for the reload. */
async function reloadPolicy(broker: StartedBroker, policy: Record<string, unknown>): Promise<void> {
  const path = join(broker.dir, 'servers.json');
  const seen = broker.stderr().split('config reloaded').length;
  writeFileSync(path, JSON.stringify({ ...JSON.parse(readFileSync(path, 'utf8')), policy }, null, 2));
  await waitFor(() => broker.stderr().split('config reloaded').length > seen, 'config reloaded', 20_000, 50);
}

/** Answers the broker's approval question (elicitation) with accept once `answer()` is called; `wasAsked` resolves when it is asked. */
function acceptWhenTold(broker: StartedBroker): { wasAsked: Promise<void>; answer: () => void } {
  let asked!: () => void;
  const wasAsked = new Promise<void>((resolve) => (asked = resolve));
  let answer!: () => void;
  const answered = new Promise<void>((resolve) => (answer = resolve));
  broker.client.setRequestHandler('elicitation/create', async () => {
    asked();
    await answered;
    return { action: 'accept', content: {} };
  });
  return { wasAsked, answer };
}

describe('a deny added by a reload while a call waits for approval', () => {
  let broker: StartedBroker | undefined;
  afterEach(async () => broker?.close());

  it('parked in the inbox, then approved: denied, and it never reached the upstream', async () => {
    const log = join(tmp, 'park.log');
    broker = await startBroker({
      servers: { e: nodeServer(fixture('echo.mjs'), { inheritEnv: ['FIXTURE_LOG'] }) },
      env: { FIXTURE_LOG: log },
      extra: { policy: { askMode: 'park', rules: [{ tools: ['e__echo'], action: 'ask' }] } },
    });
    const client = broker.client;
    const pending = client.callTool({ name: 'e__echo', arguments: { text: 'ran-after-deny' } }, { timeout: 60_000 });
    const id = await waitFor(async () => {
      const listed = (await client.callTool({ name: 'broker__approvals_list', arguments: {} })) as CallToolResult;
      return (listed.structuredContent as { approvals?: Array<{ id: string }> } | undefined)?.approvals?.[0]?.id;
    }, 'the call parked', 10_000, 50);
    await reloadPolicy(broker, { askMode: 'park', rules: [{ tools: ['e__echo'], action: 'deny' }] });

    expect(outcome(await client.callTool({ name: 'broker__approvals_decide', arguments: { id, approve: true } }))).toBe('ok');
    const answer = await pending;
    expect(outcome(answer)).toBe('denied');
    expect(text(answer)).toContain('judged again after the approval');
    expect(callsOf(log, 'echo')).toBe(0);
    const records = (await broker.records()).filter((r) => r.name === 'e__echo');
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ outcome: 'denied', status: 403 });
  });

  it('asked through elicitation, then accepted: denied, and it never reached the upstream', async () => {
    const log = join(tmp, 'elicit.log');
    broker = await startBroker({
      servers: { e: nodeServer(fixture('echo.mjs'), { inheritEnv: ['FIXTURE_LOG'] }) },
      env: { FIXTURE_LOG: log },
      extra: { policy: { rules: [{ tools: ['e__echo'], action: 'ask' }] } },
      capabilities: { elicitation: {} },
    });
    const b = broker;
    const { wasAsked, answer } = acceptWhenTold(b);
    const pending = b.client.callTool({ name: 'e__echo', arguments: { text: 'ran-after-deny' } }, { timeout: 60_000 });
    await wasAsked;
    await reloadPolicy(b, { rules: [{ tools: ['e__echo'], action: 'deny' }] });
    answer();
    const result = await pending;
    expect(outcome(result)).toBe('denied');
    expect(callsOf(log, 'echo')).toBe(0);
  });

  it('a prompt asked about through elicitation, then accepted: refused, the upstream never asked', async () => {
    const log = join(tmp, 'prompt.log');
    broker = await startBroker({
      servers: { prims: nodeServer(fixture('primitives.mjs'), { inheritEnv: ['FIXTURE_LOG'] }) },
      env: { FIXTURE_LOG: log },
      extra: { policy: { rules: [{ prompts: ['prims__greet'], action: 'ask' }] } },
      capabilities: { elicitation: {} },
    });
    const b = broker;
    const { wasAsked, answer } = acceptWhenTold(b);
    const pending = b.client.getPrompt({ name: 'prims__greet', arguments: { who: 'ada' } }).then(
      () => 'served',
      (e: Error) => e.message,
    );
    await wasAsked;
    await reloadPolicy(b, { rules: [{ prompts: ['prims__greet'], action: 'deny' }] });
    answer();
    expect(await pending).toMatch(/^.*denied.*judged again after the approval/);
    expect(logged(log, 'get')).toHaveLength(0);
  });
});

describe('resource rules cover every spelling of a URI under them', () => {
  let broker: StartedBroker | undefined;
  afterAll(async () => broker?.close());

  it('names starting with ".", ".." segments and percent-encoded names under a denied tree are refused and never read', async () => {
    const log = join(tmp, 'dots.log');
    broker = await startBroker({
      servers: { prims: nodeServer(fixture('primitives.mjs'), { inheritEnv: ['FIXTURE_LOG'] }) },
      env: { FIXTURE_LOG: log },
      extra: { policy: { rules: [{ resources: ['prims://item/**'], action: 'deny' }] } },
    });
    const read = (uri: string) =>
      broker!.client.readResource({ uri }).then(
        () => 'served',
        (e: Error) => e.message,
      );
    for (const uri of ['prims://item/1', 'prims://item/.secret', 'prims://item/a/.git/config', 'prims://item/%2esecret', 'prims://item/%31']) {
      expect(await read(uri), uri).toMatch(/denied/);
    }
    // Where a ".." leads depends on the upstream: refused while rules judge resources.
    for (const uri of ['prims://item/../item/1', 'prims://doc/../item/1', 'prims://item/%2e%2e/x', 'prims://other/./x']) {
      expect(await read(uri), uri).toMatch(/denied.*"\." or "\.\." path segments/);
    }
    expect(await read('prims://doc')).toBe('served');
    expect(logged(log, 'read').map((e) => e.uri)).toEqual(['prims://doc']);
  });
});

describe('a deny added by a reload after a resources/subscribe', () => {
  let broker: StartedBroker | undefined;
  afterEach(async () => broker?.close());

  it('the subscription is judged again at each update: none reaches the client once the resource is denied (they kept coming)', async () => {
    broker = await startBroker({ servers: { e: nodeServer(fixture('echo.mjs')) } });
    const b = broker;
    await b.client.setLoggingLevel('info');
    await b.client.subscribeResource({ uri: 'fixture://a' });
    const count = (method: string) => b.notifications.filter((n) => n.method === method).length;
    const updates = () => count('notifications/resources/updated');
    await b.client.callTool({ name: 'e__emit', arguments: {} });
    await waitFor(() => updates() === 1 && count('notifications/message') === 1, 'the update and log before the reload');
    await reloadPolicy(b, { rules: [{ resources: ['fixture://a'], action: 'deny' }] });
    await b.client.callTool({ name: 'e__emit', arguments: {} });
    // The emit's log message follows its resources/updated: once the log is here, no update is still coming.
    await waitFor(() => count('notifications/message') === 2, 'the log after the reload');
    expect(updates()).toBe(1);
  });
});

describe('the upstream subscription of a resource a reload denies to every subscriber', () => {
  let broker: StartedBroker | undefined;
  afterEach(async () => broker?.close());

  it('is dropped (resources/unsubscribe) and taken again when a later reload allows it; the session kept its subscription (the upstream one stayed open)', async () => {
    const log = join(tmp, 'legacy-subscription.log');
    broker = await startBroker({ servers: { e: nodeServer(fixture('echo.mjs'), { inheritEnv: ['FIXTURE_LOG'] }) }, env: { FIXTURE_LOG: log } });
    const b = broker;
    const events = () => logged(log, 'subscribe').concat(logged(log, 'unsubscribe')).length;
    const sequence = () => (existsSync(log) ? readFileSync(log, 'utf8') : '').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { event: string; uri?: string }).filter((e) => e.event === 'subscribe' || e.event === 'unsubscribe').map((e) => `${e.event} ${e.uri}`);
    await b.client.subscribeResource({ uri: 'fixture://a' });
    await waitFor(() => events() === 1, 'the upstream subscription');
    await reloadPolicy(b, { rules: [{ resources: ['fixture://a'], action: 'deny' }] });
    await waitFor(() => events() === 2, 'the upstream unsubscription', 10_000, 50);
    expect(sequence()).toEqual(['subscribe fixture://a', 'unsubscribe fixture://a']);
    await reloadPolicy(b, { rules: [] });
    await waitFor(() => events() === 3, 'the upstream subscription again', 10_000, 50);
    expect(sequence()).toEqual(['subscribe fixture://a', 'unsubscribe fixture://a', 'subscribe fixture://a']);
    // Still the session's: its update comes through again, and its unsubscribe lets go upstream once.
    const updates = () => b.notifications.filter((n) => n.method === 'notifications/resources/updated').length;
    await b.client.callTool({ name: 'e__emit', arguments: {} });
    await waitFor(() => updates() === 1, 'the update after the second reload');
    await b.client.unsubscribeResource({ uri: 'fixture://a' });
    await waitFor(() => events() === 4, 'the last unsubscription');
    expect(sequence().at(-1)).toBe('unsubscribe fixture://a');
  }, 60_000);
});

describe('a deny added by a reload after a 2026-07-28 listen over Streamable HTTP', () => {
  const TOKENS = { ALICE_TOKEN: 'alice-listen-token-0123456789', BOB_TOKEN: 'bob-listen-token-01234567890' };
  let broker: HttpBroker | undefined;
  const clients: Client[] = [];
  afterEach(async () => {
    for (const client of clients.splice(0)) await client.close().catch(() => undefined);
    await broker?.close();
  });

  /** A modern client of `token` listening for `uris`; `updates` are the URIs its stream carried, in order. */
  async function listener(url: string, token: string, uris: string[]): Promise<{ client: Client; updates: string[] }> {
    const client = new Client({ name: 'listen-judged', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    clients.push(client);
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }), { timeout: 30_000 });
    expect(client.getProtocolEra()).toBe('modern');
    const updates: string[] = [];
    client.setNotificationHandler('notifications/resources/updated', async (n) => void updates.push(n.params.uri));
    const subscription = await client.listen({ resourceSubscriptions: uris });
    expect(subscription.honoredFilter).toEqual({ resourceSubscriptions: uris });
    return { client, updates };
  }

  it("the listen is judged again at each update: none for the denied resource reaches that principal's stream; other principals and resources keep theirs (they kept coming)", async () => {
    const log = join(tmp, 'listen.log');
    broker = await startHttpBroker({
      servers: { m: nodeServer(fixture('modern-resources.mjs'), { inheritEnv: ['FIXTURE_LOG'] }) },
      extra: { principals: { alice: { token: '${env:ALICE_TOKEN}' }, bob: { token: '${env:BOB_TOKEN}' } } },
      env: { ...TOKENS, FIXTURE_LOG: log },
    });
    const b = broker;
    const alice = await listener(b.url, TOKENS.ALICE_TOKEN, ['note://a', 'note://b']);
    const bob = await listener(b.url, TOKENS.BOB_TOKEN, ['note://a', 'note://b']);
    const upstreamListens = () => (existsSync(log) ? readFileSync(log, 'utf8') : '').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { filter?: { resourceSubscriptions?: string[] } });
    await waitFor(() => upstreamListens().some((e) => e.filter?.resourceSubscriptions?.length === 2), 'the upstream listen naming both notes');
    await alice.client.callTool({ name: 'm__touch', arguments: { uri: 'note://a' } });
    await waitFor(() => alice.updates.length === 1 && bob.updates.length === 1, 'the update of note://a on both streams');

    const path = join(b.dir, 'servers.json');
    const seen = b.stderr().split('config reloaded').length;
    const policy = { rules: [{ resources: ['note://a'], principals: ['alice'], action: 'deny' }] };
    writeFileSync(path, JSON.stringify({ ...JSON.parse(readFileSync(path, 'utf8')), policy }, null, 2));
    await waitFor(() => b.stderr().split('config reloaded').length > seen, 'config reloaded', 20_000, 50);

    await bob.client.callTool({ name: 'm__touch', arguments: { uri: 'note://a' } });
    await bob.client.callTool({ name: 'm__touch', arguments: { uri: 'note://b' } });
    // In order on each stream: an update of note://a would come before note://b's.
    await waitFor(() => alice.updates.includes('note://b') && bob.updates.includes('note://b'), 'the update of note://b on both streams');
    expect(alice.updates).toEqual(['note://a', 'note://b']);
    expect(bob.updates).toEqual(['note://a', 'note://a', 'note://b']);
  }, 60_000);

  it("the broker's upstream listen drops a resource once no listening principal may have it, and names it again when a later reload allows it (it stayed subscribed upstream)", async () => {
    const log = join(tmp, 'listen-upstream.log');
    broker = await startHttpBroker({
      servers: { m: nodeServer(fixture('modern-resources.mjs'), { inheritEnv: ['FIXTURE_LOG'] }) },
      extra: { principals: { alice: { token: '${env:ALICE_TOKEN}' }, bob: { token: '${env:BOB_TOKEN}' } } },
      env: { ...TOKENS, FIXTURE_LOG: log },
    });
    const b = broker;
    const alice = await listener(b.url, TOKENS.ALICE_TOKEN, ['note://a', 'note://b']);
    await listener(b.url, TOKENS.BOB_TOKEN, ['note://b']);
    /** The resources the broker's newest upstream listen names, sorted. */
    const upstreamNames = () => {
      const listens = (existsSync(log) ? readFileSync(log, 'utf8') : '').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { method?: string; filter?: { resourceSubscriptions?: string[] } }).filter((e) => e.method === 'subscriptions/listen' && e.filter?.resourceSubscriptions);
      return [...(listens.at(-1)?.filter?.resourceSubscriptions ?? [])].sort().join(',');
    };
    await waitFor(() => upstreamNames() === 'note://a,note://b', 'the upstream listen naming both notes');

    const reload = async (policy: Record<string, unknown>) => {
      const path = join(b.dir, 'servers.json');
      const seen = b.stderr().split('config reloaded').length;
      writeFileSync(path, JSON.stringify({ ...JSON.parse(readFileSync(path, 'utf8')), policy }, null, 2));
      await waitFor(() => b.stderr().split('config reloaded').length > seen, 'config reloaded', 20_000, 50);
    };
    // Only alice listens for note://a: denied to her, nobody may have it.
    await reload({ rules: [{ resources: ['note://a'], principals: ['alice'], action: 'deny' }] });
    await waitFor(() => upstreamNames() === 'note://b', 'the upstream listen without note://a', 10_000, 50);
    await reload({ rules: [] });
    await waitFor(() => upstreamNames() === 'note://a,note://b', 'the upstream listen naming note://a again', 10_000, 50);
    // And alice's open listen gets its updates again.
    await alice.client.callTool({ name: 'm__touch', arguments: { uri: 'note://a' } });
    await waitFor(() => alice.updates.includes('note://a'), 'the update of note://a after the second reload');
  }, 60_000);
});
