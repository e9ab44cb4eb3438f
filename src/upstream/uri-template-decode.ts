/**
 * Decoding for {@link UriTemplate.match} (uri-template.ts): the variables one expression's text
 * stands for, exactly (undefined when no values expand to that text), and the reconciling of
 * prefix bindings. Internal to `upstream/`.
 */
import { encode, RESERVED, TOKEN_U, TOKEN_UR, TRIPLETS, UNRESERVED, units, type Expression, type Operator, type UriValue, type UriVariables, type VarSpec } from './uri-template-syntax.js';

/** Joins a variable's name and prefix length into the key of a prefix binding (`{var:3}`), reconciled at the end of a match. */
export const PREFIX_KEY = '\u0000';

/** The variables one expression's text decodes to; undefined when no values expand to exactly `text`. */
export function decodeExpression(expr: Expression, text: string): UriVariables | undefined {
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
export function reconcilePrefixes(bound: UriVariables): UriVariables | undefined {
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

export function mergeBindings(a: UriVariables, b: UriVariables): UriVariables | undefined {
  const out: UriVariables = { ...a };
  for (const [name, value] of Object.entries(b)) {
    if (Object.hasOwn(out, name)) {
      if (JSON.stringify(out[name]) !== JSON.stringify(value)) return undefined;
    } else out[name] = value;
  }
  return out;
}
