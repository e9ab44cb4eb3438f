import { describe, expect, it, vi } from 'vitest';
import { EventEmitter } from 'node:events';
import { capMessage, capRefusal, StreamCaps } from '../../src/transports/http/caps.js';
import { keepStreamAlive, whenClosed } from '../../src/transports/http/context.js';

const alice = { name: 'alice', role: 'user' as const };
const bob = { name: 'bob', role: 'user' as const };

describe('StreamCaps (issue 12: /sse and event streams were unlimited)', () => {
  it('refuses a principal past maxStreamsPerPrincipal with 429, and lets another principal in', () => {
    const streams = new StreamCaps({ maxStreams: 10, maxStreamsPerPrincipal: 2 });
    expect(streams.acquire(alice).ok).toBe(true);
    expect(streams.acquire(alice).ok).toBe(true);
    const third = streams.acquire(alice);
    expect(third).toEqual({ ok: false, refusal: { status: 429, setting: 'http.maxStreamsPerPrincipal', limit: 2, what: 'streams' } });
    expect(streams.acquire(bob).ok).toBe(true);
    expect(streams.countOf('alice')).toBe(2);
    expect(streams.size).toBe(3);
  });

  it('refuses anyone past maxStreams with 503; a released slot (released once, however often called) is free again', () => {
    const streams = new StreamCaps({ maxStreams: 2, maxStreamsPerPrincipal: 2 });
    const first = streams.acquire(alice);
    streams.acquire(bob);
    expect(streams.acquire(bob)).toEqual({ ok: false, refusal: { status: 503, setting: 'http.maxStreams', limit: 2, what: 'streams' } });
    if (!first.ok) throw new Error('expected a slot');
    first.release();
    first.release();
    expect(streams.size).toBe(1);
    expect(streams.countOf('alice')).toBe(0);
    expect(streams.acquire(bob).ok).toBe(true);
    expect(streams.acquire(alice).ok).toBe(false);
  });
});

describe('capMessage', () => {
  it('is one line naming the setting and the number, never the principal', () => {
    const perPrincipal = capMessage(capRefusal('http.maxSessionsPerPrincipal', 3));
    expect(perPrincipal).toBe('Too Many Requests: this principal has 3 sessions open, the most http.maxSessionsPerPrincipal allows, and none is idle; close one first');
    expect(capMessage(capRefusal('http.maxStreams', 1000))).toBe('Service Unavailable: 1000 streams are open, the most http.maxStreams allows; try again later');
  });
});

describe('whenClosed', () => {
  it('gives a place back for a response that closed before its route ran, and otherwise on close', () => {
    const streams = new StreamCaps({ maxStreams: 1, maxStreamsPerPrincipal: 1 });
    const gone = Object.assign(new EventEmitter(), { destroyed: true });
    const slot = streams.acquire(alice);
    if (!slot.ok) throw new Error('expected a slot');
    whenClosed(gone, slot.release);
    expect(streams.size).toBe(0);
    const live = Object.assign(new EventEmitter(), { destroyed: false });
    const next = streams.acquire(alice);
    if (!next.ok) throw new Error('expected a slot');
    whenClosed(live, next.release);
    expect(streams.size).toBe(1);
    live.emit('close');
    expect(streams.size).toBe(0);
  });
});

describe('keepStreamAlive', () => {
  it('writes a keepalive comment every interval until the response closes, and none on one closed already', () => {
    vi.useFakeTimers();
    try {
      const live = Object.assign(new EventEmitter(), { destroyed: false, writableEnded: false, write: vi.fn() });
      keepStreamAlive(live, 1000);
      vi.advanceTimersByTime(2500);
      expect(live.write).toHaveBeenCalledTimes(2);
      expect(live.write).toHaveBeenCalledWith(': keepalive\n\n');
      live.emit('close');
      vi.advanceTimersByTime(5000);
      expect(live.write).toHaveBeenCalledTimes(2);
      // Closed before the route got to it (the client left while it awaited): no timer left running.
      const gone = Object.assign(new EventEmitter(), { destroyed: true, writableEnded: false, write: vi.fn() });
      keepStreamAlive(gone, 1000);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
