/**
 * Principals over HTTP through the real CLI: bearer tokens (none, wrong, right), constant-time
 * lookup is exercised in test/transports/auth.test.ts; here: 401 with `WWW-Authenticate`,
 * the principal reaching the judge (`policy.rules[].principals`) and the records, sessions
 * private to their principal, tokens absent from logs, and the loopback-only rule without principals.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, waitFor, writeConfig } from './helpers.js';
import { connectHttp, http, initializeBody, MCP_POST_HEADERS, openRawSession, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const TOKENS = {
  ALICE_TOKEN: 'alice-token-0123456789abcdef',
  BOB_TOKEN: 'bob-token-0123456789abcdef00',
  OPS_TOKEN: 'ops-token-0123456789abcdef00',
  CAROL_TOKEN: 'carol-token-0123456789abcdef',
};

describe('HTTP principals', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs')) },
      extra: {
        principals: {
          alice: { token: '${env:ALICE_TOKEN}' },
          bob: { token: '${env:BOB_TOKEN}' },
          ops: { token: '${env:OPS_TOKEN}', role: 'operator' },
          carol: { token: '${env:CAROL_TOKEN}', budgetPerUnit: 1 },
        },
        policy: { rules: [{ tools: ['echo__echo'], principals: ['bob'], action: 'deny' }] },
      },
      env: TOKENS,
    });
  });
  afterAll(async () => broker?.close());

  it('no token → 401 with WWW-Authenticate', async () => {
    const res = await http(`${broker.url}/mcp`, { headers: MCP_POST_HEADERS, body: initializeBody() });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer realm="mcp-broker"');
    expect((await http(`${broker.url}/sse`)).status).toBe(401);
    expect((await http(`${broker.url}/api/v1/calls`)).status).toBe(401);
  });

  it('a wrong token → 401 with error="invalid_token"', async () => {
    const res = await http(`${broker.url}/mcp`, { headers: { ...MCP_POST_HEADERS, authorization: 'Bearer not-a-real-token-at-all' }, body: initializeBody() });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');
    const basic = await http(`${broker.url}/mcp`, { headers: { ...MCP_POST_HEADERS, authorization: `Basic ${TOKENS.ALICE_TOKEN}` }, body: initializeBody() });
    expect(basic.status).toBe(401);
  });

  it('issue 12: two Authorization headers no longer authenticate as the first: 400 on every route', async () => {
    const alice = `Bearer ${TOKENS.ALICE_TOKEN}`;
    const bob = `Bearer ${TOKENS.BOB_TOKEN}`;
    const routes = [
      { method: 'POST', path: '/mcp', body: JSON.stringify(initializeBody()) },
      { method: 'GET', path: '/sse' },
      { method: 'POST', path: '/messages?sessionId=x', body: '{}' },
      { method: 'GET', path: '/api/v1/calls' },
      { method: 'POST', path: '/api/v1/mcp/call', body: JSON.stringify({ subject: 'echo__echo', args: { text: 'hi' } }) },
      // The routes served without a token (the status page's shell and assets) too: the README's every route but the probes.
      { method: 'GET', path: '/' },
      { method: 'GET', path: '/status/app.js' },
    ];
    for (const route of routes) {
      for (const pair of [[alice, bob], [alice, 'Bearer not-a-real-token-at-all'], [alice, alice]]) {
        const res = await rawRequest(broker.url, route.method, route.path, { ...MCP_POST_HEADERS, authorization: pair }, route.body);
        expect({ route: route.path, status: res.status }).toEqual({ route: route.path, status: 400 });
        expect(res.headers['content-type']).toContain('application/json');
        const body = JSON.parse(res.text);
        expect(body.error.message).toBe('Bad Request: send one Authorization header, not 2');
        expect(res.text).not.toContain(TOKENS.ALICE_TOKEN);
      }
    }
  });

  it('health probes need no token', async () => {
    expect((await http(`${broker.url}/healthz`)).status).toBe(200);
    expect((await http(`${broker.url}/readyz`)).status).toBe(200);
  });

  it.each(['streamable', 'sse'] as const)('the right token serves, and the principal reaches the record (%s)', async (kind) => {
    const alice = await connectHttp(broker.url, kind, { token: TOKENS.ALICE_TOKEN });
    try {
      const result = await alice.client.callTool({ name: 'echo__echo', arguments: { text: `alice via ${kind}` } });
      expect(result._meta?.['mcp-broker/outcome']).toBe('ok');
      const callId = result._meta?.['mcp-broker/callId'];
      const record = await waitFor(() => broker.records().find((r) => r.callId === callId), 'the record');
      expect(record.principal).toBe('alice');
      // The session is the unit.
      expect(record.unit).toBe(record.sessionId);
    } finally {
      await alice.close();
    }
  });

  it('a policy rule by principal applies to that principal only', async () => {
    const bob = await connectHttp(broker.url, 'streamable', { token: TOKENS.BOB_TOKEN });
    const alice = await connectHttp(broker.url, 'streamable', { token: TOKENS.ALICE_TOKEN });
    try {
      const denied = await bob.client.callTool({ name: 'echo__echo', arguments: { text: 'bob' } });
      expect(denied.isError).toBe(true);
      expect(denied._meta?.['mcp-broker/outcome']).toBe('denied');
      const allowed = await alice.client.callTool({ name: 'echo__echo', arguments: { text: 'alice' } });
      expect(allowed._meta?.['mcp-broker/outcome']).toBe('ok');
      const records = broker.records();
      expect(records.find((r) => r.callId === denied._meta?.['mcp-broker/callId'])).toMatchObject({ principal: 'bob', outcome: 'denied', status: 403 });
    } finally {
      await bob.close();
      await alice.close();
    }
  });

  it("each session is a unit: the principal's budgetPerUnit applies per session", async () => {
    const first = await connectHttp(broker.url, 'streamable', { token: TOKENS.CAROL_TOKEN });
    const second = await connectHttp(broker.url, 'sse', { token: TOKENS.CAROL_TOKEN });
    try {
      const ok = await first.client.callTool({ name: 'echo__echo', arguments: { text: 'one' } });
      expect(ok._meta?.['mcp-broker/outcome']).toBe('ok');
      const spent = await first.client.callTool({ name: 'echo__echo', arguments: { text: 'two' } });
      expect(spent._meta?.['mcp-broker/outcome']).toBe('budget_exhausted');
      const fresh = await second.client.callTool({ name: 'echo__echo', arguments: { text: 'three' } });
      expect(fresh._meta?.['mcp-broker/outcome']).toBe('ok');
    } finally {
      await first.close();
      await second.close();
    }
  });

  it("another principal's session id looks unknown: 404", async () => {
    const aliceAuth = { authorization: `Bearer ${TOKENS.ALICE_TOKEN}` };
    const id = await openRawSession(broker.url, aliceAuth);
    const asBob = await http(`${broker.url}/mcp`, {
      headers: { ...MCP_POST_HEADERS, authorization: `Bearer ${TOKENS.BOB_TOKEN}`, 'mcp-session-id': id, 'mcp-protocol-version': '2025-06-18' },
      body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    });
    expect(asBob.status).toBe(404);
    const asAlice = await http(`${broker.url}/mcp`, {
      method: 'DELETE',
      headers: { ...aliceAuth, 'mcp-session-id': id, 'mcp-protocol-version': '2025-06-18' },
    });
    expect(asAlice.status).toBe(200);
  });

  it("a stdio upstream's log, even one sent during one principal's call, reaches privileged sessions only", async () => {
    const alice = await connectHttp(broker.url, 'streamable', { token: TOKENS.ALICE_TOKEN });
    const bob = await connectHttp(broker.url, 'streamable', { token: TOKENS.BOB_TOKEN });
    const ops = await connectHttp(broker.url, 'streamable', { token: TOKENS.OPS_TOKEN });
    try {
      const result = await alice.client.callTool({ name: 'echo__emit', arguments: {} });
      expect(result.isError).toBeFalsy();
      // Nothing on a stdio wire ties a log message to a call: that Alice's was in flight proves nothing.
      await waitFor(() => ops.notifications.find((n) => n.method === 'notifications/message'), "the operator's log notification");
      // Let anything misrouted arrive before asserting its absence.
      await alice.client.ping();
      await bob.client.ping();
      expect(alice.notifications.filter((n) => n.method === 'notifications/message')).toEqual([]);
      expect(bob.notifications.filter((n) => n.method === 'notifications/message')).toEqual([]);
    } finally {
      await Promise.all([alice.close(), bob.close(), ops.close()]);
    }
  });

  it('never writes a token to the log or the records', async () => {
    const everything = broker.stderr() + JSON.stringify(broker.records());
    for (const token of Object.values(TOKENS)) expect(everything).not.toContain(token);
  });
});

describe('HTTP principals: upstream logs over a Streamable HTTP upstream', () => {
  let upstream: ChildProcess;
  let upstreamUrl = '';
  let broker: HttpBroker;
  const logsOf = (c: { notifications: { method: string; params?: Record<string, unknown> }[] }) =>
    c.notifications.filter((n) => n.method === 'notifications/message').map((n) => String(n.params?.data));
  const state = async () => (await fetch(`${upstreamUrl}/state`)).json() as Promise<{ holding: number; getStreams: number }>;

  beforeAll(async () => {
    upstream = spawn(process.execPath, [fixture('log-http.mjs')], { stdio: ['pipe', 'pipe', 'inherit'] });
    const port = await new Promise<number>((resolve, reject) => {
      createInterface({ input: upstream.stdout! }).once('line', (l) => resolve(JSON.parse(l).port));
      upstream.once('exit', () => reject(new Error('fixture exited')));
    });
    upstreamUrl = `http://127.0.0.1:${port}`;
    broker = await startHttpBroker({
      servers: { logs: { type: 'http', url: `${upstreamUrl}/mcp` } },
      extra: {
        principals: {
          alice: { token: '${env:ALICE_TOKEN}' },
          bob: { token: '${env:BOB_TOKEN}' },
          ops: { token: '${env:OPS_TOKEN}', role: 'operator' },
        },
        http: { clientCapabilities: { elicitation: {} } },
      },
      env: TOKENS,
    });
    // The broker's standalone GET stream to the upstream, where untied log messages arrive.
    await waitFor(async () => (await state()).getStreams > 0, "the broker's GET stream to the upstream");
  });
  afterAll(async () => {
    await broker?.close();
    upstream?.kill();
  });

  it("issue 12: an upstream log written after Bob's call ended no longer reaches Alice, whose call is in flight", async () => {
    const alice = await connectHttp(broker.url, 'streamable', { token: TOKENS.ALICE_TOKEN });
    const bob = await connectHttp(broker.url, 'streamable', { token: TOKENS.BOB_TOKEN });
    const ops = await connectHttp(broker.url, 'streamable', { token: TOKENS.OPS_TOKEN });
    try {
      const held = alice.client.callTool({ name: 'logs__hold', arguments: {} });
      await waitFor(async () => (await state()).holding === 1, "alice's call to be in flight upstream");
      const noted = await bob.client.callTool({ name: 'logs__note', arguments: { text: 'bob-private-note' } });
      expect(noted._meta?.['mcp-broker/outcome']).toBe('ok');
      // Bob's call has ended; the upstream now logs about it, tied to no request, while Alice's call is in flight.
      expect((await fetch(`${upstreamUrl}/log-note`, { method: 'POST' })).status).toBe(200);
      const seen = (c: typeof alice) => logsOf(c).includes('note: bob-private-note');
      await waitFor(() => seen(ops) || seen(alice), 'the log message to reach a session');
      expect((await state()).holding).toBe(1);
      await fetch(`${upstreamUrl}/release`, { method: 'POST' });
      expect((await held)._meta?.['mcp-broker/outcome']).toBe('ok');
      // Let anything misrouted arrive before asserting its absence.
      await Promise.all([alice.client.ping(), bob.client.ping(), ops.client.ping()]);
      expect(logsOf(alice)).toEqual([]);
      expect(logsOf(bob)).toEqual([]);
      expect(logsOf(ops)).toEqual(['note: bob-private-note']);
    } finally {
      await fetch(`${upstreamUrl}/release`, { method: 'POST' }).catch(() => undefined);
      await Promise.all([alice.close(), bob.close(), ops.close()]);
    }
  });

  it("an elicitation the upstream sends on its standalone stream after Bob's call ended is refused, not put to Alice, whose call is in flight (it was)", async () => {
    const asked: string[] = [];
    const connect = async (token: string) => {
      const c = await connectHttp(broker.url, 'streamable', { token, capabilities: { elicitation: {} } });
      c.client.setRequestHandler('elicitation/create', async (req) => {
        asked.push(`${token}: ${req.params.message}`);
        return { action: 'accept', content: { ok: true } };
      });
      return c;
    };
    const alice = await connect(TOKENS.ALICE_TOKEN);
    const bob = await connect(TOKENS.BOB_TOKEN);
    try {
      const held = alice.client.callTool({ name: 'logs__hold', arguments: {} });
      await waitFor(async () => (await state()).holding === 1, "alice's call to be in flight upstream");
      expect((await bob.client.callTool({ name: 'logs__note', arguments: { text: 'bob-iban-DE89' } }))._meta?.['mcp-broker/outcome']).toBe('ok');
      // Bob's call has ended; the upstream now asks about it, tied to no request.
      const outcome = (await (await fetch(`${upstreamUrl}/ask-note`, { method: 'POST' })).json()) as { answer?: unknown; error?: string };
      expect(outcome.answer).toBeUndefined();
      expect(outcome.error).toContain('related to no call');
      await fetch(`${upstreamUrl}/release`, { method: 'POST' });
      expect((await held)._meta?.['mcp-broker/outcome']).toBe('ok');
      expect(asked).toEqual([]);
    } finally {
      await fetch(`${upstreamUrl}/release`, { method: 'POST' }).catch(() => undefined);
      await Promise.all([alice.close(), bob.close()]);
    }
  });

  it("a log sent on the response stream of Alice's call reaches Alice's session only", async () => {
    const alice = await connectHttp(broker.url, 'streamable', { token: TOKENS.ALICE_TOKEN });
    const bob = await connectHttp(broker.url, 'streamable', { token: TOKENS.BOB_TOKEN });
    const ops = await connectHttp(broker.url, 'streamable', { token: TOKENS.OPS_TOKEN });
    try {
      const result = await alice.client.callTool({ name: 'logs__log_here', arguments: { text: 'alice-own-log' } });
      expect(result._meta?.['mcp-broker/outcome']).toBe('ok');
      await waitFor(() => logsOf(alice).includes('alice-own-log'), "alice's log notification");
      await Promise.all([bob.client.ping(), ops.client.ping()]);
      expect(logsOf(bob)).toEqual([]);
      expect(logsOf(ops)).toEqual([]);
    } finally {
      await Promise.all([alice.close(), bob.close(), ops.close()]);
    }
  });
});

/** One request through node:http, which sends an array header value as one header line per element. */
function rawRequest(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string | string[]>,
  body?: string,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(new URL(path, base), { method, headers }, (res) => {
      // An SSE stream that opened by mistake would never end: read the first chunk only.
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        if (res.headers['content-type']?.includes('text/event-stream')) res.destroy();
      });
      res.on('close', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      res.on('error', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('HTTP without principals', () => {
  it('refuses a non-loopback --host: exit 2 naming the option', async () => {
    const { dir, configPath } = writeConfig({ echo: nodeServer(fixture('echo.mjs')) });
    try {
      const child = spawn(process.execPath, [CLI, '--config', configPath, '--transport', 'http', '--host', '0.0.0.0', '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
      const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
      expect(code).toBe(2);
      expect(err).toContain('--host');
      expect(err).toContain('principals');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('serves loopback without a token, as principal local', async () => {
    const broker = await startHttpBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) } });
    try {
      const res = await http(`${broker.url}/api/v1/mcp/call`, { body: { subject: 'echo__echo', args: { text: 'hi' } } });
      expect(res.status).toBe(200);
      const record = await waitFor(() => broker.records().find((r) => r.callId === res.body.callId), 'the record');
      expect(record).toMatchObject({ principal: 'local', unit: 'api:local' });
    } finally {
      await broker.close();
    }
  });
});
