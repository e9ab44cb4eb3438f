/**
 * Issue 12 (fail closed everywhere), item 4: the reconnect route skipped the policy and the
 * records. Through the real CLI over HTTP with principals: `POST /v1/sessions/:id/mcp/reconnect`
 * and the `broker__reconnect` tool are one brokered call, judged (run mode, principal rules, the
 * shared-upstream rule) and recorded once per attempt. Re-dialling an upstream (one connection
 * shared by every session) needs the operator role or a policy rule allowing the tool by name.
 * The echo fixture logs each call with its pid (FIXTURE_LOG), which shows whether it was re-dialled.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, readNdjson, waitFor } from './helpers.js';
import { connectHttp, http, openRawSession, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const TOKENS = {
  ALICE_TOKEN: 'alice-redial-token-0123456789',
  BOB_TOKEN: 'bob-redial-token-01234567890',
  CAROL_TOKEN: 'carol-redial-token-0123456789',
  OPS_TOKEN: 'ops-redial-token-01234567890',
};
const principals = {
  alice: { token: '${env:ALICE_TOKEN}' },
  bob: { token: '${env:BOB_TOKEN}' },
  carol: { token: '${env:CAROL_TOKEN}' },
  ops: { token: '${env:OPS_TOKEN}', role: 'operator' },
};
const auth = (token: string) => ({ authorization: `Bearer ${token}` });
const outcome = (r: { _meta?: unknown }) => (r._meta as Record<string, unknown> | undefined)?.['mcp-broker/outcome'];
const callIdOf = (r: { _meta?: unknown }) => (r._meta as Record<string, unknown> | undefined)?.['mcp-broker/callId'];

/** The echo fixture, logging every call (with its pid) to `fixture.ndjson` beside servers.json. */
const echo = () => nodeServer(fixture('echo.mjs'), { env: { FIXTURE_LOG: '${configDir}/fixture.ndjson' } });

interface FixtureEvent {
  pid: number;
  event: string;
  tool?: string;
}

function fixtureEvents(b: HttpBroker): FixtureEvent[] {
  return readNdjson<FixtureEvent>(join(b.dir, 'fixture.ndjson'));
}

/** The pid that serves echo now: one echo__echo call through the admin API, as `who`. */
async function echoPid(b: HttpBroker, who: Record<string, string>): Promise<number> {
  const before = fixtureEvents(b).length;
  const res = await http(`${b.url}/api/v1/mcp/call`, { headers: who, body: { subject: 'echo__echo', args: { text: 'which pid' } } });
  expect(res.status).toBe(200);
  return fixtureEvents(b).slice(before).find((e) => e.event === 'call' && e.tool === 'echo')!.pid;
}

/** The broker's child processes (its stdio upstreams). */
function childPids(pid: number | undefined): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function reconnectRoute(b: HttpBroker, sessionId: string, who: Record<string, string>, server = 'echo') {
  return http(`${b.url}/v1/sessions/${sessionId}/mcp/reconnect`, { headers: who, body: { server } });
}

function recordsOf(b: HttpBroker, callId: unknown) {
  return b.records().filter((r) => r.callId === callId);
}

