import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/shared/clock.js';
import { SlidingWindowLimit } from '../../src/transports/http/rate-limit.js';

describe('SlidingWindowLimit', () => {
  it('allows max per window per key, then says how long to wait', async () => {
    const clock = new ManualClock();
    const limit = new SlidingWindowLimit(clock, 2, 60_000);
    expect(limit.take('alice')).toBe(0);
    await clock.advance(10_000);
    expect(limit.take('alice')).toBe(0);
    expect(limit.take('alice')).toBe(50_000);
    expect(limit.take('bob')).toBe(0);
    await clock.advance(50_000);
    expect(limit.take('alice')).toBe(0);
    expect(limit.take('alice')).toBeGreaterThan(0);
  });
});
