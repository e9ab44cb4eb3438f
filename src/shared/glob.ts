/**
 * The one way operators' globs are compiled here (policy rules, `policy.readOnly`, per-tool
 * settings, `mcp-broker calls --tool`): picomatch with `dot: true`. By default picomatch's `*`
 * and `**` skip a segment that starts with `.`, so a rule such as `file:///home/u/**` would not
 * cover `file:///home/u/.ssh/id_rsa` and `*` would not cover a tool named `.hidden`: a deny that
 * misses is a hole, not a nicety.
 * (`..` segments are never matched by a glob; resource URIs holding them are judged in policy.ts.)
 */
import picomatch from 'picomatch';

/** A matcher for `globs` (one glob or any of several). */
export function globMatcher(globs: string | readonly string[]): (text: string) => boolean {
  return picomatch(typeof globs === 'string' ? globs : [...globs], { dot: true });
}

/** Whether a per-tool settings key (`mcpServers.<key>.tools`) is a glob rather than a tool's name. */
export function isToolKeyGlob(key: string): boolean {
  return /[*?[\]{}!()+@]/.test(key);
}

/**
 * Why `glob` is no glob {@link globMatcher} can compile as written, or undefined when it is one:
 * a pattern whose expression does not compile (`[z-a]`, a trailing `\\`), which picomatch would
 * quietly match against its own text only (a deny rule of it would deny no real name). With `strict` (default
 * true), also an unbalanced bracket, parenthesis or brace (`[a`, `fs__(`, `a]`), which picomatch
 * would quietly take as literal text: for globs an operator types on the command line
 * (`mcp-broker calls --tool`), where a typo must be an error, not an empty answer. The config
 * checks its globs without `strict`, so a literal `[` written there keeps its meaning.
 */
export function globProblem(glob: string, strict = true): string | undefined {
  try {
    picomatch.makeRe(glob, { dot: true, strictBrackets: strict, debug: true });
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/**
 * Whether `pattern` is a plain wildcard pattern {@link wildcardMatcher} takes: literal characters,
 * `*` and `?` only (no brackets, braces, parentheses, `!`, `+`, `@` or escapes).
 */
export function isWildcardPattern(pattern: string): boolean {
  return !/[[\](){}!+@\\]/.test(pattern);
}

/**
 * A matcher for a pattern a caller sent (`GET /api/v1/calls?tool=`): `*` is any run of characters
 * within one `/` segment, `?` one character but `/`, everything else itself. Runs in
 * O(pattern × text) with no regular expression: picomatch compiles `*(*?)x` or many stars to an
 * expression that backtracks exponentially or polynomially on a long name, and one request would
 * stall the event loop for every caller. Operators' own globs (the config) use {@link globMatcher}.
 */
export function wildcardMatcher(pattern: string): (text: string) => boolean {
  const parts = pattern.split('/');
  return (text) => {
    const segments = text.split('/');
    return segments.length === parts.length && parts.every((p, i) => matchSegment(p, segments[i]!));
  };
}

/** One segment, greedy with a single backtrack point (the last `*`): linear in practice, O(p × t) at worst. */
function matchSegment(p: string, t: string): boolean {
  let i = 0;
  let j = 0;
  let star = -1;
  let mark = 0;
  while (j < t.length) {
    if (i < p.length && (p[i] === '?' || p[i] === t[j])) {
      i++;
      j++;
    } else if (i < p.length && p[i] === '*') {
      star = i++;
      mark = j;
    } else if (star >= 0) {
      i = star + 1;
      j = ++mark;
    } else return false;
  }
  while (i < p.length && p[i] === '*') i++;
  return i === p.length;
}