describe('reconnect route and tool: one judged, recorded call (issue 12)', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: echo() },
      extra: {
        principals,
        policy: {
          rules: [
            { tools: ['broker__reconnect'], principals: ['carol'], action: 'allow' },
            { tools: ['broker__reconnect'], principals: ['bob'], action: 'deny' },
            // A tool carol may not see: her re-dial's answer does not name it either.
            { tools: ['echo__fail'], principals: ['carol'], action: 'deny' },
          ],
        },
        http: { reconnectsPerMinute: 100 },
      },
      env: TOKENS,
    });
  }, 60_000);
  afterAll(async () => broker?.close());

  it("a denied principal's route request is 403 denied, recorded once, and re-dials nothing: another principal's in-flight call survives", async () => {
    const pid = await echoPid(broker, auth(TOKENS.ALICE_TOKEN));
    const alice = await connectHttp(broker.url, 'streamable', { token: TOKENS.ALICE_TOKEN });
    try {
      const inFlight = alice.client.callTool({ name: 'echo__slow', arguments: { ms: 1500 } }, { timeout: 30_000 });
      await waitFor(() => fixtureEvents(broker).some((e) => e.event === 'call' && e.tool === 'slow'), "alice's slow call to reach the upstream");

      const bobSession = await openRawSession(broker.url, auth(TOKENS.BOB_TOKEN));
      for (const [who, token] of [['bob', TOKENS.BOB_TOKEN], ['alice', TOKENS.ALICE_TOKEN]] as const) {
        const session = who === 'bob' ? bobSession : await openRawSession(broker.url, auth(token));
        const res = await reconnectRoute(broker, session, auth(token));
        expect(res.status).toBe(403);
        expect(res.body).toMatchObject({ sessionId: session, server: 'echo', outcome: 'denied', callId: expect.any(String), reason: expect.any(String) });
        expect(res.body.status).toBeUndefined();
        expect(res.body.toolNames).toBeUndefined();
        expect(recordsOf(broker, res.body.callId)).toEqual([
          expect.objectContaining({ sessionId: session, principal: who, name: 'broker__reconnect', subject: 'broker/reconnect', outcome: 'denied', status: 403, attempts: 0 }),
        ]);
      }

      const survived = (await inFlight) as CallToolResult;
      expect(outcome(survived)).toBe('ok');
      expect(JSON.stringify(survived.content)).toContain('slept 1500 ms');
      expect(await echoPid(broker, auth(TOKENS.ALICE_TOKEN))).toBe(pid);
    } finally {
      await alice.close();
    }
  }, 60_000);

  it('a plain user without an explicit allow is denied through the tool as well; a user a rule allows by name re-dials through both', async () => {
    const pid = await echoPid(broker, auth(TOKENS.ALICE_TOKEN));
    const alice = await connectHttp(broker.url, 'streamable', { token: TOKENS.ALICE_TOKEN });
    const carol = await connectHttp(broker.url, 'streamable', { token: TOKENS.CAROL_TOKEN });
    try {
      const denied = (await alice.client.callTool({ name: 'broker__reconnect', arguments: { server: 'echo' } })) as CallToolResult;
      expect(denied.isError).toBe(true);
      expect(outcome(denied)).toBe('denied');
      expect(JSON.stringify(denied.content)).toContain('operator');
      expect(recordsOf(broker, callIdOf(denied))).toEqual([expect.objectContaining({ principal: 'alice', outcome: 'denied', status: 403 })]);
      expect(await echoPid(broker, auth(TOKENS.ALICE_TOKEN))).toBe(pid);

      const byTool = (await carol.client.callTool({ name: 'broker__reconnect', arguments: { server: 'echo' } }, { timeout: 30_000 })) as CallToolResult;
      expect(outcome(byTool)).toBe('ok');
      expect(byTool.structuredContent).toMatchObject({ server: 'echo', outcome: 'accepted' });
      const listed = (await carol.client.listTools()).tools.map((t) => t.name).filter((n) => n.startsWith('echo__'));
      expect(listed).not.toContain('echo__fail');
      expect((byTool.structuredContent as { toolNames: string[] }).toolNames.sort()).toEqual(listed.sort());
      expect(recordsOf(broker, callIdOf(byTool))).toEqual([expect.objectContaining({ principal: 'carol', outcome: 'ok', subject: 'broker/reconnect' })]);
      const afterTool = await echoPid(broker, auth(TOKENS.CAROL_TOKEN));
      expect(afterTool).not.toBe(pid);

      const carolSession = await openRawSession(broker.url, auth(TOKENS.CAROL_TOKEN));
      const byRoute = await reconnectRoute(broker, carolSession, auth(TOKENS.CAROL_TOKEN));
      expect(byRoute.status).toBe(200);
      expect(byRoute.body).toMatchObject({ sessionId: carolSession, server: 'echo', outcome: 'accepted', status: { state: 'ready' }, callId: expect.any(String) });
      expect(recordsOf(broker, byRoute.body.callId)).toEqual([
        expect.objectContaining({ sessionId: carolSession, unit: carolSession, principal: 'carol', name: 'broker__reconnect', outcome: 'ok', status: 200, attempts: 1 }),
      ]);
      expect(await echoPid(broker, auth(TOKENS.CAROL_TOKEN))).not.toBe(afterTool);
    } finally {
      await Promise.all([alice.close(), carol.close()]);
    }
  }, 60_000);

  it("an operator re-dials through the route, on its own session and on another principal's: accepted, recorded once each", async () => {
    const opsSession = await openRawSession(broker.url, auth(TOKENS.OPS_TOKEN));
    const own = await reconnectRoute(broker, opsSession, auth(TOKENS.OPS_TOKEN));
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ sessionId: opsSession, outcome: 'accepted' });
    expect(recordsOf(broker, own.body.callId)).toEqual([
      expect.objectContaining({ sessionId: opsSession, unit: opsSession, principal: 'ops', name: 'broker__reconnect', outcome: 'ok' }),
    ]);

    const aliceSession = await openRawSession(broker.url, auth(TOKENS.ALICE_TOKEN));
    const foreign = await reconnectRoute(broker, aliceSession, auth(TOKENS.OPS_TOKEN));
    expect(foreign.status).toBe(200);
    expect(foreign.body).toMatchObject({ sessionId: aliceSession, outcome: 'accepted' });
    // Attributed to the operator who acted, on alice's session; alice's budget is not spent.
    expect(recordsOf(broker, foreign.body.callId)).toEqual([
      expect.objectContaining({ sessionId: aliceSession, unit: 'api:ops', principal: 'ops', outcome: 'ok' }),
    ]);

    // An unknown server name is still the re-dial's own `refused`, judged and recorded.
    const unknown = await reconnectRoute(broker, opsSession, auth(TOKENS.OPS_TOKEN), 'no-such-server');
    expect(unknown.status).toBe(200);
    expect(unknown.body).toMatchObject({ outcome: 'refused', status: { errorCode: 'not_declared' } });
    expect(recordsOf(broker, unknown.body.callId)).toHaveLength(1);
  }, 60_000);
});

