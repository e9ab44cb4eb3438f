/**
 * Change it live (issue 18 §5), through the real CLI: editing servers.json adds, removes and
 * changes upstreams without dropping the session or the other upstreams, sends list_changed and
 * applies the policy; SIGHUP reloads (it used to shut the broker down); a bad new config is
 * refused with the reason logged and the running one kept.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, isAlive, nodeServer, startBroker, waitFor, type StartedBroker } from './helpers.js';
import { brokerUpstream, callTool, configOf } from './broker-support.js';
import { connectHttp, startHttpBroker, type ConnectedClient, type HttpBroker } from '../transports/harness.js';

function editConfig(path: string, edit: (config: Record<string, any>) => void): void {
  const config = JSON.parse(readFileSync(path, 'utf8'));
  edit(config);
  writeFileSync(path, JSON.stringify(config, null, 2));
}

const listChanges = (b: StartedBroker) => b.notifications.filter((n) => n.method === 'notifications/tools/list_changed').length;
const names = async (b: StartedBroker) => (await b.client.listTools()).tools.map((t) => t.name);

describe('a reload refused for its OpenAPI file (stdio)', () => {
  it('is tried again when the OpenAPI file is fixed, servers.json untouched and no SIGHUP: its tools appear', async () => {
    const broker = await startBroker({ servers: { one: nodeServer(fixture('echo.mjs')) } });
    try {
      const spec = join(broker.dir, 'pets.json');
      const document = {
        openapi: '3.0.3',
        info: { title: 'pets', version: '1.0.0' },
        servers: [{ url: 'http://127.0.0.1:9/api' }],
        paths: { '/pets/{petId}': { get: { operationId: 'getPet', parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'string' } }], responses: { 200: { description: 'ok' } } } } },
      };
      // Cut short, as by an editor's save in the middle of a change.
      writeFileSync(spec, JSON.stringify(document).slice(0, 40));
      const refusals = broker.stderr().split('config reload refused').length;
      editConfig(configOf(broker), (c) => {
        c.mcpServers.pets = { type: 'rest', openapi: './pets.json', operations: ['getPet'] };
      });
      await waitFor(() => broker.stderr().split('config reload refused').length > refusals, 'the refusal logged', 20_000, 100);
      expect(broker.stderr()).toContain('mcpServers.pets.openapi');
      expect(await names(broker)).not.toContain('pets__getPet');
      const reloads = broker.stderr().split('config reloaded').length;
      writeFileSync(spec, JSON.stringify(document));
      await waitFor(async () => (await names(broker)).includes('pets__getPet'), 'pets__getPet listed once the OpenAPI file is fixed', 10_000, 100);
      // Logged once applied, just after the roster is rebuilt.
      await waitFor(() => broker.stderr().split('config reloaded').length > reloads, 'config reloaded logged', 10_000, 100);
      expect(await names(broker)).toContain('one__echo');
    } finally {
      await broker.close();
    }
  });
});

describe('editing servers.json takes effect without a restart (stdio)', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({ servers: { fx: brokerUpstream(), one: nodeServer(fixture('echo.mjs')) } });
  });
  afterAll(() => broker?.close());

  it('a server added and one removed: the session lives on, the other upstream keeps serving, list_changed is sent', async () => {
    expect(await names(broker)).toContain('one__echo');
    const seen = listChanges(broker);
    editConfig(configOf(broker), (c) => {
      delete c.mcpServers.one;
      c.mcpServers.two = nodeServer(fixture('echo.mjs'));
    });
    await waitFor(async () => (await names(broker)).includes('two__echo'), 'two__echo listed after the edit', 20_000, 100);
    expect(await names(broker)).not.toContain('one__echo');
    expect(listChanges(broker)).toBeGreaterThan(seen);
    expect((await callTool(broker, 'two__echo', { text: 'new' })).text).toBe('new');
    expect((await callTool(broker, 'fx__read', { text: 'still here' })).outcome).toBe('ok');
    await waitFor(() => broker.stderr().includes('config reloaded'), 'config reloaded logged');
  });

  it('the policy applies at once: a new deny rule hides the tool and refuses it', async () => {
    editConfig(configOf(broker), (c) => {
      c.policy = { rules: [{ tools: ['fx__write'], action: 'deny' }] };
    });
    await waitFor(async () => !(await names(broker)).includes('fx__write'), 'fx__write hidden after the policy edit', 20_000, 100);
    expect((await callTool(broker, 'fx__write', { text: 'x' })).outcome).toBe('denied');
  });

  it('a bad new config is refused with the reason logged; the running one is kept', async () => {
    const before = await names(broker);
    editConfig(configOf(broker), (c) => {
      c.mcpServers.two.command = 42;
    });
    await waitFor(() => broker.stderr().includes('config reload refused'), 'the refusal logged', 20_000, 100);
    expect(broker.stderr()).toMatch(/mcpServers\.two\.command/);
    expect(await names(broker)).toEqual(before);
    expect((await callTool(broker, 'two__echo', { text: 'kept' })).text).toBe('kept');
  });

  it('a new config that fails only when applied (a REST upstream whose OpenAPI file is missing) is refused whole: it used to leave a mix of both configs serving', async () => {
    editConfig(configOf(broker), (c) => (c.mcpServers.two.command = 'node'));
    await waitFor(async () => (await callTool(broker, 'two__echo', { text: 'back' })).text === 'back', 'the good config back', 20_000, 100);
    const before = await names(broker);
    const good = readFileSync(configOf(broker), 'utf8');
    const refusals = broker.stderr().split('config reload refused').length;
    editConfig(configOf(broker), (c) => {
      delete c.mcpServers.one;
      delete c.mcpServers.two;
      c.mcpServers.pets = { type: 'rest', openapi: './missing-openapi.json', operations: ['getPet'] };
      c.policy = { default: 'deny' };
    });
    await waitFor(() => broker.stderr().split('config reload refused').length > refusals, 'the refusal logged', 20_000, 100);
    expect(await names(broker)).toEqual(before);
    expect((await callTool(broker, 'two__echo', { text: 'still' })).text).toBe('still');
    writeFileSync(configOf(broker), good);
  });

  it('a new config with a "__proto__" key holding a string is refused with its path logged; the running one is kept (the key was dropped and the rest applied)', async () => {
    const good = readFileSync(configOf(broker), 'utf8');
    const before = await names(broker);
    const refusals = broker.stderr().split('config reload refused').length;
    editConfig(configOf(broker), (c) => {
      c.mcpServers.three = nodeServer(fixture('echo.mjs'));
      // JSON.parse made it an own member, so JSON.stringify writes it.
      c.mcpServers.two.env = JSON.parse('{"__proto__": "x"}');
    });
    await waitFor(() => broker.stderr().split('config reload refused').length > refusals, 'the refusal logged', 20_000, 100);
    expect(broker.stderr()).toContain('mcpServers.two.env: has a key \\"__proto__\\"');
    expect(await names(broker)).toEqual(before);
    writeFileSync(configOf(broker), good);
  });

  it('SIGHUP shut the broker down: now it reloads', async () => {
    editConfig(configOf(broker), (c) => {
      c.mcpServers.two.command = 'node';
      c.mcpServers.three = nodeServer(fixture('echo.mjs'));
    });
    process.kill(broker.pid!, 'SIGHUP');
    await waitFor(async () => (await names(broker)).includes('three__echo'), 'three__echo listed', 20_000, 100);
    expect(isAlive(broker.pid!)).toBe(true);
    expect((await callTool(broker, 'three__echo', { text: 'hup' })).text).toBe('hup');
  });

  it('a policy.output.deny or output.maxBytes added live applies from the next call (the stages kept the output policy of the start)', async () => {
    expect((await callTool(broker, 'three__echo', { text: 'BEGIN INTERNAL ONLY' })).outcome).toBe('ok');
    const reloads = broker.stderr().split('config reloaded').length;
    editConfig(configOf(broker), (c) => {
      c.policy = { ...c.policy, output: { deny: ['BEGIN INTERNAL ONLY'] } };
    });
    await waitFor(() => broker.stderr().split('config reloaded').length > reloads, 'config reloaded logged', 20_000, 100);
    const denied = await callTool(broker, 'three__echo', { text: 'BEGIN INTERNAL ONLY' });
    expect(denied.outcome).toBe('withheld');
    expect(denied.text).not.toContain('BEGIN INTERNAL ONLY');
    const again = broker.stderr().split('config reloaded').length;
    editConfig(configOf(broker), (c) => {
      c.policy = { ...c.policy, output: { maxBytes: 400 } };
    });
    await waitFor(() => broker.stderr().split('config reloaded').length > again, 'config reloaded logged', 20_000, 100);
    expect((await callTool(broker, 'three__echo', { text: 'x'.repeat(1000) })).outcome).toBe('withheld');
    // A pattern that does not compile is refused like any bad config; the running output policy is kept.
    const refusals = broker.stderr().split('config reload refused').length;
    editConfig(configOf(broker), (c) => {
      c.policy = { ...c.policy, output: { deny: ['(unclosed'] } };
    });
    await waitFor(() => broker.stderr().split('config reload refused').length > refusals, 'the refusal logged', 20_000, 100);
    expect(broker.stderr()).toContain('policy.output.deny[0]');
    expect((await callTool(broker, 'three__echo', { text: 'x'.repeat(1000) })).outcome).toBe('withheld');
    expect((await callTool(broker, 'three__echo', { text: 'short' })).text).toBe('short');
  });
});

describe('policy.askTimeoutMs changed live applies from the next call', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({
      servers: { fx: brokerUpstream() },
      extra: { policy: { rules: [{ tools: ['fx__write'], action: 'ask' }] } },
      capabilities: { elicitation: {} },
    });
    // A user who never answers the approval prompt.
    broker.client.setRequestHandler('elicitation/create', () => new Promise(() => undefined));
  });
  afterAll(() => broker?.close());

  it('a shorter askTimeoutMs ends the next unanswered approval prompt by it (the old 120 s went on applying)', async () => {
    const reloads = broker.stderr().split('config reloaded').length;
    editConfig(configOf(broker), (c) => {
      c.policy = { ...c.policy, askTimeoutMs: 300 };
    });
    await waitFor(() => broker.stderr().split('config reloaded').length > reloads, 'config reloaded logged', 20_000, 100);
    const started = performance.now();
    const asked = await callTool(broker, 'fx__write', { text: 'x' }, 15_000);
    expect(asked.outcome).toBe('approval_required');
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});

describe('a principal whose token changes loses its sessions (HTTP)', () => {
  const TOKENS = { ALICE_TOKEN: 'alice-token-0123456789abcdef', BOB_TOKEN: 'bob-token-0123456789abcdef00' };
  let broker: HttpBroker;
  let alice: ConnectedClient;
  let bob: ConnectedClient;
  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { fx: brokerUpstream() },
      extra: { principals: { alice: { token: '${env:ALICE_TOKEN}' }, bob: { token: '${env:BOB_TOKEN}' } } },
      env: TOKENS,
    });
    alice = await connectHttp(broker.url, 'streamable', { token: TOKENS.ALICE_TOKEN });
    bob = await connectHttp(broker.url, 'streamable', { token: TOKENS.BOB_TOKEN });
  });
  afterAll(async () => {
    await alice?.close().catch(() => undefined);
    await bob?.close().catch(() => undefined);
    await broker?.close();
  });

  it('bob removed from principals: his session ends and his token is refused; alice keeps hers', async () => {
    editConfig(join(broker.dir, 'servers.json'), (c) => {
      delete c.principals.bob;
    });
    await waitFor(async () => (await fetch(`${broker.url}/api/v1/calls`, { headers: { authorization: `Bearer ${TOKENS.BOB_TOKEN}` } })).status === 401, 'bob refused', 20_000, 100);
    await expect(bob.client.listTools()).rejects.toThrow();
    expect((await alice.client.listTools()).tools.length).toBeGreaterThan(0);
  });
});
