/**
 * RFC 6570 URI templates, every level: simple `{var}`, reserved `{+var}`, fragment `{#var}`,
 * label `{.var}`, path segment `{/var}`, path parameter `{;var}`, query `{?var}` and
 * continuation `{&var}`, with several variables per expression (`{?q,limit}`), explode (`*`) and
 * prefix (`:n`) modifiers, and string, list and map values.
 *
 * Resource routing uses {@link UriTemplate.match}: a URI matches a template when it is an
 * expansion of it (some assignment of the variables expands to exactly that URI), so a query
 * variable may be absent but query parameters keep the template's order. The SDK's own
 * `UriTemplate` (1.x and 2.x alike) does not cover `;`, optional or partial query variables,
 * exploded path segments, prefixes nor several variables in one simple expression, so this
 * module is ours.
 */
import { decodeExpression, mergeBindings, reconcilePrefixes } from './uri-template-decode.js';
import { expandExpression, parseExpression, RESERVED, UNRESERVED, type Operator, type Part, type UriVariables } from './uri-template-syntax.js';

export type { UriValue, UriVariables } from './uri-template-syntax.js';

/** Longest URI {@link UriTemplate.match} looks at, in characters; a longer one matches no template. */
export const MAX_MATCHED_URI_LENGTH = 8192;
/**
 * Work one {@link UriTemplate.match} may do before it answers "no match" (one unit per place an
 * expression may end, plus one per character decoded): ample for a URI up to
 * {@link MAX_MATCHED_URI_LENGTH} whose expressions are set apart by literals or operators, and a
 * bound (tenths of a second) on templates of adjacent simple expressions.
 */
const MAX_MATCH_WORK = 500_000;

/** A parsed RFC 6570 template: {@link expand} and {@link match}. Immutable. */
export class UriTemplate {
  /** Characters of literal text in the template: the more, the more specific (resource routing ranks by it). */
  readonly literalLength: number;
  private readonly uniqueNames: boolean;
  /** Per part: what may start the text the parts after it expand to. */
  private readonly next: readonly Followers[];

  private constructor(
    readonly template: string,
    private readonly parts: readonly Part[],
  ) {
    this.literalLength = parts.reduce((n, p) => n + (typeof p === 'string' ? p.length : 0), 0);
    const names = parts.flatMap((p) => (typeof p === 'string' ? [] : p.vars.map((v) => v.name)));
    this.uniqueNames = new Set(names).size === names.length;
    this.next = parts.map((_, i) => this.followers(i + 1));
  }

  /** Parses a template; undefined when it is not RFC 6570 (unclosed brace, unknown operator, bad name or modifier). */
  static parse(template: string): UriTemplate | undefined {
    const parts: Part[] = [];
    let i = 0;
    while (i < template.length) {
      const open = template.indexOf('{', i);
      const close = template.indexOf('}', i);
      if (close !== -1 && (open === -1 || close < open)) return undefined;
      if (open === -1) {
        parts.push(template.slice(i));
        break;
      }
      if (open > i) parts.push(template.slice(i, open));
      const end = template.indexOf('}', open);
      if (end === -1) return undefined;
      const expression = parseExpression(template.slice(open + 1, end));
      if (!expression) return undefined;
      parts.push(expression);
      i = end + 1;
    }
    return new UriTemplate(template, parts);
  }

  /** The URI these variables give (RFC 6570 section 3). */
  expand(vars: UriVariables): string {
    return this.parts.map((p) => (typeof p === 'string' ? p : expandExpression(p, vars))).join('');
  }

