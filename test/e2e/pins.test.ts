/**
 * Tool pinning end to end through the real CLI (issue 12 item 7): an upstream that changes one
 * model-visible field of a tool at run time (test/fixtures/rug-pull.mjs). The changed tool is
 * listed as it was pinned and refused `unregistered` until `mcp-broker approve`; over HTTP, an
 * approval for one principal re-pins the tool for that principal only.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult, Client, Tool } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, startBroker, waitFor, type SeenNotification, type StartedBroker } from './helpers.js';
import { callsOf, configOf, runCli } from './broker-support.js';
import { connectHttp, http, startHttpBroker, type ConnectedClient, type HttpBroker } from '../transports/harness.js';

const tmp = mkdtempSync(join(tmpdir(), 'mcp-broker-pins-e2e-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const rugPull = () => nodeServer(fixture('rug-pull.mjs'), { inheritEnv: ['FIXTURE_LOG'] });

async function listed(client: Client, name = 'rug__probe'): Promise<Tool | undefined> {
  return (await client.listTools()).tools.find((t) => t.name === name);
}

async function call(client: Client, name: string, args: Record<string, unknown> = {}) {
  const result = (await client.callTool({ name, arguments: args }, { timeout: 20_000 })) as CallToolResult;
  return { outcome: result._meta?.['mcp-broker/outcome'] as string, text: (result.content[0] as { text?: string } | undefined)?.text ?? '' };
}

/**
 * Pulls the rug on `field` and waits until the broker rebuilt its roster: the session's
 * tools/list_changed (stdio), or else the probe refused for `client` (polled; a refusal spends no budget).
 */
async function pull(client: Client, field: string, notifications?: readonly SeenNotification[]): Promise<string> {
  const listChanged = () => (notifications ?? []).filter((n) => n.method === 'notifications/tools/list_changed').length;
  const seen = listChanged();
  const { outcome, text } = await call(client, 'rug__pull', { field });
  expect(outcome).toBe('ok');
  if (notifications) await waitFor(() => listChanged() > seen, `tools/list_changed after a change of ${field}`);
  else await waitFor(async () => (await call(client, 'rug__probe', { text: 'waiting' })).outcome === 'unregistered', `rug__probe refused after a change of ${field}`, 10_000, 100);
  return text;
}

describe('a changed tool over stdio', () => {
  const log = join(tmp, 'stdio.log');
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({ servers: { rug: rugPull() }, env: { FIXTURE_LOG: log } });
    // The broker answers before its upstreams are up; a tool is pinned (known to `approve`) once listed.
    await waitFor(() => listed(broker.client), 'rug__probe listed');
  });
  afterAll(() => broker?.close());

  it.each(['description', 'title', 'annotations', '_meta', 'icons'])(
    'a change of %s was listed to the model (or not detected): now listed as pinned and refused until approved',
    async (field) => {
      // Each case starts from an approved probe, whatever an earlier case left.
      expect((await runCli(['approve', 'rug__probe', '--config', configOf(broker)])).code).toBe(0);
      const before = await listed(broker.client);
      expect(before).toBeDefined();
      expect((await call(broker.client, 'rug__probe', { text: 'before' })).outcome).toBe('ok');
      const mark = await pull(broker.client, field, broker.notifications);

      // Listed exactly as pinned: nothing of the new definition reaches the model.
      expect(await listed(broker.client)).toEqual(before);
      expect(JSON.stringify((await broker.client.listTools()).tools)).not.toContain(mark);
      const calls = callsOf(log, 'probe');
      const refused = await call(broker.client, 'rug__probe', { text: 'after' });
      expect(refused.outcome).toBe('unregistered');
      expect(refused.text).toContain('changed');
      expect(callsOf(log, 'probe')).toBe(calls);

      const approved = await runCli(['approve', 'rug__probe', '--config', configOf(broker)]);
      expect(approved.code).toBe(0);
      expect(approved.stdout).toContain('re-pinned rug__probe');
      expect(JSON.stringify(await listed(broker.client))).toContain(mark);
      expect((await call(broker.client, 'rug__probe', { text: 'approved' })).outcome).toBe('ok');
      expect(callsOf(log, 'probe')).toBe(calls + 1);
    },
  );
});

