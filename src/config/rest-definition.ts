/**
 * A rest tool as the broker uses it, whether hand-written in `servers.json` or imported from an
 * OpenAPI file (issue 7; seed 002_7bce204a86c1c7ba.txt step 6): its method, path template and
 * the allowlist of arguments it may send, each with where it goes. Also the checks every
 * definition passes before it is served (run by the config schema for hand-written tools and by
 * the OpenAPI import for imported ones), and the MCP `Tool` it is advertised as. It lives in
 * `config/` because the config schema runs those checks and `config/` imports nothing above it;
 * `upstream/rest/` serves the definitions.
 */
import type { JSONObject, Tool } from '@modelcontextprotocol/client';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD';

/** Where an argument goes on the wire. */
export type ArgLocation = 'path' | 'query' | 'header' | 'body';

/** One allowlisted argument. */
export interface RestArg {
  readonly in: ArgLocation;
  /** Name on the wire: path placeholder, query key, header name or body field. */
  readonly wireName: string;
  /** JSON Schema of the value, copied into the tool's `inputSchema`. */
  readonly schema: Record<string, unknown>;
  /** Path arguments are always required. */
  readonly required: boolean;
  readonly description?: string;
}

/** One rest tool, normalised. */
export interface RestToolDefinition {
  /** The tool's own name at this upstream (the `tools` key, or the operationId). */
  readonly name: string;
  readonly description: string;
  readonly method: HttpMethod;
  /** Path template below the pinned base, e.g. `/repos/{owner}/{repo}`; placeholders are wire names of `path` arguments. */
  readonly path: string;
  /** Keyed by argument name as advertised in `inputSchema`. */
  readonly args: Readonly<Record<string, RestArg>>;
  /** Retried on 429/5xx and allowed in `read-only` mode. Default: `true` for GET and HEAD (RFC 9110 safe methods), else `false`. */
  readonly readOnly: boolean;
  readonly timeoutMs?: number;
}

/** The `tools.<name>` entry of a rest server, as the schema outputs it. */
export interface RestToolConfig {
  description: string;
  method: HttpMethod;
  path: string;
  args: Record<string, { in: ArgLocation; schema: Record<string, unknown>; required: boolean; description?: string; name?: string }>;
  readOnly?: boolean;
  timeoutMs?: number;
}

/** Header names no argument may set, whatever `argHeaders` says: credentials, routing and message framing. */
export const FORBIDDEN_ARG_HEADERS: ReadonlySet<string> = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'host',
  'content-length',
  'content-type',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'expect',
  'forwarded',
  'via',
  'origin',
]);

/** RFC 9110 token: a valid header name. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** A path template: `/`-separated segments of URL path characters and `{placeholder}`s. */
const PATH_TEMPLATE = /^(?:\/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2}|\{[^{}/]+\})*)+$/;
const PLACEHOLDER = /\{([^{}/]+)\}/g;

/** Whether an argument may set header `name`: a valid name, not forbidden, not a configured header, in `argHeaders`. */
export function headerProblem(name: string, argHeaders: readonly string[], configured: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  if (!HEADER_NAME.test(name)) return `"${name}" is not a valid header name`;
  if (FORBIDDEN_ARG_HEADERS.has(lower) || lower.startsWith('x-forwarded-') || lower.startsWith('proxy-')) {
    return `header "${name}" can never be set by an argument`;
  }
  if (configured.some((h) => h.toLowerCase() === lower)) return `header "${name}" is set by "headers" and cannot also be an argument`;
  if (!argHeaders.some((h) => h.toLowerCase() === lower)) return `header "${name}" is not in "argHeaders"`;
  return undefined;
}

/** Placeholder names of a path template, in order. */
export function pathPlaceholders(template: string): string[] {
  return [...template.matchAll(PLACEHOLDER)].map((m) => m[1]!);
}

/** Default of `readOnly`: GET and HEAD are safe methods. */
export function readOnlyByMethod(method: HttpMethod): boolean {
  return method === 'GET' || method === 'HEAD';
}

/** A hand-written `tools.<name>` entry, normalised. */
export function definitionFromConfig(name: string, tool: RestToolConfig): RestToolDefinition {
  const args: Record<string, RestArg> = {};
  for (const [argName, a] of Object.entries(tool.args)) {
    args[argName] = {
      in: a.in,
      wireName: a.name ?? argName,
      schema: a.schema,
      required: a.in === 'path' ? true : a.required,
      ...(a.description !== undefined ? { description: a.description } : {}),
    };
  }
  return {
    name,
    description: tool.description,
    method: tool.method,
    path: tool.path,
    args,
    readOnly: tool.readOnly ?? readOnlyByMethod(tool.method),
    ...(tool.timeoutMs !== undefined ? { timeoutMs: tool.timeoutMs } : {}),
  };
}

/** A problem with a definition: the path below the tool (`["args", "id"]`) and what is wrong. */
export interface DefinitionProblem {
  path: Array<string | number>;
  message: string;
}

/**
 * Everything wrong with a definition: a path template that is not plain URL path characters or
 * has a `.`/`..` segment, placeholders without exactly one `path` argument (or the reverse),
 * header arguments outside `argHeaders` or on the forbidden list, body arguments on GET/HEAD,
 * two arguments with one wire name in one place. Empty when it can be served.
 */
