/**
 * The admin HTTP API through the real CLI: `POST /api/v1/mcp/call` (outcome → HTTP status),
 * `GET /api/v1/calls`, `GET /api/v1/events`, `/healthz`, `/readyz`, and
 * `POST /v1/sessions/:id/mcp/reconnect` (seed 004_359de2f3ce5e2188.txt: 404 with one body for
 * unknown and foreign sessions, 409 not running, 200 for all three outcomes, 429 rate-limited).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, waitFor } from './helpers.js';
import { http, MCP_POST_HEADERS, openRawSession, readEvents, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const TOKENS = { ALICE_TOKEN: 'alice-admin-token-0123456789', BOB_TOKEN: 'bob-admin-token-01234567890', OPS_TOKEN: 'ops-admin-token-01234567890' };
const as = (token: string) => ({ authorization: `Bearer ${token}` });
const ALICE = as(TOKENS.ALICE_TOKEN);
const BOB = as(TOKENS.BOB_TOKEN);
const OPS = as(TOKENS.OPS_TOKEN);
const principals = {
  alice: { token: '${env:ALICE_TOKEN}' },
  bob: { token: '${env:BOB_TOKEN}' },
  ops: { token: '${env:OPS_TOKEN}', role: 'operator' },
};

describe('admin API', () => {
  let broker: HttpBroker;
  const call = (headers: Record<string, string>, body: unknown) => http(`${broker.url}/api/v1/mcp/call`, { headers, body });

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs'), { required: true }) },
      extra: {
        principals,
        // alice may re-dial by an explicit rule (a plain user may not otherwise: issue 12).
        policy: { rules: [{ tools: ['echo__emit'], action: 'deny' }, { tools: ['broker__reconnect'], principals: ['alice'], action: 'allow' }] },
        http: { reconnectsPerMinute: 3 },
      },
      env: TOKENS,
    });
  });
  afterAll(async () => broker?.close());

  it('POST /api/v1/mcp/call answers with the outcome and its HTTP status', async () => {
    const ok = await call(ALICE, { subject: 'echo__echo', args: { text: 'from a worker' } });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ outcome: 'ok', result: { content: [{ type: 'text', text: 'from a worker' }] } });
    expect(ok.body.callId).toEqual(expect.any(String));

    const bySubject = await call(ALICE, { subject: 'echo/echo', args: { text: 'by subject' } });
    expect(bySubject.status).toBe(200);
    expect(bySubject.body.result.content[0].text).toBe('by subject');

    const toolError = await call(ALICE, { subject: 'echo__fail' });
    expect(toolError.status).toBe(200);
    expect(toolError.body).toMatchObject({ outcome: 'tool_error', result: { isError: true } });

    const denied = await call(ALICE, { subject: 'echo__emit' });
    expect(denied.status).toBe(403);
    expect(denied.body.outcome).toBe('denied');
    expect(denied.body.result).toBeUndefined();
    expect(denied.body.reason).toEqual(expect.any(String));

    const unknown = await call(ALICE, { subject: 'echo/nope' });
    expect(unknown.status).toBe(404);
    expect(unknown.body.outcome).toBe('unregistered');
    // Refusals that sent nothing are no attempt (issue 17 §11).
    const refused = await waitFor(() => {
      const found = broker.records().filter((r) => r.callId === denied.body.callId || r.callId === unknown.body.callId);
      return found.length === 2 ? found : undefined;
    }, 'the records of the refusals');
    expect(refused.map((r) => r.attempts)).toEqual([0, 0]);

    expect((await call(ALICE, { args: {} })).status).toBe(400);
    expect((await http(`${broker.url}/api/v1/mcp/call`, { headers: { ...ALICE, 'content-type': 'application/json' }, rawBody: '{not json' })).status).toBe(400);

    const record = await waitFor(() => broker.records().find((r) => r.callId === ok.body.callId), 'the record');
    expect(record).toMatchObject({ principal: 'alice', unit: 'api:alice', subject: 'echo/echo', outcome: 'ok' });
  });

  it('POST /api/v1/mcp/call: a client that disconnects cancels the call', async () => {
    const aborter = new AbortController();
    const pending = fetch(`${broker.url}/api/v1/mcp/call`, {
      method: 'POST',
      headers: { ...ALICE, 'content-type': 'application/json' },
      body: JSON.stringify({ subject: 'echo__slow', args: { ms: 30_000 } }),
      signal: aborter.signal,
    }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 500));
    aborter.abort();
    await pending;
    const record = await waitFor(() => broker.records().find((r) => r.name === 'echo__slow'), 'the slow call record', 15_000);
    expect(record).toMatchObject({ outcome: 'cancelled', status: 499, principal: 'alice' });
  });

  it('GET /api/v1/calls filters records, and a user sees only its own', async () => {
    await call(BOB, { subject: 'echo__echo', args: { text: 'bob was here' } });
    const mine = await http(`${broker.url}/api/v1/calls`, { headers: ALICE });
    expect(mine.status).toBe(200);
    expect(mine.body.calls.length).toBeGreaterThanOrEqual(5);
    expect(mine.body.calls.every((r: { principal: string }) => r.principal === 'alice')).toBe(true);

    const all = await http(`${broker.url}/api/v1/calls`, { headers: OPS });
    expect(all.body.calls.some((r: { principal: string }) => r.principal === 'bob')).toBe(true);

    const denied = await http(`${broker.url}/api/v1/calls?outcome=denied,unregistered`, { headers: ALICE });
    expect(denied.body.calls.map((r: { outcome: string }) => r.outcome).sort()).toEqual(['denied', 'unregistered']);

    const byTool = await http(`${broker.url}/api/v1/calls?tool=echo/echo&limit=1`, { headers: ALICE });
    expect(byTool.body.calls).toHaveLength(1);
    expect(byTool.body.calls[0].subject).toBe('echo/echo');

    const future = await http(`${broker.url}/api/v1/calls?since=${encodeURIComponent(new Date(Date.now() + 3600_000).toISOString())}`, { headers: OPS });
    expect(future.body.calls).toEqual([]);

    expect((await http(`${broker.url}/api/v1/calls?limit=0`, { headers: ALICE })).status).toBe(400);
    expect((await http(`${broker.url}/api/v1/calls?since=yesterday`, { headers: ALICE })).status).toBe(400);
  });

  it('GET /api/v1/events streams published records to the principal they belong to', async () => {
    const bobEvents = readEvents(broker.url, BOB, (t) => t.includes('bob-after-alice'));
    const aliceEvents = readEvents(broker.url, ALICE, (t) => t.includes('"principal":"alice"'));
    await Promise.all([bobEvents.subscribed, aliceEvents.subscribed]);
    const a = await call(ALICE, { subject: 'echo__echo', args: { text: 'alice-event' } });
    await call(BOB, { subject: 'echo__echo', args: { text: 'bob-after-alice' } });
    const [bobSeen, aliceSeen] = await Promise.all([bobEvents.read, aliceEvents.read]);
    expect(aliceSeen.status).toBe(200);
    expect(aliceSeen.headers.get('content-type')).toContain('text/event-stream');
    expect(aliceSeen.text).toContain('event: record');
    expect(aliceSeen.text).toContain(a.body.callId);
    expect(bobSeen.text).toContain('bob-after-alice');
    expect(bobSeen.text).not.toContain(a.body.callId);
  });

  it('GET /healthz and /readyz', async () => {
    expect((await http(`${broker.url}/healthz`)).body).toEqual({ status: 'ok' });
    expect(await http(`${broker.url}/readyz`)).toMatchObject({ status: 200, body: { ready: true } });
  });

  describe('POST /v1/sessions/:id/mcp/reconnect', () => {
    const reconnect = (id: string, headers: Record<string, string>, body: unknown = { server: 'echo' }) =>
      http(`${broker.url}/v1/sessions/${id}/mcp/reconnect`, { headers, body });

    it('answers unknown and foreign sessions with the same 404', async () => {
      const id = await openRawSession(broker.url, ALICE);
      const unknown = await reconnect('11111111-2222-3333-4444-555555555555', ALICE);
      const foreign = await reconnect(id, BOB);
      expect(unknown.status).toBe(404);
      expect(foreign.status).toBe(404);
      expect(foreign.text).toBe(unknown.text);
    });

    it('accepted, refused, and the rate limit (429)', async () => {
      const id = await openRawSession(broker.url, ALICE);
      const accepted = await reconnect(id, ALICE);
      expect(accepted.status).toBe(200);
      expect(accepted.body).toMatchObject({ sessionId: id, server: 'echo', outcome: 'accepted', status: { state: 'ready' } });
      expect(accepted.body.toolNames).toEqual(expect.arrayContaining(['echo__echo']));

      const refused = await reconnect(id, ALICE, { server: 'nope' });
      expect(refused.status).toBe(200);
      expect(refused.body).toMatchObject({ outcome: 'refused', status: { errorCode: 'not_declared' } });
      expect(refused.body.toolNames).toBeUndefined();

      expect((await reconnect(id, ALICE, {})).status).toBe(400);

      // An operator may act on another principal's session.
      const byOps = await reconnect(id, OPS);
      expect(byOps.status).toBe(200);
      expect(byOps.body.outcome).toBe('accepted');

      let limited: Awaited<ReturnType<typeof reconnect>> | undefined;
      for (let i = 0; i < 3 && !limited; i++) {
        const r = await reconnect(id, ALICE, { server: 'nope' });
        if (r.status === 429) limited = r;
      }
      expect(limited?.status).toBe(429);
      expect(Number(limited?.headers.get('retry-after'))).toBeGreaterThan(0);
    });

    it('answers 409 for a session that is not running', async () => {
      const id = await openRawSession(broker.url, BOB);
      const del = await http(`${broker.url}/mcp`, { method: 'DELETE', headers: { ...BOB, 'mcp-session-id': id, 'mcp-protocol-version': '2025-06-18' } });
      expect(del.status).toBe(200);
      const ended = await reconnect(id, BOB);
      expect(ended.status).toBe(409);
      expect(ended.body.error.code).toBe('not_running');
      // Still the same 404 for someone who may not see it.
      expect((await reconnect(id, ALICE)).status).toBe(404);
    });
  });
});

describe('admin API edges', () => {
  it('reconnect is "unsupported" when no upstream is configured; /readyz waits for a required upstream', async () => {
    const broker = await startHttpBroker({
      servers: { broken: { command: 'node', args: [fixture('no-such-file.mjs')], required: true } },
      extra: { broker: { restart: { initialDelayMs: 60_000, maxDelayMs: 60_000 } } },
    });
    try {
      expect(await http(`${broker.url}/readyz`)).toMatchObject({ status: 503, body: { ready: false, waiting: 1 } });
    } finally {
      await broker.close();
    }
    const empty = await startHttpBroker({ servers: {} });
    try {
      const id = await openRawSession(empty.url);
      const res = await http(`${empty.url}/v1/sessions/${id}/mcp/reconnect`, { headers: MCP_POST_HEADERS, body: { server: 'anything' } });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ outcome: 'unsupported', status: { errorCode: 'reconnect_unavailable' } });
    } finally {
      await empty.close();
    }
  });
});
