/** `messageWithCauses` (shared/errors.ts): a message followed by what its causes add. */
import { describe, expect, it } from 'vitest';
import { joinLines, messageOf, messageWithCauses } from '../../src/shared/errors.js';
import { oneLine } from '../../src/broker/failure.js';

describe('messageWithCauses', () => {
  it('adds the causes a message does not already hold, in order, one line', () => {
    const refused = new Error('connect ECONNREFUSED 127.0.0.1:9');
    const fetchFailed = new TypeError('fetch failed', { cause: refused });
    const probe = new Error('Version negotiation probe failed: fetch failed', { cause: fetchFailed });
    expect(messageWithCauses(probe)).toBe('Version negotiation probe failed: fetch failed (connect ECONNREFUSED 127.0.0.1:9)');
    expect(messageWithCauses(new Error('a\n  b', { cause: new Error('c\nd') }))).toBe('a b (c d)');
    expect(messageWithCauses(new Error('outer', { cause: new Error('middle', { cause: 'inner' }) }))).toBe('outer (middle; inner)');
  });

  it('is the message alone without a cause, and stops four causes deep or at a cycle', () => {
    expect(messageWithCauses(new Error('alone'))).toBe('alone');
    expect(messageWithCauses('thrown text')).toBe('thrown text');
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(messageWithCauses(a)).toBe('a (b)');
    let deep: Error = new Error('5');
    for (const n of ['4', '3', '2', '1', '0']) deep = new Error(n, { cause: deep });
    expect(messageWithCauses(deep)).toBe('0 (1; 2; 3; 4)');
  });
});

describe('joinLines, messageOf, oneLine', () => {
  it('join each run of white space holding a line break into one space, other runs kept', () => {
    expect(joinLines('a \n  b\r\n\nc  d\t')).toBe('a b c  d\t');
    expect(joinLines('no break  here ')).toBe('no break  here ');
    expect(messageOf(new Error('  upstream\n   failed \n'))).toBe('upstream failed');
  });

  it('cost one pass on a long run of spaces (regression: an upstream message of 50,000 spaces held the event loop 6 s)', () => {
    const spaces = ' '.repeat(200_000);
    expect(messageOf(new Error(`${spaces}x\n`))).toBe('x');
    expect(joinLines(`${spaces}x\ny`)).toBe(`${spaces}x y`);
    expect(oneLine(`${spaces}x\ny`)).toBe(`${spaces}x y`.trim());
  });
});