describe('the approve hint runs as printed (issue 18 §6)', () => {
  const log = join(tmp, 'hint.log');
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({ servers: { rug: rugPull() }, env: { FIXTURE_LOG: log } });
  });
  afterAll(() => broker?.close());

  it('a changed tool\'s refusal names the full approve command (this CLI, this config); run as printed in a shell, the tool runs again', async () => {
    expect((await call(broker.client, 'rug__probe', { text: 'before' })).outcome).toBe('ok');
    await pull(broker.client, 'description', broker.notifications);
    const refused = await call(broker.client, 'rug__probe', { text: 'after' });
    expect(refused.outcome).toBe('unregistered');
    const command = /`([^`]+)`/.exec(refused.text)?.[1];
    expect(command).toContain(`node ${CLI} approve rug__probe --config ${configOf(broker)} --principal local`);
    // From another folder, as a person would paste it.
    const ran = spawnSync('sh', ['-c', command!], { cwd: tmpdir(), encoding: 'utf8' });
    expect(ran.status).toBe(0);
    expect(ran.stdout).toContain('re-pinned rug__probe');
    expect((await call(broker.client, 'rug__probe', { text: 'approved' })).outcome).toBe('ok');
  });
});

describe('pins per principal over HTTP', () => {
  const log = join(tmp, 'http.log');
  const TOKENS = { ALICE_TOKEN: 'alice-token-0123456789abcdef', BOB_TOKEN: 'bob-token-0123456789abcdef00' };
  let broker: HttpBroker;
  let alice: ConnectedClient;
  let bob: ConnectedClient;
  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { rug: rugPull() },
      extra: { principals: { alice: { token: '${env:ALICE_TOKEN}' }, bob: { token: '${env:BOB_TOKEN}' } } },
      env: { ...TOKENS, FIXTURE_LOG: log },
    });
    alice = await connectHttp(broker.url, 'streamable', { token: TOKENS.ALICE_TOKEN });
    bob = await connectHttp(broker.url, 'streamable', { token: TOKENS.BOB_TOKEN });
    await waitFor(() => listed(alice.client), 'rug__probe listed');
  });
  afterAll(async () => {
    await alice?.close();
    await bob?.close();
    await broker?.close();
  });

  it('approve --principal bob of a changed tool re-pinned it for everyone: now only for bob', async () => {
    const before = await listed(alice.client);
    expect(await listed(bob.client)).toEqual(before);
    const mark = await pull(alice.client, 'description');
    await waitFor(async () => (await call(bob.client, 'rug__probe')).outcome === 'unregistered', 'rug__probe refused for bob');

    const approved = await runCli(['approve', 'rug__probe', '--principal', 'bob', '--config', broker.configPath], TOKENS);
    expect(approved.code).toBe(0);
    expect(approved.stdout).toContain('re-pinned rug__probe');

    // Bob's calls run; alice's stay refused, and never reach the upstream.
    expect((await call(bob.client, 'rug__probe', { text: 'bob' })).outcome).toBe('ok');
    const calls = callsOf(log, 'probe');
    const refused = await call(alice.client, 'rug__probe', { text: 'alice' });
    expect(refused.outcome).toBe('unregistered');
    expect(refused.text).toContain('changed');
    expect(callsOf(log, 'probe')).toBe(calls);
    const record = broker.records().at(-1)!;
    expect(record).toMatchObject({ principal: 'alice', outcome: 'unregistered', status: 404 });
    // Bob lists the new definition; alice still the one pinned for her.
    expect((await listed(bob.client))?.description).toContain(mark);
    expect(await listed(alice.client)).toEqual(before);
    expect(approved.stdout).toContain('re-pinned rug__probe for principal "bob"');
    // The status page shows each viewer the pin state of its own roster, as its policy column is:
    // pinned for bob, whose calls run, changed for alice, whose calls are refused.
    const pinFor = async (token: string) =>
      ((await http(`${broker.url}/api/v1/status`, { headers: { authorization: `Bearer ${token}` } })).body as { tools: { name: string; pin: string }[] }).tools.find((t) => t.name === 'rug__probe')?.pin;
    expect(await pinFor(TOKENS.BOB_TOKEN)).toBe('pinned');
    expect(await pinFor(TOKENS.ALICE_TOKEN)).toBe('changed');

    // An operator approves it for alice too.
    expect((await runCli(['approve', 'rug__probe', '--principal', 'alice', '--config', broker.configPath], TOKENS)).code).toBe(0);
    expect((await listed(alice.client))?.description).toContain(mark);
    expect((await call(alice.client, 'rug__probe', { text: 'alice' })).outcome).toBe('ok');
  });

  it('approve without --principal re-pins for everyone and drops the per-principal pins', async () => {
    const before = await listed(alice.client);
    const mark = await pull(bob.client, 'title');
    await waitFor(async () => (await call(alice.client, 'rug__probe')).outcome === 'unregistered', 'rug__probe refused for alice');
    expect(await listed(alice.client)).toEqual(before);
    expect((await runCli(['approve', 'rug__probe', '--config', broker.configPath], TOKENS)).stdout).toContain('re-pinned rug__probe for every principal');
    for (const who of [alice, bob]) {
      expect((await listed(who.client))?.title).toContain(mark);
      expect((await call(who.client, 'rug__probe')).outcome).toBe('ok');
    }
  });
});
