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

/** A variable's value: a string, a list, or a map (an associative array). */
export type UriValue = string | readonly string[] | Readonly<Record<string, string>>;
/** Variables by name; an absent name is undefined (so is an empty list or map). */
export type UriVariables = Record<string, UriValue>;

/** Longest URI {@link UriTemplate.match} looks at, in characters; a longer one matches no template. */
export const MAX_MATCHED_URI_LENGTH = 8192;
/**
 * Work one {@link UriTemplate.match} may do before it answers "no match" (one unit per place an
 * expression may end, plus one per character decoded): ample for a URI up to
 * {@link MAX_MATCHED_URI_LENGTH} whose expressions are set apart by literals or operators, and a
 * bound (tenths of a second) on templates of adjacent simple expressions.
 */
const MAX_MATCH_WORK = 500_000;
/** Joins a variable's name and prefix length into the key of a prefix binding (`{var:3}`), reconciled at the end of a match. */
const PREFIX_KEY = '\u0000';

interface VarSpec {
  readonly name: string;
  readonly explode: boolean;
  /** Prefix modifier `:n`, in characters. */
  readonly prefix?: number;
}

interface Operator {
  readonly first: string;
  readonly sep: string;
  readonly named: boolean;
  readonly ifemp: string;
  /** Reserved characters and pct-encoded triplets pass unencoded (`+`, `#`). */
  readonly reserved: boolean;
}

interface Expression {
  readonly op: Operator;
  readonly vars: readonly VarSpec[];
}

type Part = string | Expression;

/** RFC 6570 appendix A, one row per operator. */
const OPERATORS: Readonly<Record<string, Operator>> = {
  '': { first: '', sep: ',', named: false, ifemp: '', reserved: false },
  '+': { first: '', sep: ',', named: false, ifemp: '', reserved: true },
  '#': { first: '#', sep: ',', named: false, ifemp: '', reserved: true },
  '.': { first: '.', sep: '.', named: false, ifemp: '', reserved: false },
  '/': { first: '/', sep: '/', named: false, ifemp: '', reserved: false },
  ';': { first: ';', sep: ';', named: true, ifemp: '', reserved: false },
  '?': { first: '?', sep: '&', named: true, ifemp: '=', reserved: false },
  '&': { first: '&', sep: '&', named: true, ifemp: '=', reserved: false },
};