  /**
   * The variables whose expansion is `uri`, or undefined when `uri` is no expansion of this
   * template (or is longer than {@link MAX_MATCHED_URI_LENGTH}). Where several assignments give
   * the same URI, one of them: earlier expressions take as little as they can.
   */
  match(uri: string): UriVariables | undefined {
    if (uri.length > MAX_MATCHED_URI_LENGTH) return undefined;
    const failed = new Set<number>();
    const solved = new Map<number, UriVariables>();
    let work = 0;
    const width = uri.length + 1;
    const limits: (Int32Array | undefined)[] = [];
    const candidates: (Int32Array | undefined)[] = [];
    // With every name once, the rest of the URI is matched before this expression is decoded
    // (memoised, so a literal after a reserved expansion costs one decoding, not one per `/`).
    // A repeated name binds forward instead, so later expressions see earlier values.
    const go = (i: number, pos: number, bound: UriVariables): UriVariables | undefined => {
      if (i === this.parts.length) return pos !== uri.length ? undefined : this.uniqueNames ? bound : reconcilePrefixes(bound);
      const key = i * width + pos;
      if (this.uniqueNames && failed.has(key)) return undefined;
      if (this.uniqueNames && solved.has(key)) return solved.get(key);
      const part = this.parts[i]!;
      let found: UriVariables | undefined;
      if (typeof part === 'string') {
        found = uri.startsWith(part, pos) ? go(i + 1, pos + part.length, bound) : undefined;
      } else {
        const limit = (limits[i] ??= extents(part.op, uri))[pos]!;
        const ends = (candidates[i] ??= allowedEnds(this.next[i]!, uri));
        for (let end = ends[pos]!; end <= limit && !found; end = ends[end + 1]!) {
          if (++work > MAX_MATCH_WORK) return undefined;
          const rest = this.uniqueNames ? go(i + 1, end, {}) : undefined;
          if (this.uniqueNames && !rest) continue;
          work += end - pos;
          if (work > MAX_MATCH_WORK) return undefined;
          const vars = decodeExpression(part, uri.slice(pos, end));
          if (!vars) continue;
          found = this.uniqueNames ? { ...vars, ...rest } : ((merged) => merged && go(i + 1, end, merged))(mergeBindings(bound, vars));
        }
      }
      if (this.uniqueNames) {
        if (found) solved.set(key, found);
        else failed.add(key);
      }
      return found;
    };
    const vars = go(0, 0, {});
    return vars && (this.uniqueNames ? reconcilePrefixes(vars) : vars);
  }

  /** What may come at the start of the text parts `from…` expand to: a cheap filter of where an expression may end. */
  private followers(from: number): Followers {
    const chars = new Set<string>();
    let end = false;
    let any = false;
    for (let j = from; ; j++) {
      const part = this.parts[j];
      if (part === undefined) {
        end = true;
        break;
      }
      if (typeof part === 'string') {
        if (part === '') continue;
        chars.add(part[0]!);
        break;
      }
      if (part.op.first === '') {
        any = true;
        break;
      }
      chars.add(part.op.first);
    }
    return { allows: (uri, at) => any || (at === uri.length ? end : chars.has(uri[at]!)) };
  }
}

interface Followers {
  allows(uri: string, at: number): boolean;
}

/** For each position, the first at or after it where the text after an expression may start (`uri.length + 1`: none). */
function allowedEnds(next: Followers, uri: string): Int32Array {
  const out = new Int32Array(uri.length + 2);
  out[uri.length + 1] = uri.length + 1;
  for (let i = uri.length; i >= 0; i--) out[i] = next.allows(uri, i) ? i : out[i + 1]!;
  return out;
}

/** For each position, where an expression starting there must end at the latest: the first character it can never produce. */
function extents(op: Operator, uri: string): Int32Array {
  const out = new Int32Array(uri.length + 1);
  out[uri.length] = uri.length;
  for (let i = uri.length - 1; i >= 0; i--) out[i] = producible(op, uri[i]!) ? out[i + 1]! : i;
  return out;
}

function producible(op: Operator, ch: string): boolean {
  if (UNRESERVED.test(ch) || ch === '%') return true;
  if (op.reserved) return RESERVED.test(ch);
  return ch === op.first || ch === op.sep || ch === ',' || ch === '=';
}
