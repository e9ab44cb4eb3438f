import { describe, expect, it } from 'vitest';
import { globMatcher, isWildcardPattern, wildcardMatcher } from '../../src/shared/glob.js';

describe('globMatcher (operators\' globs)', () => {
  it('matches names that start with "." (picomatch skips them unless told)', () => {
    expect(globMatcher('file:///home/u/**')('file:///home/u/.ssh/id_rsa')).toBe(true);
    expect(globMatcher(['x__*'])('x__.hidden')).toBe(true);
  });
});

describe('wildcardMatcher (a caller\'s pattern)', () => {
  it('* is any run within a "/" segment, ? one character but "/", the rest literal', () => {
    const m = wildcardMatcher('fs/*_file');
    expect(m('fs/read_file')).toBe(true);
    expect(m('fs/a/read_file')).toBe(false);
    expect(wildcardMatcher('*')('fs__read')).toBe(true);
    expect(wildcardMatcher('*')('fs/read')).toBe(false);
    expect(wildcardMatcher('*/*')('fs/read')).toBe(true);
    expect(wildcardMatcher('fs__rea?')('fs__read')).toBe(true);
    expect(wildcardMatcher('fs__rea?')('fs__reads')).toBe(false);
    expect(wildcardMatcher('a*b*c')('axxbyyc')).toBe(true);
    expect(wildcardMatcher('a*b*c')('axxbyy')).toBe(false);
    expect(wildcardMatcher('(x)')('(x)')).toBe(true);
  });

  it('a pattern of many stars over a long name that matches nothing is answered (a backtracking expression would not be, for minutes)', () => {
    expect(wildcardMatcher(`${'*a'.repeat(30)}*b`)('a'.repeat(100_000))).toBe(false);
  });

  it('isWildcardPattern refuses every other glob syntax', () => {
    for (const p of ['fs__*', 'a?b', 'server/tool']) expect(isWildcardPattern(p), p).toBe(true);
    for (const p of ['*(*?)x', '{a,b}', '[ab]', '!(x)', 'a+(b)', '@(a)', 'a\\*']) expect(isWildcardPattern(p), p).toBe(false);
  });
});
