/**
 * RFC 6570 syntax and expansion for {@link UriTemplate} (uri-template.ts): the operator table,
 * expression parsing, value encoding and expansion. Internal to `upstream/`.
 */

/** A variable's value: a string, a list, or a map (an associative array). */
export type UriValue = string | readonly string[] | Readonly<Record<string, string>>;
/** Variables by name; an absent name is undefined (so is an empty list or map). */
export type UriVariables = Record<string, UriValue>;

/** One variable of an expression: `name`, `name*` (explode) or `name:n` (prefix). */
export interface VarSpec {
  readonly name: string;
  readonly explode: boolean;
  /** Prefix modifier `:n`, in characters. */
  readonly prefix?: number;
}

/** One row of the RFC 6570 operator table (appendix A). */
export interface Operator {
  readonly first: string;
  readonly sep: string;
  readonly named: boolean;
  readonly ifemp: string;
  /** Reserved characters and pct-encoded triplets pass unencoded (`+`, `#`). */
  readonly reserved: boolean;
}

/** One `{…}` of a template. */
export interface Expression {
  readonly op: Operator;
  readonly vars: readonly VarSpec[];
}

/** A template is literal text and expressions, in order. */
export type Part = string | Expression;

/** RFC 6570 appendix A, one row per operator. */
export const OPERATORS: Readonly<Record<string, Operator>> = {
  '': { first: '', sep: ',', named: false, ifemp: '', reserved: false },
  '+': { first: '', sep: ',', named: false, ifemp: '', reserved: true },
  '#': { first: '#', sep: ',', named: false, ifemp: '', reserved: true },
  '.': { first: '.', sep: '.', named: false, ifemp: '', reserved: false },
  '/': { first: '/', sep: '/', named: false, ifemp: '', reserved: false },
  ';': { first: ';', sep: ';', named: true, ifemp: '', reserved: false },
  '?': { first: '?', sep: '&', named: true, ifemp: '=', reserved: false },
  '&': { first: '&', sep: '&', named: true, ifemp: '=', reserved: false },
};

/** Character classes of RFC 3986: unreserved, reserved; tokens an encoding can give (U, U+R); triplet runs. */
export const UNRESERVED = /[A-Za-z0-9\-._~]/;
export const RESERVED = /[:/?#[\]@!$&'()*+,;=]/;
const VARNAME = /^(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*$/;
export const TOKEN_U = /^(?:[A-Za-z0-9\-._~]|%[0-9A-Fa-f]{2})*$/;
export const TOKEN_UR = /^(?:[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*$/;
export const TRIPLETS = /(?:%[0-9A-Fa-f]{2})+/g;
/** Values that encode to themselves. */
const PLAIN_U = /^[A-Za-z0-9\-._~]*$/;
const PLAIN_UR = /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=]*$/;

/** One expression's body (between the braces); undefined when it is not RFC 6570. */
export function parseExpression(body: string): Expression | undefined {
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

/** The text one expression gives for these variables (RFC 6570 section 3.2.1). */
export function expandExpression(expr: Expression, vars: UriVariables): string {
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
export function units(value: string, reserved: boolean): string[] {
  return reserved ? (value.match(/%[0-9A-Fa-f]{2}|[\s\S]/gu) ?? []) : [...value];
}

/** Pct-encodes everything outside the unreserved set (and, `reserved`, the reserved set and existing triplets). */
export function encode(value: string, reserved: boolean): string {
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