const UNRESERVED = /[A-Za-z0-9\-._~]/;
const RESERVED = /[:/?#[\]@!$&'()*+,;=]/;
const VARNAME = /^(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*$/;
const TOKEN_U = /^(?:[A-Za-z0-9\-._~]|%[0-9A-Fa-f]{2})*$/;
const TOKEN_UR = /^(?:[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*$/;
const TRIPLETS = /(?:%[0-9A-Fa-f]{2})+/g;
/** Values that encode to themselves. */
const PLAIN_U = /^[A-Za-z0-9\-._~]*$/;
const PLAIN_UR = /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=]*$/;

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

function parseExpression(body: string): Expression | undefined {
  const opChar = /^[+#./;?&]/.test(body) ? body[0]! : '';
  const op = OPERATORS[opChar]!;
  const specs = body.slice(opChar.length).split(',');
  const vars: VarSpec[] = [];
  for (const spec of specs) {
    const m = /^([^:*]+)(?:(\*)|:([1-9][0-9]{0,3}))?$/.exec(spec);
    if (!m || !VARNAME.test(m[1]!)) return undefined;
    vars.push({ name: m[1]!, explode: m[2] === '*', ...(m[3] ? { prefix: Number(m[3]) } : {}) });
  }
  return { op, vars };
}

// ---- expansion ------------------------------------------------------------------------------

function expandExpression(expr: Expression, vars: UriVariables): string {
  const { op } = expr;
  const pieces: string[] = [];
  for (const spec of expr.vars) {
    const value = vars[spec.name];
    if (value === undefined || isEmptyComposite(value)) continue;
    pieces.push(expandVar(op, spec, value));
  }
  return pieces.length === 0 ? '' : op.first + pieces.join(op.sep);
}

function expandVar(op: Operator, spec: VarSpec, value: UriValue): string {
  const enc = (s: string) => encode(s, op.reserved);
  const named = (name: string, v: string) => (v === '' ? name + op.ifemp : `${name}=${v}`);
  if (typeof value === 'string') {
    const v = enc(spec.prefix === undefined ? value : units(value, op.reserved).slice(0, spec.prefix).join(''));
    return op.named ? named(spec.name, v) : v;
  }
  const entries: [string, string][] | undefined = Array.isArray(value) ? undefined : Object.entries(value);
  if (!spec.explode) {
    const joined = entries ? entries.flatMap(([k, v]) => [enc(k), enc(v)]).join(',') : (value as readonly string[]).map(enc).join(',');
    return op.named ? named(spec.name, joined) : joined;
  }
  if (entries) return entries.map(([k, v]) => (op.named ? named(enc(k), enc(v)) : `${enc(k)}=${enc(v)}`)).join(op.sep);
  return (value as readonly string[]).map((v) => (op.named ? named(spec.name, enc(v)) : enc(v))).join(op.sep);
}

function isEmptyComposite(value: UriValue): boolean {
  return typeof value !== 'string' && (Array.isArray(value) ? value.length === 0 : Object.keys(value).length === 0);
}

/** Characters of a value for a prefix: code points, and (reserved) pct-encoded triplets. */
function units(value: string, reserved: boolean): string[] {
  return reserved ? (value.match(/%[0-9A-Fa-f]{2}|[\s\S]/gu) ?? []) : [...value];
}

/** Pct-encodes everything outside the unreserved set (and, `reserved`, the reserved set and existing triplets). */
function encode(value: string, reserved: boolean): string {
  if ((reserved ? PLAIN_UR : PLAIN_U).test(value)) return value;
  let out = '';
  for (let i = 0; i < value.length; ) {
    const cp = value.codePointAt(i)!;
    const ch = String.fromCodePoint(cp);
    i += ch.length;
    if (UNRESERVED.test(ch) || (reserved && RESERVED.test(ch))) out += ch;
    else if (reserved && ch === '%' && /^[0-9A-Fa-f]{2}$/.test(value.slice(i, i + 2))) out += ch;
    else out += utf8Triplets(ch);
  }
  return out;
}

function utf8Triplets(ch: string): string {
  return [...Buffer.from(ch, 'utf8')].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
}

// ---- matching -------------------------------------------------------------------------------

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

/** The variables one expression's text decodes to; undefined when no values expand to exactly `text`. */
function decodeExpression(expr: Expression, text: string): UriVariables | undefined {
  const { op } = expr;
  if (text === '') return {};
  if (!text.startsWith(op.first)) return undefined;
  const items = text.slice(op.first.length).split(op.sep);
  const assign = (v: number, j: number): UriVariables | undefined => {
    if (v === expr.vars.length) return j === items.length ? {} : undefined;
    const spec = expr.vars[v]!;
    // The last variable takes every item left, or none.
    for (let k = v === expr.vars.length - 1 ? items.length : j + 1; k <= items.length && k > j; k++) {
      const value = decodeVar(op, spec, items.slice(j, k));
      if (value === undefined) continue;
      const rest = assign(v + 1, k);
      const key = spec.prefix === undefined ? spec.name : `${spec.name}${PREFIX_KEY}${spec.prefix}`;
      const merged = rest && mergeBindings(rest, { [key]: value });
      if (merged) return merged;
    }
    return assign(v + 1, j);
  };
  return assign(0, 0);
}

/** The value of one variable that expands to `items` joined by the operator's separator. */
function decodeVar(op: Operator, spec: VarSpec, items: readonly string[]): UriValue | undefined {
  return op.named ? decodeNamed(op, spec, items) : decodeUnnamed(op, spec, items);
}

function decodeUnnamed(op: Operator, spec: VarSpec, items: readonly string[]): UriValue | undefined {
  // A separator that values may hold raw (`.` in labels, `,` in reserved expansions) may be inside one string.
  const sepInValues = op.reserved || UNRESERVED.test(op.sep);
  if (sepInValues || items.length === 1) {
    const text = items.join(op.sep);
    const s = decodeString(op, spec, text);
    if (s !== undefined) return s;
  }
  if (spec.prefix !== undefined) return undefined;
  if (!spec.explode) {
    const members = op.sep === ',' ? items : sepInValues || items.length === 1 ? items.join(op.sep).split(',') : undefined;
    return members && members.length > 1 ? decodeList(op, members) : undefined;
  }
  if (op.reserved) return items.length > 1 ? decodeList(op, items) : undefined;
  // Labels: `.` may sit inside keys and values too, so pairs are cut at the last `.` before each next key's `=`.
  const pairs = sepInValues ? splitPairs(items.join(op.sep), op.sep) : items;
  if (pairs && pairs.every((item) => item.includes('='))) return decodeMap(op, pairs, false);
  return items.length > 1 ? decodeList(op, items) : undefined;
}

function splitPairs(text: string, sep: string): string[] | undefined {
  const pairs: string[] = [];
  let start = 0;
  let eq = text.indexOf('=');
  while (eq !== -1) {
    const nextEq = text.indexOf('=', eq + 1);
    if (nextEq === -1) break;
    const cut = text.lastIndexOf(sep, nextEq);
    if (cut <= eq) return undefined;
    pairs.push(text.slice(start, cut));
    start = cut + 1;
    eq = nextEq;
  }
  pairs.push(text.slice(start));
  return pairs;
}

function decodeNamed(op: Operator, spec: VarSpec, items: readonly string[]): UriValue | undefined {
  const valueOf = (item: string, name: string): string | undefined => {
    if (item === name) return op.ifemp === '' ? '' : undefined;
    if (!item.startsWith(`${name}=`)) return undefined;
    const v = item.slice(name.length + 1);
    return v === '' && op.ifemp === '' ? undefined : v;
  };
  if (!spec.explode) {
    if (items.length !== 1) return undefined;
    const item = items[0]!;
    // `name` alone is the empty string where `ifemp` is empty; there `name=` is no expansion.
    const plain = valueOf(item, spec.name);
    if (plain === undefined) return undefined;
    const s = decodeString(op, spec, plain);
    if (s !== undefined) return s;
    if (spec.prefix !== undefined || !item.startsWith(`${spec.name}=`)) return undefined;
    const members = plain.split(',');
    return members.length > 1 ? decodeList(op, members) : undefined;
  }
  const values = items.map((item) => valueOf(item, spec.name));
  if (values.every((v): v is string => v !== undefined)) {
    if (values.length === 1) return decodeString(op, spec, values[0]!);
    if (spec.prefix === undefined) return decodeList(op, values);
  }
  return spec.prefix === undefined ? decodeMap(op, items, true) : undefined;
}

function decodeList(op: Operator, members: readonly string[]): string[] | undefined {
  const out: string[] = [];
  for (const m of members) {
    const s = decodeToken(op, m);
    if (s === undefined) return undefined;
    out.push(s);
  }
  return out;
}

/** Exploded map pairs `k=v` (named: `k` alone for an empty value where `ifemp` is empty). */
function decodeMap(op: Operator, items: readonly string[], named: boolean): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  for (const item of items) {
    const eq = item.indexOf('=');
    const rawKey = eq === -1 ? item : item.slice(0, eq);
    const rawValue = eq === -1 ? '' : item.slice(eq + 1);
    if (eq === -1 && !(named && op.ifemp === '')) return undefined;
    if (eq !== -1 && named && rawValue === '' && op.ifemp === '') return undefined;
    const key = decodeToken(op, rawKey);
    const value = decodeToken(op, rawValue);
    if (key === undefined || value === undefined || Object.hasOwn(out, key)) return undefined;
    out[key] = value;
  }
  return out;
}

function decodeString(op: Operator, spec: VarSpec, token: string): string | undefined {
  const s = decodeToken(op, token);
  if (s === undefined) return undefined;
  return spec.prefix !== undefined && units(s, op.reserved).length > spec.prefix ? undefined : s;
}

/** The string a token is the encoding of; undefined when encoding never gives this token. */
function decodeToken(op: Operator, token: string): string | undefined {
  if (!(op.reserved ? TOKEN_UR : TOKEN_U).test(token)) return undefined;
  let decoded: string;
  if (op.reserved) decoded = decodeReserved(token);
  else {
    try {
      decoded = decodeURIComponent(token);
    } catch {
      return undefined;
    }
  }
  return sameTriplets(encode(decoded, op.reserved), token) ? decoded : undefined;
}

/**
 * Reserved expansion passes reserved characters and existing triplets raw, so only a triplet
 * run standing for other characters is decoded; `%25` is a `%` unless two hex digits follow it.
 */
function decodeReserved(token: string): string {
  return token.replace(TRIPLETS, (run, at: number) => {
    let chars: string;
    try {
      chars = decodeURIComponent(run);
    } catch {
      return run;
    }
    let out = '';
    let offset = 0;
    for (const c of chars) {
      const width = Buffer.byteLength(c, 'utf8') * 3;
      const raw = run.slice(offset, offset + width);
      offset += width;
      const after = offset === run.length ? token.slice(at + offset, at + offset + 2) : '';
      if (UNRESERVED.test(c) || RESERVED.test(c) || (c === '%' && /^[0-9A-Fa-f]{2}$/.test(after))) out += raw;
      else out += c;
    }
    return out;
  });
}

/** Equal, with pct-encoded hex digits compared case-insensitively. */
function sameTriplets(a: string, b: string): boolean {
  const up = (s: string) => s.replace(TRIPLETS, (run) => run.toUpperCase());
  return up(a) === up(b);
}

/** Checks each prefix binding against its variable's full value, or makes it the value when there is none. */
function reconcilePrefixes(bound: UriVariables): UriVariables | undefined {
  const keys = Object.keys(bound).filter((k) => k.includes(PREFIX_KEY));
  if (keys.length === 0) return bound;
  const out: UriVariables = {};
  for (const [k, v] of Object.entries(bound)) if (!k.includes(PREFIX_KEY)) out[k] = v;
  // Longest prefix first: it stands for the value when no full value is bound.
  const prefixes = keys.map((k) => ({ name: k.split(PREFIX_KEY)[0]!, length: Number(k.split(PREFIX_KEY)[1]), value: bound[k] as string }));
  prefixes.sort((a, b) => b.length - a.length);
  for (const p of prefixes) {
    const full = out[p.name];
    if (full === undefined) out[p.name] = p.value;
    else if (typeof full !== 'string' || [...full].slice(0, p.length).join('') !== p.value) return undefined;
  }
  return out;
}

function mergeBindings(a: UriVariables, b: UriVariables): UriVariables | undefined {
  const out: UriVariables = { ...a };
  for (const [name, value] of Object.entries(b)) {
    if (Object.hasOwn(out, name)) {
      if (JSON.stringify(out[name]) !== JSON.stringify(value)) return undefined;
    } else out[name] = value;
  }
  return out;
}
