import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { DownstreamSession } from '../../src/transports/session.js';
import { SessionTable, sessionTag } from '../../src/transports/http/session-table.js';

/** Stands in for a DownstreamSession: the table only closes it. */
function fakeSession() {
  const s = { closed: 0, async close() { s.closed++; } };
  return s;
}

const alice = { name: 'alice', role: 'user' as const };
const bob = { name: 'bob', role: 'user' as const };
const ops = { name: 'ops', role: 'operator' as const };

function table(idleMs = 10_000) {
  const clock = new ManualClock();
  return { clock, sessions: new SessionTable({ clock, logger: silentLogger(), idleMs }) };
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
});