export function definitionProblems(def: RestToolDefinition, argHeaders: readonly string[], configuredHeaders: readonly string[]): DefinitionProblem[] {
  const problems: DefinitionProblem[] = [];
  if (!PATH_TEMPLATE.test(def.path)) {
    problems.push({ path: ['path'], message: 'must be "/"-separated URL path characters and {placeholders}' });
  } else if (def.path.split('/').some((s) => s === '.' || s === '..' || /^(?:\.|%2e){1,2}$/i.test(s))) {
    problems.push({ path: ['path'], message: 'may not contain "." or ".." segments' });
  }
  const placeholders = pathPlaceholders(def.path);
  const seen = new Set<string>();
  for (const [argName, arg] of Object.entries(def.args)) {
    const key = `${arg.in}:${arg.in === 'header' ? arg.wireName.toLowerCase() : arg.wireName}`;
    if (seen.has(key)) problems.push({ path: ['args', argName], message: `another argument already goes to ${arg.in} "${arg.wireName}"` });
    seen.add(key);
    if (arg.in === 'path' && !placeholders.includes(arg.wireName)) {
      problems.push({ path: ['args', argName], message: `path argument "${arg.wireName}" has no {${arg.wireName}} in "path"` });
    }
    if (arg.in === 'header') {
      const problem = headerProblem(arg.wireName, argHeaders, configuredHeaders);
      if (problem) problems.push({ path: ['args', argName], message: problem });
    }
    if (arg.in === 'body' && (def.method === 'GET' || def.method === 'HEAD')) {
      problems.push({ path: ['args', argName], message: `a ${def.method} request has no body` });
    }
  }
  for (const p of placeholders) {
    const count = Object.values(def.args).filter((a) => a.in === 'path' && a.wireName === p).length;
    if (count !== 1) problems.push({ path: ['path'], message: `placeholder {${p}} needs exactly one "in": "path" argument (found ${count})` });
  }
  return problems;
}

/** The MCP tool a definition is advertised as: `inputSchema` from its arguments, `readOnlyHint` from `readOnly`. */
export function toMcpTool(def: RestToolDefinition): Tool {
  const properties: NonNullable<Tool['inputSchema']['properties']> = {};
  const required: string[] = [];
  for (const [argName, arg] of Object.entries(def.args)) {
    properties[argName] = (arg.description !== undefined ? { ...arg.schema, description: arg.description } : { ...arg.schema }) as JSONObject;
    if (arg.required) required.push(argName);
  }
  return {
    name: def.name,
    description: def.description || `${def.method} ${def.path}`,
    inputSchema: { type: 'object', properties, ...(required.length ? { required } : {}) },
    annotations: { readOnlyHint: def.readOnly, openWorldHint: true },
  };
}

/** What is wrong with a base URL, or undefined: it must be absolute http(s), without credentials, query or fragment. */
export function baseUrlProblem(baseUrl: string): string | undefined {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    return 'must be an absolute http(s) URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http or https URL';
  if (url.username || url.password) return 'may not carry credentials; put them in "headers"';
  if (url.search || url.hash || baseUrl.includes('?') || baseUrl.includes('#')) return 'may not have a query or fragment';
  return undefined;
}

/** A `"type": "rest"` server entry, as far as its cross-field checks need it. */
export interface RestServerShape {
  baseUrl?: string;
  headers: Record<string, string>;
  argHeaders: string[];
  tools: Record<string, RestToolConfig>;
  openapi?: string;
  operations?: string[];
}

/**
 * The cross-field problems of a rest server entry (paths relative to it), for the config
 * schema: `baseUrl` missing without `openapi` or malformed, `operations` without `openapi`,
 * bad configured header names or values with CR/LF, forbidden `argHeaders`, and every
 * {@link definitionProblems} of each hand-written tool. Never includes a header value.
 */
export function restServerProblems(server: RestServerShape): DefinitionProblem[] {
  const problems: DefinitionProblem[] = [];
  if (server.baseUrl === undefined) {
    if (!server.openapi) problems.push({ path: ['baseUrl'], message: 'is required (or "openapi" whose servers[0].url gives it)' });
  } else {
    const problem = baseUrlProblem(server.baseUrl);
    if (problem) problems.push({ path: ['baseUrl'], message: problem });
  }
  if (server.operations && !server.openapi) problems.push({ path: ['operations'], message: 'needs "openapi"' });
  for (const [name, value] of Object.entries(server.headers)) {
    if (!HEADER_NAME.test(name)) problems.push({ path: ['headers', name], message: 'is not a valid header name' });
    else if (/[\r\n\0]/.test(value)) problems.push({ path: ['headers', name], message: 'value may not contain CR, LF or NUL' });
  }
  server.argHeaders.forEach((h, i) => {
    const problem = headerProblem(h, [h], []);
    if (problem) problems.push({ path: ['argHeaders', i], message: problem });
  });
  const configured = Object.keys(server.headers);
  for (const [name, tool] of Object.entries(server.tools)) {
    for (const p of definitionProblems(definitionFromConfig(name, tool), server.argHeaders, configured)) {
      problems.push({ path: ['tools', name, ...p.path], message: p.message });
    }
  }
  return problems;
}
