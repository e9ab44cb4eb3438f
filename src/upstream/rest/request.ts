/**
 * Builds the one HTTP request a rest tool call may send (issue 7; seed 002_7bce204a86c1c7ba.txt
 * step 6): only allowlisted arguments, path values percent-encoded so no value can change the
 * target, header values free of CR/LF, and the final URL checked against the pinned origin and
 * path prefix before anything is sent.
 *
 * Errors (all thrown before any byte leaves):
 * - `BrokerError('rest_host_escape')` → `guard_error`: the URL would leave the pinned origin or
 *   prefix, a path value is a `.`/`..` segment (the URL standard treats even `%2E%2E` as one,
 *   so encoding cannot neutralise it), a header value carries CR, LF or NUL.
 * - `BrokerError('invalid_arguments')` → `invalid_arguments`: a required argument is missing,
 *   a path or header value is not a scalar, a path value is empty, a header value is not
 *   printable Latin-1.
 */
import { BrokerError } from '../../shared/errors.js';
import type { RestToolDefinition } from '../../config/rest-definition.js';

/** The pinned base of a rest upstream: `baseUrl` split into what no request may leave. */
export interface PinnedBase {
  /** `scheme://host:port`, as `URL.origin` spells it. */
  readonly origin: string;
  /** Path prefix without a trailing `/` (`""` for the root). */
  readonly prefix: string;
}

/** Pins a `baseUrl` (http or https, no credentials, query or fragment: the schema checks). */
export function pinBase(baseUrl: string): PinnedBase {
  const url = new URL(baseUrl);
  return { origin: url.origin, prefix: url.pathname.replace(/\/+$/, '') };
}

/** Whether `url` is inside the pinned base: same origin, path equal to the prefix or below it, no credentials. */
export function withinBase(url: URL, base: PinnedBase): boolean {
  if (url.origin !== base.origin || url.username !== '' || url.password !== '') return false;
  if (base.prefix === '') return url.pathname.startsWith('/');
  return url.pathname === base.prefix || url.pathname.startsWith(`${base.prefix}/`);
}

/** The arguments a call may send, and the names of those it may not (sorted). */
export function partitionArgs(def: RestToolDefinition, args: Record<string, unknown> | undefined): { kept: Record<string, unknown>; stripped: string[] } {
  const kept: Record<string, unknown> = {};
  const stripped: string[] = [];
  for (const [name, value] of Object.entries(args ?? {})) {
    if (Object.hasOwn(def.args, name)) kept[name] = value;
    else stripped.push(name);
  }
  return { kept, stripped: stripped.sort() };
}

/** A request ready to send. */
export interface RestRequest {
  url: URL;
  method: string;
  /** Argument headers only; the upstream adds its configured ones at send time. */
  headers: Record<string, string>;
  /** JSON text of the body arguments; absent when the tool has none set. */
  body?: string;
}

/** Builds the request for `kept` (already partitioned) arguments. Throws as the module doc says. */
export function buildRequest(def: RestToolDefinition, base: PinnedBase, kept: Record<string, unknown>): RestRequest {
  const query = new URLSearchParams();
  const headers: Record<string, string> = {};
  const body: Record<string, unknown> = {};
  let hasBody = false;
  const pathValues = new Map<string, string>();
  for (const [name, arg] of Object.entries(def.args)) {
    const value = kept[name];
    if (value === undefined || value === null) {
      if (arg.required) throw new BrokerError('invalid_arguments', `rest tool "${def.name}": argument "${name}" is required`);
      if (arg.in === 'body' && value === null) {
        body[arg.wireName] = null;
        hasBody = true;
      }
      continue;
    }
    switch (arg.in) {
      case 'path':
        pathValues.set(arg.wireName, pathSegment(def, name, value));
        break;
      case 'query':
        for (const v of Array.isArray(value) ? value : [value]) query.append(arg.wireName, queryText(v));
        break;
      case 'header':
        headers[arg.wireName] = headerValue(def, name, value);
        break;
      case 'body':
        body[arg.wireName] = value;
        hasBody = true;
        break;
    }
  }
  const path = base.prefix + def.path.replace(/\{([^{}/]+)\}/g, (_m, p: string) => pathValues.get(p) ?? '');
  const search = query.toString();
  let url: URL;
  try {
    url = new URL(`${base.origin}${path}${search ? `?${search}` : ''}`);
  } catch {
    throw escape(def, 'the composed URL does not parse');
  }
  // The URL parser must not have changed the path we composed (dot segments, backslashes, …).
  if (url.pathname !== path || url.hash !== '' || !withinBase(url, base)) throw escape(def, 'the composed URL leaves the pinned origin or path prefix');
  return { url, method: def.method, headers, ...(hasBody ? { body: JSON.stringify(body) } : {}) };
}

/** A path value as one encoded segment; `.`/`..` refused (a dot segment even when encoded). */
function pathSegment(def: RestToolDefinition, name: string, value: unknown): string {
  if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
    throw new BrokerError('invalid_arguments', `rest tool "${def.name}": path argument "${name}" must be a string, number or boolean`);
  }
  const text = String(value);
  if (text === '') throw new BrokerError('invalid_arguments', `rest tool "${def.name}": path argument "${name}" may not be empty`);
  if (text === '.' || text === '..') throw escape(def, `path argument "${name}" is a dot segment`);
  return encodeURIComponent(text);
}

function queryText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

function headerValue(def: RestToolDefinition, name: string, value: unknown): string {
  if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
    throw new BrokerError('invalid_arguments', `rest tool "${def.name}": header argument "${name}" must be a string, number or boolean`);
  }
  const text = String(value);
  if (/[\r\n\0]/.test(text)) throw escape(def, `header argument "${name}" contains CR, LF or NUL`);
  // Header values are bytes: printable Latin-1 and tab only (fetch would throw on anything else).
  if (/[^\t\x20-\x7e\x80-\xff]/.test(text)) {
    throw new BrokerError('invalid_arguments', `rest tool "${def.name}": header argument "${name}" must be printable Latin-1 text`);
  }
  return text.trim();
}

function escape(def: RestToolDefinition, why: string): BrokerError {
  return new BrokerError('rest_host_escape', `rest tool "${def.name}": ${why}; nothing was sent`);
}