describe('reconnect in run mode locked (issue 12)', () => {
  it('refuses the route and the tool for an operator too: 403 denied, recorded, nothing re-dialled', async () => {
    const broker = await startHttpBroker({ servers: { echo: echo() }, extra: { principals, policy: { mode: 'locked' } }, env: TOKENS });
    try {
      const ops = auth(TOKENS.OPS_TOKEN);
      const children = childPids(broker.child.pid);
      expect(children).toHaveLength(1);
      const session = await openRawSession(broker.url, ops);
      const res = await reconnectRoute(broker, session, ops);
      expect(res.status).toBe(403);
      expect(res.body).toMatchObject({ sessionId: session, server: 'echo', outcome: 'denied' });
      expect(res.body.reason).toContain('locked');
      expect(recordsOf(broker, res.body.callId)).toEqual([
        expect.objectContaining({ principal: 'ops', name: 'broker__reconnect', outcome: 'denied', status: 403, attempts: 0 }),
      ]);

      const client = await connectHttp(broker.url, 'streamable', { token: TOKENS.OPS_TOKEN });
      try {
        const byTool = (await client.client.callTool({ name: 'broker__reconnect', arguments: { server: 'echo' } })) as CallToolResult;
        expect(outcome(byTool)).toBe('denied');
        expect(recordsOf(broker, callIdOf(byTool))).toHaveLength(1);
      } finally {
        await client.close();
      }
      // Locked: the upstream was never called, and its process is the same one.
      expect(fixtureEvents(broker)).toEqual([]);
      expect(childPids(broker.child.pid)).toEqual(children);
      expect(broker.records().filter((r) => r.name === 'broker__reconnect')).toHaveLength(2);
    } finally {
      await broker.close();
    }
  }, 60_000);
});
