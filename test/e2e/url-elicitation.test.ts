/**
 * URL-mode elicitation (2025-11-25, client/elicitation) through the CLI, with the url-elicit
 * fixture as upstream: a live `elicitation/create` with `mode: "url"` reaches a client that
 * declared `elicitation.url` and no other; -32042 (URL elicitation required) reaches such a
 * client as the upstream sent it, with its data; `notifications/elicitation/complete` goes to
 * the session the elicitation was relayed to, and only to it; the approval question stays form mode.
 * To a 2026-07-28 caller a -32042 is an `input_required` URL elicitation (broker/url-input.ts).
 */
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { CLI, fixture, nodeServer, npmServer, startBroker, waitFor, writeConfig, type StartedBroker } from './helpers.js';
import { connectHttp, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const textOf = (r: unknown) => ((r as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('');
const completions = (seen: { method: string; params?: Record<string, unknown> }[]) =>
  seen.filter((n) => n.method === 'notifications/elicitation/complete').map((n) => n.params?.elicitationId);
const URL_CAPS = { elicitation: { form: {}, url: {} } };

describe('URL-mode elicitation over stdio', () => {
  let broker: StartedBroker;
  const asked: Record<string, unknown>[] = [];

  beforeAll(async () => {
    broker = await startBroker({ servers: { u: nodeServer(fixture('url-elicit.mjs')) }, capabilities: URL_CAPS });
    broker.client.setRequestHandler('elicitation/create', async (req) => {
      asked.push(req.params as Record<string, unknown>);
      return { action: 'accept' };
    });
  }, 60_000);
  afterAll(async () => broker?.close());

  it('relays a live URL elicitation and then its completion to the client', async () => {
    const result = await broker.client.callTool({ name: 'u__connect', arguments: { id: 'live-1' } });
    expect(textOf(result)).toBe('action:accept');
    expect(asked.at(-1)).toMatchObject({ mode: 'url', elicitationId: 'live-1', url: 'https://auth.example.test/connect?elicitation=live-1' });
    await waitFor(() => completions(broker.notifications).includes('live-1'), 'the completion of live-1');
  });

  it('passes -32042 through with its data, records upstream_error, and relays the later completion', async () => {
    const err = await broker.client.callTool({ name: 'u__needs_auth', arguments: { id: 'err-1' } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(ProtocolError.isInstance(err)).toBe(true);
    expect((err as ProtocolError).code).toBe(-32042);
    expect((err as ProtocolError).message).toContain('This request requires authorization.');
    expect((err as ProtocolError).data).toEqual({
      elicitations: [{ mode: 'url', elicitationId: 'err-1', url: 'https://auth.example.test/connect?elicitation=err-1', message: 'Authorize access' }],
    });
    const record = (await broker.records()).find((r) => r.name === 'u__needs_auth');
    expect(record).toMatchObject({ outcome: 'upstream_error' });
    expect(record?.reason).toContain('URL elicitation required (-32042)');
    // The out-of-band flow finishes later (here: the upstream is told by another call).
    expect(textOf(await broker.client.callTool({ name: 'u__complete', arguments: { id: 'err-1' } }))).toBe('sent');
    await waitFor(() => completions(broker.notifications).includes('err-1'), 'the completion of err-1');
  });

  it('drops a completion for an id no session was sent, and a second one for a completed id', async () => {
    await broker.client.callTool({ name: 'u__complete', arguments: { id: 'never-sent' } });
    await broker.client.callTool({ name: 'u__complete', arguments: { id: 'live-1' } });
    // A marker after both: notifications on the one stdio stream arrive in order.
    await broker.client.callTool({ name: 'u__connect', arguments: { id: 'marker' } });
    await waitFor(() => completions(broker.notifications).includes('marker'), 'the marker completion');
    expect(completions(broker.notifications)).toEqual(['live-1', 'err-1', 'marker']);
  });

  it('a -32042 after many calls still does not open the breaker', async () => {
    for (let i = 0; i < 6; i++) {
      await broker.client.callTool({ name: 'u__needs_auth', arguments: { id: `loop-${i}` } }).catch(() => undefined);
    }
    const err = await broker.client.callTool({ name: 'u__needs_auth', arguments: { id: 'loop-last' } }).catch((e: unknown) => e);
    expect((err as ProtocolError).code).toBe(-32042);
  });
});

describe('URL-mode elicitation over HTTP, sessions sharing one upstream', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { u: nodeServer(fixture('url-elicit.mjs')) },
      extra: { http: { clientCapabilities: { elicitation: { form: {}, url: {} } } } },
    });
  }, 60_000);
  afterAll(async () => broker?.close());

  it('sends the completion of a -32042 elicitation to the session that got the error, not to the one whose call caused it', async () => {
    const a = await connectHttp(broker.url, 'sse', { capabilities: URL_CAPS });
    const b = await connectHttp(broker.url, 'streamable', { capabilities: URL_CAPS });
    try {
      const err = await a.client.callTool({ name: 'u__needs_auth', arguments: { id: 'http-1' } }).catch((e: unknown) => e);
      expect((err as ProtocolError).code).toBe(-32042);
      expect(textOf(await b.client.callTool({ name: 'u__complete', arguments: { id: 'http-1' } }))).toBe('sent');
      await waitFor(() => completions(a.notifications).includes('http-1'), "a's completion");
      // b's own marker proves b's stream is live and got nothing for a's elicitation.
      b.client.setRequestHandler('elicitation/create', async () => ({ action: 'accept' }));
      expect(textOf(await b.client.callTool({ name: 'u__connect', arguments: { id: 'b-marker' } }))).toBe('action:accept');
      await waitFor(() => completions(b.notifications).includes('b-marker'), "b's marker completion");
      expect(completions(b.notifications)).toEqual(['b-marker']);
      expect(completions(a.notifications)).toEqual(['http-1']);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('drops the completion of a -32042 elicitation handed to a 2026-07-28 caller (it has no session), and sends it to no legacy session', async () => {
    const modern = new Client({ name: 'modern-url-http', version: '1.0.0' }, { capabilities: URL_CAPS, versionNegotiation: { mode: 'auto' } });
    modern.setRequestHandler('elicitation/create', async () => ({ action: 'accept' }));
    await modern.connect(new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`)), { timeout: 20_000 });
    const legacy = await connectHttp(broker.url, 'streamable', { capabilities: URL_CAPS });
    try {
      expect(modern.getProtocolEra()).toBe('modern');
      expect(textOf(await modern.callTool({ name: 'u__needs_auth_once', arguments: { id: 'm-1' } }))).toBe('authorized m-1');
      expect(textOf(await legacy.client.callTool({ name: 'u__complete', arguments: { id: 'm-1' } }))).toBe('sent');
      // The legacy session's own marker proves its stream is live and got nothing for m-1.
      legacy.client.setRequestHandler('elicitation/create', async () => ({ action: 'accept' }));
      expect(textOf(await legacy.client.callTool({ name: 'u__connect', arguments: { id: 'm-marker' } }))).toBe('action:accept');
      await waitFor(() => completions(legacy.notifications).includes('m-marker'), 'the marker completion');
      expect(completions(legacy.notifications)).toEqual(['m-marker']);
    } finally {
      await modern.close().catch(() => undefined);
      await legacy.close();
    }
  });

  it('does not send a URL elicitation to a session that declared form mode only, nor -32042', async () => {
    const formOnly = await connectHttp(broker.url, 'streamable', { capabilities: { elicitation: {} } });
    try {
      const asked: unknown[] = [];
      formOnly.client.setRequestHandler('elicitation/create', async (req) => {
        asked.push(req.params);
        return { action: 'accept', content: { name: 'x' } };
      });
      const live = await formOnly.client.callTool({ name: 'u__connect', arguments: { id: 'form-1' } });
      expect(live.isError).toBe(true);
      expect(textOf(live)).toContain('did not declare URL-mode elicitation');
      expect(asked).toEqual([]);
      // -32042 is for clients that can open its URLs: this one gets a refusal result naming it.
      const refused = await formOnly.client.callTool({ name: 'u__needs_auth', arguments: { id: 'form-2' } });
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toContain('upstream_error: URL elicitation required (-32042)');
      // Form mode still reaches it.
      expect(textOf(await formOnly.client.callTool({ name: 'u__ask_form', arguments: {} }))).toBe('action:accept');
      expect(asked).toHaveLength(1);
    } finally {
      await formOnly.close();
    }
  });

  it('does not send a form elicitation to a session that declared URL mode only', async () => {
    const urlOnly = await connectHttp(broker.url, 'streamable', { capabilities: { elicitation: { url: {} } } });
    try {
      const asked: unknown[] = [];
      urlOnly.client.setRequestHandler('elicitation/create', async (req) => {
        asked.push(req.params);
        return { action: 'accept' };
      });
      const form = await urlOnly.client.callTool({ name: 'u__ask_form', arguments: {} });
      expect(form.isError).toBe(true);
      expect(textOf(form)).toContain('did not declare form-mode elicitation');
      expect(asked).toEqual([]);
    } finally {
      await urlOnly.close();
    }
  });
});

describe('URL-mode elicitation over HTTP, an upstream reusing one elicitationId for sessions of two principals', () => {
  const TOKENS = { ALICE_TOKEN: 'alice-url-elicit-token-0123', BOB_TOKEN: 'bob-url-elicit-token-01234' };
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { u: nodeServer(fixture('url-elicit.mjs')) },
      extra: {
        http: { clientCapabilities: { elicitation: { form: {}, url: {} } } },
        principals: { alice: { token: '${env:ALICE_TOKEN}' }, bob: { token: '${env:BOB_TOKEN}' } },
      },
      env: TOKENS,
    });
  }, 60_000);
  afterAll(async () => broker?.close());

  const needsAuth = async (client: Client, id: string) => {
    const err = await client.callTool({ name: 'u__needs_auth', arguments: { id } }).catch((e: unknown) => e);
    expect((err as ProtocolError).code).toBe(-32042);
  };

  it("a completion goes to the sessions of one principal that were sent the id, never to another principal's (the later relay took it)", async () => {
    const alice = await connectHttp(broker.url, 'streamable', { token: TOKENS.ALICE_TOKEN, capabilities: URL_CAPS });
    const alice2 = await connectHttp(broker.url, 'sse', { token: TOKENS.ALICE_TOKEN, capabilities: URL_CAPS });
    const bob = await connectHttp(broker.url, 'streamable', { token: TOKENS.BOB_TOKEN, capabilities: URL_CAPS });
    try {
      // Two of alice's sessions sent one id: its completion reaches both.
      await needsAuth(alice.client, 'dup');
      await needsAuth(alice2.client, 'dup');
      // alice and bob sent one id: whose its completion is cannot be told, so it reaches neither.
      await needsAuth(alice.client, 'shared');
      await needsAuth(bob.client, 'shared');
      expect(textOf(await bob.client.callTool({ name: 'u__complete', arguments: { id: 'dup' } }))).toBe('sent');
      expect(textOf(await bob.client.callTool({ name: 'u__complete', arguments: { id: 'shared' } }))).toBe('sent');
      // Each session's own marker, sent after: a completion of "shared" would have come before it.
      for (const [session, marker] of [[alice, 'a-marker'], [alice2, 'a2-marker'], [bob, 'b-marker']] as const) {
        await needsAuth(session.client, marker);
        await bob.client.callTool({ name: 'u__complete', arguments: { id: marker } });
        await waitFor(() => completions(session.notifications).includes(marker), `the completion of ${marker}`);
      }
      expect(completions(alice.notifications)).toEqual(['dup', 'a-marker']);
      expect(completions(alice2.notifications)).toEqual(['dup', 'a2-marker']);
      expect(completions(bob.notifications)).toEqual(['b-marker']);
      expect(broker.stderr()).toContain('sessions of several principals: dropped');
    } finally {
      await alice.close();
      await alice2.close();
      await bob.close();
    }
  });
});

describe('-32042 to a modern (2026-07-28) caller', () => {
  it('is an input_required URL elicitation to a caller that declared elicitation.url (its driver opens it and retries), a refusal result naming it to one that did not', async () => {
    const dirs: string[] = [];
    // One broker per client (each its own store).
    const connect = async (capabilities: Record<string, unknown>) => {
      const { dir, configPath } = writeConfig({ u: nodeServer(fixture('url-elicit.mjs')) });
      dirs.push(dir);
      const client = new Client({ name: 'modern-url', version: '1.0.0' }, { capabilities, versionNegotiation: { mode: 'auto' } });
      await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), { timeout: 30_000 });
      expect(client.getProtocolEra()).toBe('modern');
      return client;
    };
    const withUrl = await connect(URL_CAPS);
    const without = await connect({});
    const asked: Record<string, unknown>[] = [];
    withUrl.setRequestHandler('elicitation/create', async (req) => {
      asked.push(req.params as Record<string, unknown>);
      return { action: 'accept' };
    });
    try {
      // 2026-07-28 has no -32042: the URL rides an input_required answer, and the retry sends the call again.
      const done = await withUrl.callTool({ name: 'u__needs_auth_once', arguments: { id: 'modern-1' } });
      expect(textOf(done)).toBe('authorized modern-1');
      // (The SDK's 2026-07-28 codec leaves out the elicitationId, which that revision does not have.)
      expect(asked).toHaveLength(1);
      expect(asked[0]).toMatchObject({ mode: 'url', message: 'Authorize access', url: 'https://auth.example.test/connect?elicitation=modern-1' });
      const refused = await without.callTool({ name: 'u__needs_auth', arguments: { id: 'modern-2' } });
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toContain('URL elicitation required (-32042)');
    } finally {
      await withUrl.close().catch(() => undefined);
      await without.close().catch(() => undefined);
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('server-everything (npm) trigger-url-elicitation through the broker', () => {
  let broker: StartedBroker;
  const asked: Record<string, unknown>[] = [];
  beforeAll(async () => {
    broker = await startBroker({ servers: { ev: { command: 'node', args: [npmServer('server-everything'), 'stdio'] } }, capabilities: URL_CAPS });
    broker.client.setRequestHandler('elicitation/create', async (req) => {
      asked.push(req.params as Record<string, unknown>);
      return { action: 'accept' };
    });
  }, 60_000);
  afterAll(async () => broker?.close());

  it('relays its live URL elicitation, and its -32042 with data on the error path', async () => {
    const live = await broker.client.callTool({ name: 'ev__trigger-url-elicitation', arguments: { url: 'https://example.test/open', elicitationId: 'ev-1' } });
    expect(textOf(live)).toContain('User completed the URL elicitation flow');
    expect(asked.at(-1)).toMatchObject({ mode: 'url', url: 'https://example.test/open', elicitationId: 'ev-1' });
    const err = await broker.client.callTool({ name: 'ev__trigger-url-elicitation', arguments: { url: 'https://example.test/open', errorPath: true } }).catch((e: unknown) => e);
    expect((err as ProtocolError).code).toBe(-32042);
    expect((err as ProtocolError).data).toMatchObject({ elicitations: [{ mode: 'url', url: 'https://modelcontextprotocol.io' }] });
  });
});
