/**
 * Rest tools without a network (issue 7): the config checks of `restServerSchema`, the
 * advertised tool, and the request builder's guards (allowlist, encoding, pinned base).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import type { RestServerConfig } from '../../src/config/schema.js';
import { BrokerError, ConfigError } from '../../src/shared/errors.js';
import { definitionFromConfig, toMcpTool, type RestToolDefinition } from '../../src/config/rest-definition.js';
import { buildRequest, partitionArgs, pinBase, withinBase } from '../../src/upstream/rest/request.js';
import { retryAfterMs, secretMask } from '../../src/upstream/rest/response.js';

function restServer(server: Record<string, unknown>, env: Record<string, string> = {}): RestServerConfig {
  const config = parseConfig({ mcpServers: { api: { type: 'rest', ...server } } }, { baseDir: '/tmp', env });
  return config.mcpServers.api as RestServerConfig;
}

function configError(server: Record<string, unknown>): ConfigError {
  try {
    restServer(server);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

const ISSUE: RestToolDefinition = definitionFromConfig('get_issue', {
  description: 'Read an issue',
  method: 'GET',
  path: '/repos/{owner}/{repo}/issues/{number}',
  args: {
    owner: { in: 'path', schema: { type: 'string' }, required: true },
    repo: { in: 'path', schema: { type: 'string' }, required: true },
    number: { in: 'path', schema: { type: 'integer' }, required: true },
    verbose: { in: 'query', schema: { type: 'boolean' }, required: false, name: 'v' },
    trace: { in: 'header', schema: { type: 'string' }, required: false, name: 'X-Trace' },
  },
});
const BASE = pinBase('https://api.example.com/v3/');

function escapeCode(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    expect(err).toBeInstanceOf(BrokerError);
    return (err as BrokerError).code;
  }
}

describe('rest server config (restServerSchema)', () => {
  it('accepts a hand-written API and normalises its tools', () => {
    const server = restServer({
      baseUrl: 'https://api.example.com/v3',
      headers: { Authorization: 'Bearer ${env:TOKEN}' },
      argHeaders: ['X-Trace'],
      tools: {
        get_issue: {
          path: '/repos/{owner}/{repo}',
          args: { owner: { in: 'path' }, repo: { in: 'path' }, trace: { in: 'header', name: 'X-Trace' } },
        },
      },
    }, { TOKEN: 'tok-123456' });
    expect(server.headers.Authorization).toBe('Bearer tok-123456');
    expect(server.tools.get_issue!.method).toBe('GET');
  });

  it('baseUrl is required without openapi', () => {
    expect(configError({ tools: {} }).message).toMatch(/^mcpServers\.api\.baseUrl: is required/);
  });

  it('baseUrl must be http(s) without credentials, query or fragment', () => {
    expect(configError({ baseUrl: 'ftp://h/x' }).message).toMatch(/mcpServers\.api\.baseUrl: must be an http or https URL/);
    expect(configError({ baseUrl: 'https://u:p@h/x' }).message).toMatch(/baseUrl: may not carry credentials/);
    expect(configError({ baseUrl: 'https://h/x?a=1' }).message).toMatch(/baseUrl: may not have a query/);
  });

  it('a header argument must be in argHeaders', () => {
    const err = configError({ baseUrl: 'https://h', tools: { t: { path: '/x', args: { h: { in: 'header', name: 'X-Trace' } } } } });
    expect(err.message).toMatch(/^mcpServers\.api\.tools\.t\.args\.h: header "X-Trace" is not in "argHeaders"/);
  });

  it('credential, routing and framing headers can never be arguments, even when listed', () => {
    expect(configError({ baseUrl: 'https://h', argHeaders: ['Authorization'] }).message).toMatch(/argHeaders\[0\]: header "Authorization" can never be set/);
    expect(configError({ baseUrl: 'https://h', argHeaders: ['X-Forwarded-For'] }).message).toMatch(/can never be set/);
    const clash = configError({ baseUrl: 'https://h', headers: { 'X-Key': 'abcd' }, argHeaders: ['x-key'], tools: { t: { path: '/x', args: { k: { in: 'header', name: 'X-Key' } } } } });
    expect(clash.message).toMatch(/tools\.t\.args\.k: header "X-Key" is set by "headers"/);
  });

  it('placeholders and path arguments must match one to one', () => {
    expect(configError({ baseUrl: 'https://h', tools: { t: { path: '/x/{id}' } } }).message).toMatch(/tools\.t\.path: placeholder \{id\} needs exactly one/);
    expect(configError({ baseUrl: 'https://h', tools: { t: { path: '/x', args: { id: { in: 'path' } } } } }).message).toMatch(/tools\.t\.args\.id: path argument "id" has no \{id\}/);
  });

  it('a path template may not hold dot segments, queries or fragments', () => {
    expect(configError({ baseUrl: 'https://h', tools: { t: { path: '/a/../b' } } }).message).toMatch(/tools\.t\.path: may not contain "\." or "\.\." segments/);
    expect(configError({ baseUrl: 'https://h', tools: { t: { path: '/a/%2e%2E/b' } } }).message).toMatch(/dot|segments/);
    expect(configError({ baseUrl: 'https://h', tools: { t: { path: '/a?x=1' } } }).message).toMatch(/tools\.t\.path: must be/);
  });

  it('a GET has no body arguments', () => {
    expect(configError({ baseUrl: 'https://h', tools: { t: { path: '/x', args: { b: { in: 'body' } } } } }).message).toMatch(/tools\.t\.args\.b: a GET request has no body/);
  });

  it('operations need openapi, and openapi needs operations', () => {
    expect(configError({ baseUrl: 'https://h', operations: ['a'] }).message).toMatch(/mcpServers\.api\.operations: needs "openapi"/);
    expect(configError({ openapi: './api.json' }).message).toMatch(/mcpServers\.api\.operations: is required with "openapi"/);
  });

  it('a configured header value with CR/LF is refused without echoing the value', () => {
    const err = configError({ baseUrl: 'https://h', headers: { 'X-Key': 'secret-value\r\nHost: evil' } });
    expect(err.message).toMatch(/headers\.X-Key: value may not contain CR, LF or NUL/);
    expect(err.message).not.toContain('secret-value');
  });
});

describe('rest tool definition (toMcpTool)', () => {
  it('builds inputSchema from args, path arguments required', () => {
    const tool = toMcpTool(ISSUE);
    expect(tool.name).toBe('get_issue');
    expect(tool.inputSchema.required).toEqual(['owner', 'repo', 'number']);
    expect(Object.keys(tool.inputSchema.properties!)).toEqual(['owner', 'repo', 'number', 'verbose', 'trace']);
    expect(tool.inputSchema.properties!.number).toEqual({ type: 'integer' });
  });

  it('readOnlyHint follows readOnly; absent, GET and HEAD are read-only and others are not', () => {
    expect(toMcpTool(ISSUE).annotations?.readOnlyHint).toBe(true);
    const post = definitionFromConfig('p', { description: '', method: 'POST', path: '/x', args: {} });
    expect(toMcpTool(post).annotations?.readOnlyHint).toBe(false);
    const marked = definitionFromConfig('p', { description: '', method: 'POST', path: '/search', args: {}, readOnly: true });
    expect(toMcpTool(marked).annotations?.readOnlyHint).toBe(true);
    const unmarked = definitionFromConfig('g', { description: '', method: 'GET', path: '/x', args: {}, readOnly: false });
    expect(toMcpTool(unmarked).annotations?.readOnlyHint).toBe(false);
  });
});

describe('buildRequest', () => {
  it('maps path, query and header arguments and keeps the pinned prefix', () => {
    const req = buildRequest(ISSUE, BASE, { owner: 'acme', repo: 'tools', number: 7, verbose: true, trace: 'abc' });
    expect(req.url.href).toBe('https://api.example.com/v3/repos/acme/tools/issues/7?v=true');
    expect(req.headers).toEqual({ 'X-Trace': 'abc' });
    expect(req.body).toBeUndefined();
  });

  it('strips arguments outside the allowlist, and names them', () => {
    const { kept, stripped } = partitionArgs(ISSUE, { owner: 'a', repo: 'b', number: 1, url: 'https://evil', Authorization: 'x' });
    expect(stripped).toEqual(['Authorization', 'url']);
    expect(Object.keys(kept)).toEqual(['owner', 'repo', 'number']);
  });

  it('percent-encodes "/", "?", "#" and absolute URLs in path values', () => {
    const req = buildRequest(ISSUE, BASE, { owner: 'a/b?c#d', repo: 'https://evil.example/x', number: 1 });
    expect(req.url.origin).toBe('https://api.example.com');
    expect(req.url.pathname).toBe('/v3/repos/a%2Fb%3Fc%23d/https%3A%2F%2Fevil.example%2Fx/issues/1');
    expect(req.url.search).toBe('');
  });

  it('refuses "." and ".." path values as rest_host_escape (the URL standard treats even %2E%2E as a dot segment)', () => {
    expect(escapeCode(() => buildRequest(ISSUE, BASE, { owner: '..', repo: 'x', number: 1 }))).toBe('rest_host_escape');
    expect(escapeCode(() => buildRequest(ISSUE, BASE, { owner: '.', repo: 'x', number: 1 }))).toBe('rest_host_escape');
    expect(new URL('https://h/a/%2E%2E/b').pathname).toBe('/b');
  });

  it('refuses CR/LF in a header value as rest_host_escape, non-Latin-1 as invalid_arguments', () => {
    expect(escapeCode(() => buildRequest(ISSUE, BASE, { owner: 'a', repo: 'b', number: 1, trace: 'x\r\nHost: evil' }))).toBe('rest_host_escape');
    expect(escapeCode(() => buildRequest(ISSUE, BASE, { owner: 'a', repo: 'b', number: 1, trace: 'x\u2028' }))).toBe('invalid_arguments');
  });

  it('a missing required argument, an empty or non-scalar path value is invalid_arguments', () => {
    expect(escapeCode(() => buildRequest(ISSUE, BASE, { owner: 'a', repo: 'b' }))).toBe('invalid_arguments');
    expect(escapeCode(() => buildRequest(ISSUE, BASE, { owner: '', repo: 'b', number: 1 }))).toBe('invalid_arguments');
    expect(escapeCode(() => buildRequest(ISSUE, BASE, { owner: { a: 1 }, repo: 'b', number: 1 }))).toBe('invalid_arguments');
  });

  it('collects body arguments into one JSON object under their wire names', () => {
    const def = definitionFromConfig('create', {
      description: '',
      method: 'POST',
      path: '/items',
      args: { title: { in: 'body', schema: {}, required: true }, tags: { in: 'body', schema: {}, required: false, name: 'labels' } },
    });
    const req = buildRequest(def, BASE, { title: 'T', tags: ['a'] });
    expect(JSON.parse(req.body!)).toEqual({ title: 'T', labels: ['a'] });
  });

  it('property: any path or query value yields a URL inside the pinned origin and prefix, with the value in exactly its own segment, or is refused', () => {
    const fragments = ['..', '.', '/', '\\', '%2e', '%2F', '?', '#', '@', ':', '//evil.example', 'http://evil.example/x', '\r\n', '\t', ' ', 'é', '😀', '%', '&', '='];
    const value = fc.oneof(
      { arbitrary: fc.constantFrom('..', '.', '/', '?', '#', 'http://evil.example/x'), weight: 3 },
      fc.string(),
      fc.string({ unit: 'grapheme' }),
      fc.array(fc.constantFrom(...fragments), { maxLength: 6 }).map((a) => a.join('')),
      fc.constantFrom(...fragments),
    );
    fc.assert(
      fc.property(value, value, (owner, q) => {
        let req;
        try {
          req = buildRequest(ISSUE, BASE, { owner, repo: 'r', number: 1, verbose: q });
        } catch (err) {
          expect(['rest_host_escape', 'invalid_arguments']).toContain((err as BrokerError).code);
          return;
        }
        expect(withinBase(req.url, BASE)).toBe(true);
        expect(req.url.origin).toBe('https://api.example.com');
        const segments = req.url.pathname.split('/');
        expect(segments).toHaveLength(7);
        expect(segments.slice(0, 3)).toEqual(['', 'v3', 'repos']);
        expect(decodeURIComponent(segments[3]!)).toBe(owner);
        expect(segments.slice(4)).toEqual(['r', 'issues', '1']);
        expect(req.url.searchParams.getAll('v')).toEqual([q]);
        expect(req.url.hash).toBe('');
      }),
      { numRuns: 500 },
    );
  });
});

describe('withinBase', () => {
  it('pins scheme, host, port and prefix at a segment boundary', () => {
    expect(withinBase(new URL('https://api.example.com/v3'), BASE)).toBe(true);
    expect(withinBase(new URL('https://api.example.com/v3/x'), BASE)).toBe(true);
    expect(withinBase(new URL('https://api.example.com/v3x'), BASE)).toBe(false);
    expect(withinBase(new URL('https://api.example.com/v2/x'), BASE)).toBe(false);
    expect(withinBase(new URL('http://api.example.com/v3/x'), BASE)).toBe(false);
    expect(withinBase(new URL('https://api.example.com:8443/v3/x'), BASE)).toBe(false);
    expect(withinBase(new URL('https://u@api.example.com/v3/x'), BASE)).toBe(false);
  });
});

describe('response helpers', () => {
  it('Retry-After in seconds or as an HTTP date, in ms', () => {
    expect(retryAfterMs('3', 0)).toBe(3000);
    expect(retryAfterMs(new Date(10_000).toUTCString(), 4_000)).toBe(6_000);
    expect(retryAfterMs('soon', 0)).toBeUndefined();
    expect(retryAfterMs(null, 0)).toBeUndefined();
  });

  it('the secret mask replaces exact values in text, strings and keys', () => {
    const mask = secretMask(['s3cr3t-value', 'ab']);
    expect(mask.text('x s3cr3t-value y ab')).toBe('x [REDACTED] y ab');
    expect(mask.value({ a: ['Bearer s3cr3t-value'], 's3cr3t-value': 1 })).toEqual({ a: ['Bearer [REDACTED]'], '[REDACTED]': 1 });
  });
});
