import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { DownstreamSession } from '../../src/transports/session.js';
import { SessionTable, sessionTag } from '../../src/transports/http/session-table.js';
import type { Principal } from '../../src/transports/http/auth.js';

/** Stands in for a DownstreamSession: the table only closes it. */
function fakeSession() {
  const s = { closed: 0, async close() { s.closed++; } };
  return s;
}

const alice = { name: 'alice', role: 'user' as const };
const bob = { name: 'bob', role: 'user' as const };
const ops = { name: 'ops', role: 'operator' as const };

function table(idleMs = 10_000, caps: { maxSessions?: number; maxSessionsPerPrincipal?: number } = {}) {
  const clock = new ManualClock();
  return { clock, sessions: new SessionTable({ clock, logger: silentLogger(), idleMs, ...caps }) };
}

/** Admits and adds session `id` of `principal`, one second after the previous one; returns its stand-in. */
async function open(t: ReturnType<typeof table>, id: string, principal: Principal) {
  await t.clock.advance(1000);
  expect(t.sessions.admit(principal)).toBeUndefined();
  const fake = fakeSession();
  const entry = t.sessions.add({ id, kind: 'streamable', principal, session: fake as unknown as DownstreamSession });
  return { fake, entry };
}

describe('SessionTable', () => {
  it('gives a session only to its principal; find() lets an operator see it, and hides it from others', () => {
    const { sessions } = table();
    sessions.add({ id: 's1', kind: 'streamable', principal: alice, session: fakeSession() as unknown as DownstreamSession });
    expect(sessions.get('s1', alice)?.id).toBe('s1');
    expect(sessions.get('s1', bob)).toBeUndefined();
    expect(sessions.find('s1', alice).state).toBe('live');
    expect(sessions.find('s1', ops).state).toBe('live');
    expect(sessions.find('s1', bob)).toEqual({ state: 'unknown' });
    expect(sessions.find('nope', alice)).toEqual({ state: 'unknown' });
  });

  it('end() closes the session once and remembers it as ended for its owner', async () => {
    const { sessions } = table();
    const fake = fakeSession();
    sessions.add({ id: 's1', kind: 'sse', principal: alice, session: fake as unknown as DownstreamSession });
    await sessions.end('s1', 'deleted');
    await sessions.end('s1', 'deleted');
    expect(fake.closed).toBe(1);
    expect(sessions.get('s1', alice)).toBeUndefined();
    expect(sessions.find('s1', alice)).toEqual({ state: 'ended', principal: 'alice' });
    expect(sessions.find('s1', bob)).toEqual({ state: 'unknown' });
  });

  it('reaps sessions idle for idleMs, never one with a request or stream open', async () => {
    const { clock, sessions } = table(10_000);
    const idle = fakeSession();
    const busy = fakeSession();
    sessions.add({ id: 'idle', kind: 'streamable', principal: alice, session: idle as unknown as DownstreamSession });
    const entry = sessions.add({ id: 'busy', kind: 'streamable', principal: alice, session: busy as unknown as DownstreamSession });
    const done = sessions.begin(entry);
    sessions.startReaper();
    await clock.advance(9_000);
    expect(idle.closed).toBe(0);
    await clock.advance(3_000);
    expect(idle.closed).toBe(1);
    expect(busy.closed).toBe(0);
    done();
    await clock.advance(9_000);
    expect(busy.closed).toBe(0);
    await clock.advance(3_000);
    expect(busy.closed).toBe(1);
    expect(sessions.size).toBe(0);
  });

  it('closeAll() ends every session and stops the reaper', async () => {
    const { clock, sessions } = table();
    const a = fakeSession();
    sessions.add({ id: 'a', kind: 'sse', principal: alice, session: a as unknown as DownstreamSession });
    sessions.startReaper();
    await sessions.closeAll();
    expect(a.closed).toBe(1);
    expect(clock.pending).toBe(0);
  });

  it('logs only a tag of the id', () => {
    expect(sessionTag('0123456789abcdef')).toBe('01234567');
  });

  describe('issue 12: sessions are capped per principal and in all', () => {
    it('past maxSessionsPerPrincipal the principal\'s oldest idle session is ended and forgotten', async () => {
      const t = table(60_000, { maxSessionsPerPrincipal: 3 });
      const a1 = await open(t, 'a1', alice);
      const a2 = await open(t, 'a2', alice);
      await open(t, 'a3', alice);
      // a1 was used after a2: a2 is now the oldest idle one.
      t.sessions.begin(a1.entry)();
      await open(t, 'a4', alice);
      expect(a2.fake.closed).toBe(1);
      expect(a1.fake.closed).toBe(0);
      expect(t.sessions.get('a2', alice)).toBeUndefined();
      expect(t.sessions.find('a2', alice)).toEqual({ state: 'ended', principal: 'alice' });
      expect(t.sessions.countOf('alice')).toBe(3);
      expect(t.sessions.size).toBe(3);
    });

    it('refuses with 429 naming http.maxSessionsPerPrincipal when none of the principal\'s sessions is idle; another principal is let in', async () => {
      const t = table(60_000, { maxSessionsPerPrincipal: 2 });
      const a1 = await open(t, 'a1', alice);
      const a2 = await open(t, 'a2', alice);
      const endA1 = t.sessions.begin(a1.entry);
      t.sessions.begin(a2.entry);
      expect(t.sessions.admit(alice)).toEqual({ status: 429, setting: 'http.maxSessionsPerPrincipal', limit: 2, what: 'sessions' });
      expect(a1.fake.closed + a2.fake.closed).toBe(0);
      await open(t, 'b1', bob);
      // Once a request ends its session is idle again, and makes room.
      endA1();
      await open(t, 'a3', alice);
      expect(a1.fake.closed).toBe(1);
    });

    it('past maxSessions the oldest idle session of anyone is ended, else 503 naming http.maxSessions', async () => {
      const t = table(60_000, { maxSessions: 3, maxSessionsPerPrincipal: 10 });
      const a1 = await open(t, 'a1', alice);
      const b1 = await open(t, 'b1', bob);
      const a2 = await open(t, 'a2', alice);
      t.sessions.begin(a1.entry);
      await open(t, 'o1', ops);
      expect(b1.fake.closed).toBe(1);
      expect(t.sessions.countOf('bob')).toBe(0);
      t.sessions.begin(a2.entry);
      const o1 = t.sessions.get('o1', ops)!;
      t.sessions.begin(o1);
      expect(t.sessions.admit(bob)).toEqual({ status: 503, setting: 'http.maxSessions', limit: 3, what: 'sessions' });
      expect(t.sessions.size).toBe(3);
    });

    it('a refused admit ends nothing, and ended sessions give their places back', async () => {
      const t = table(60_000, { maxSessions: 2, maxSessionsPerPrincipal: 1 });
      const a1 = await open(t, 'a1', alice);
      t.sessions.begin(a1.entry);
      const b1 = await open(t, 'b1', bob);
      t.sessions.begin(b1.entry);
      expect(t.sessions.admit(alice)?.status).toBe(429);
      expect(t.sessions.admit(ops)?.status).toBe(503);
      expect(a1.fake.closed + b1.fake.closed).toBe(0);
      await t.sessions.end('b1', 'deleted');
      await open(t, 'o1', ops);
      await t.sessions.closeAll();
      expect(t.sessions.size).toBe(0);
      expect(t.sessions.countOf('alice')).toBe(0);
    });
  });
});
