import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { isoTime } from '../../src/shared/clock.js';

const LAST_FOUR_DIGIT_MS = 253_402_300_799_999;

describe('isoTime', () => {
  it('writes what toISOString writes, for any time, in any order', () => {
    const time = fc.oneof(
      fc.integer({ min: 0, max: LAST_FOUR_DIGIT_MS }),
      fc.double({ min: 0, max: LAST_FOUR_DIGIT_MS, noNaN: true }),
      // runs of nearby times: the kept second is reused, crossed and left
      fc.integer({ min: 1_700_000_000_000, max: 1_700_000_003_000 }),
      fc.double({ min: 1_700_000_000_998, max: 1_700_000_001_001, noNaN: true }),
    );
    fc.assert(
      fc.property(fc.array(time, { minLength: 1, maxLength: 20 }), (times) => {
        for (const t of times) expect(isoTime(t)).toBe(new Date(t).toISOString());
      }),
      { numRuns: 2000 },
    );
  });

  it('hands times outside four-digit years to toISOString, errors and all', () => {
    for (const t of [-1, -0.5, -62_198_755_200_000, LAST_FOUR_DIGIT_MS + 1, 8.64e15]) {
      expect(isoTime(t)).toBe(new Date(t).toISOString());
    }
    expect(isoTime(0)).toBe('1970-01-01T00:00:00.000Z');
    expect(isoTime(-0)).toBe('1970-01-01T00:00:00.000Z');
    for (const t of [Number.NaN, Number.POSITIVE_INFINITY, 8.64e15 + 1]) expect(() => isoTime(t)).toThrow(RangeError);
  });

  it('pads the milliseconds across a second it keeps', () => {
    const base = Date.UTC(2026, 11, 5, 20, 30, 1);
    expect([0, 7, 42, 999].map((m) => isoTime(base + m))).toEqual([
      '2026-12-05T20:30:01.000Z',
      '2026-12-05T20:30:01.007Z',
      '2026-12-05T20:30:01.042Z',
      '2026-12-05T20:30:01.999Z',
    ]);
    expect(isoTime(base + 1000)).toBe('2026-12-05T20:30:02.000Z');
    expect(isoTime(base - 1)).toBe('2026-12-05T20:30:00.999Z');
  });
});
