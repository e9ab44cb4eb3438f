/**
 * The one way globs are compiled here (policy rules, `policy.readOnly`, per-tool settings, call
 * queries): picomatch with `dot: true`. By default picomatch's `*` and `**` skip a segment that
 * starts with `.`, so a rule such as `file:///home/u/**` would not cover `file:///home/u/.ssh/id_rsa`
 * and `*` would not cover a tool named `.hidden`: a deny that misses is a hole, not a nicety.
 * (`..` segments are never matched by a glob; resource URIs holding them are judged in policy.ts.)
 */
import picomatch from 'picomatch';

/** A matcher for `globs` (one glob or any of several). */
export function globMatcher(globs: string | readonly string[]): (text: string) => boolean {
  return picomatch(typeof globs === 'string' ? globs : [...globs], { dot: true });
}
