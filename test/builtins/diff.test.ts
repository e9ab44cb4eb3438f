/** The unified-diff applier behind estate proposals. */
import { describe, expect, it } from 'vitest';
import { applyUnifiedDiff, DiffError } from '../../src/builtins/estate/diff.js';

describe('applyUnifiedDiff', () => {
  it('applies several hunks, even when the stated line numbers drift', () => {
    const original = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', ''].join('\n');
    const diff = ['@@ -1,2 +1,2 @@', '-one', '+ONE', ' two', '@@ -4,2 +4,3 @@', ' five', '+five and a half', ' six', ''].join('\n');
    expect(applyUnifiedDiff(original, diff)).toBe(['ONE', 'two', 'three', 'four', 'five', 'five and a half', 'six', 'seven', ''].join('\n'));
  });

  it('inserts into an empty file and honours "\\ No newline at end of file"', () => {
    expect(applyUnifiedDiff('', '@@ -0,0 +1,2 @@\n+a\n+b\n')).toBe('a\nb\n');
    expect(applyUnifiedDiff('', '@@ -0,0 +1 @@\n+a\n\\ No newline at end of file\n')).toBe('a');
    expect(applyUnifiedDiff('a', '@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n')).toBe('a\n');
    expect(applyUnifiedDiff('a\nb\n', '@@ -2 +2 @@\n-b\n+c\n\\ No newline at end of file\n')).toBe('a\nc');
  });

  it('refuses a hunk that does not match, a count that lies, and text that is no diff', () => {
    expect(() => applyUnifiedDiff('a\n', '@@ -1 +1 @@\n-b\n+c\n')).toThrow(DiffError);
    expect(() => applyUnifiedDiff('a\n', '@@ -1,2 +1 @@\n-a\n+c\n')).toThrow(/says -2 \+1 lines but has -1 \+1/);
    expect(() => applyUnifiedDiff('a\n', 'just some words')).toThrow(/outside any hunk|no hunk/);
  });
  it('a hunk claiming a start far past the end is searched from inside the file (it spun the event loop through every line number: ~30 s at 10^8, a 10^12 start froze the broker)', () => {
    // Past the test's timeout with the old search; at once now, bounded by the file's lines.
    expect(() => applyUnifiedDiff('x\n', '@@ -100000000,1 +1,1 @@\n-nomatch\n+y\n')).toThrow(DiffError);
    expect(applyUnifiedDiff('x\n', '@@ -1000000000000,1 +1000000000000,1 @@\n-x\n+y\n')).toBe('y\n');
  });

  it('the search for many hunks stated far from where they match is bounded by the sizes of file and diff (each was searched from its stated line: quadratic, 3.4 s for a 215 KB file and a 158 KB diff)', () => {
    // 400 hunks, each stated at the end of a 20,000-line file and matching near its start.
    const lines = [...Array.from({ length: 400 }, (_, i) => `a${i}`), ...Array.from({ length: 19_600 }, () => 'b')];
    const diff = Array.from({ length: 400 }, (_, i) => `@@ -20000,1 +20000,1 @@\n-a${i}\n+c${i}\n`).join('');
    expect(() => applyUnifiedDiff(`${lines.join('\n')}\n`, diff)).toThrow(/too far from/);
    // Stated where they are, the same hunks apply.
    const near = Array.from({ length: 400 }, (_, i) => `@@ -${i + 1},1 +${i + 1},1 @@\n-a${i}\n+c${i}\n`).join('');
    expect(applyUnifiedDiff(`${lines.join('\n')}\n`, near).split('\n', 2)).toEqual(['c0', 'c1']);
  });
});
