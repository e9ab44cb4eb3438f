/**
 * `RestUpstream` against a real loopback HTTP API (test/fixtures/rest-http-fixture.ts), and a
 * second "evil" server that must never see a request (issue 7).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import type { RestServerConfig } from '../../src/config/schema.js';
import { ManualClock, systemClock } from '../../src/shared/clock.js';
import { BrokerError, ConfigError } from '../../src/shared/errors.js';
import { silentLogger } from '../../src/shared/logger.js';
import { Scrubber } from '../../src/shared/scrub.js';
import type { CallOptions } from '../../src/upstream/types.js';
import { RestUpstream } from '../../src/upstream/rest/index.js';
import { startRestFixture, type RestFixture } from '../fixtures/rest-http-fixture.js';

const SECRET = 'sk-test-4f9c2a7b1e8d3c6a';
const KEY = 'key-77aa99bb-secret';

let api: RestFixture;
let evil: RestFixture;

beforeAll(async () => {
  api = await startRestFixture();
  evil = await startRestFixture();
});
afterAll(async () => {
  await api.close();
  await evil.close();
});
beforeEach(() => {
  api.requests.length = 0;
  evil.requests.length = 0;
});

function serverConfig(extra: Record<string, unknown> = {}): RestServerConfig {
  const config = parseConfig(
    {
      mcpServers: {
        api: {
          type: 'rest',
          baseUrl: `${api.origin}/api`,
          headers: { Authorization: 'Bearer ${env:API_TOKEN}', 'X-Api-Key': KEY },
          argHeaders: ['X-Trace'],
          maxResponseBytes: 4096,
          tools: {
            get_item: {
              description: 'Read an item',
              path: '/items/{id}/detail',
              args: {
                id: { in: 'path', schema: { type: 'string' } },
                q: { in: 'query', required: false },
                trace: { in: 'header', name: 'X-Trace' },
              },
            },
            create_item: {
              method: 'POST',
              path: '/items/{id}',
              args: {
                id: { in: 'path' },
                verbose: { in: 'query', name: 'v', schema: { type: 'boolean' } },
                title: { in: 'body', required: true },
                count: { in: 'body', schema: { type: 'integer' } },
              },
            },
            status: { path: '/status/{code}', args: { code: { in: 'path' }, retryAfter: { in: 'query' } } },
            redirect: { path: '/redirect', args: { to: { in: 'query' } } },
            slow: { path: '/slow', args: { ms: { in: 'query', schema: { type: 'integer' } } } },
            text: { path: '/text' },
            array: { path: '/array' },
            binary: { path: '/binary' },
            big: { path: '/big', args: { bytes: { in: 'query', schema: { type: 'integer' } }, tail: { in: 'query', required: false } } },
          },
          ...extra,
        },
      },
    },
    { baseDir: '/tmp', env: { API_TOKEN: SECRET } },
  );
  return config.mcpServers.api as RestServerConfig;
}

async function started(extra: Record<string, unknown> = {}): Promise<RestUpstream> {
  const upstream = new RestUpstream({ name: 'api', config: serverConfig(extra), logger: silentLogger(), clock: systemClock, attemptHeadroomMs: 0 });
  await upstream.start();
  return upstream;
}

function options(more: Partial<CallOptions> = {}): CallOptions {
  return { signal: new AbortController().signal, timeoutMs: 10_000, ...more };
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(BrokerError);
    return (err as BrokerError).code;
  }
  throw new Error('expected a BrokerError');
}

describe('RestUpstream: catalog and lifecycle', () => {
  it('is ready after start, advertises its tools and nothing else', async () => {
    const upstream = await started();
    expect(upstream.kind).toBe('rest');
    expect(upstream.status.state).toBe('ready');
    expect(upstream.capabilities).toEqual({ tools: {} });
    expect(upstream.catalog.tools.map((t) => t.name)).toEqual(['get_item', 'create_item', 'status', 'redirect', 'slow', 'text', 'array', 'binary', 'big']);
    expect(upstream.catalog.prompts).toEqual([]);
    expect(upstream.catalog.resources).toEqual([]);
    expect(upstream.secrets).toEqual([`Bearer ${SECRET}`, KEY]);
    const create = upstream.catalog.tools.find((t) => t.name === 'create_item')!;
    expect(create.inputSchema.required).toEqual(['id', 'title']);
    expect(create.annotations?.readOnlyHint).toBe(false);
  });

  it('close() withdraws the tools and refuses calls; reconnect() makes it ready again', async () => {
    const upstream = await started();
    await upstream.close();
    expect(upstream.status.state).toBe('closed');
    expect(upstream.catalog.tools).toEqual([]);
    expect(await codeOf(upstream.callTool('text', {}, options()))).toBe('upstream_unavailable');
    expect((await upstream.reconnect()).state).toBe('ready');
    expect((await upstream.callTool('text', {}, options())).content).toEqual([{ type: 'text', text: 'plain words' }]);
  });

  it('a disabled server stays disabled with no tools', async () => {
    const upstream = await started({ disabled: true });
    expect(upstream.status.state).toBe('disabled');
    expect(upstream.catalog.tools).toEqual([]);
  });
});

describe('RestUpstream: requests', () => {
  it('maps path, query, header and body arguments', async () => {
    const upstream = await started();
    const result = await upstream.callTool('create_item', { id: 'a/b c', verbose: true, title: 'Hello', count: 3 }, options());
    expect(api.requests).toHaveLength(1);
    const seen = api.requests[0]!;
    expect(seen.method).toBe('POST');
    expect(seen.url).toBe('/api/items/a%2Fb%20c?v=true');
    expect(JSON.parse(seen.body)).toEqual({ title: 'Hello', count: 3 });
    expect(seen.headers['content-type']).toBe('application/json');
    expect(result.isError).toBeUndefined();
    expect((result.structuredContent as { body: unknown }).body).toEqual({ title: 'Hello', count: 3 });

    await upstream.callTool('get_item', { id: '42', q: 'x y', trace: 't-1' }, options());
    expect(api.requests[1]!.url).toBe('/api/items/42/detail?q=x+y');
    expect(api.requests[1]!.headers['x-trace']).toBe('t-1');
    expect(api.requests[1]!.body).toBe('');
  });

  it('arguments outside the allowlist never reach the server and are named to onArgumentsStripped', async () => {
    const upstream = await started();
    const stripped: string[][] = [];
    await upstream.callTool(
      'get_item',
      { id: '1', url: 'http://marker-url.example', Authorization: 'marker-auth', body: { marker: 'marker-body' } },
      options({ onArgumentsStripped: (names) => stripped.push(names) }),
    );
    expect(stripped).toEqual([['Authorization', 'body', 'url']]);
    const seen = JSON.stringify(api.requests);
    expect(seen).not.toContain('marker');
    expect(api.requests[0]!.headers.authorization).toBe(`Bearer ${SECRET}`);
  });

  it('a missing required argument is invalid_arguments and nothing is sent', async () => {
    const upstream = await started();
    expect(await codeOf(upstream.callTool('create_item', { id: 'x' }, options()))).toBe('invalid_arguments');
    expect(api.requests).toHaveLength(0);
  });

  it('arguments that do not fit the advertised inputSchema were sent: now invalid_arguments, unsent, no values in the message', async () => {
    const upstream = await started();
    for (const args of [
      { id: 'x', title: 'Hi', count: 'three-marker' },
      { id: 'x', title: 'Hi', count: 2.5 },
      { id: 'x', title: 'Hi', verbose: 'yes-marker' },
      { id: 'x', title: { marker: 1 } },
    ]) {
      const err = await upstream.callTool('create_item', args, options()).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(BrokerError);
      expect((err as BrokerError).code).toBe('invalid_arguments');
      expect((err as BrokerError).message).toMatch(/^rest tool "create_item": the arguments do not fit its inputSchema \(data\/\w+ must be/);
      expect((err as BrokerError).message).not.toContain('marker');
    }
    expect(api.requests).toHaveLength(0);
    await upstream.callTool('create_item', { id: 'x', title: 'Hi', count: 3, verbose: false }, options());
    expect(api.requests).toHaveLength(1);
  });

  it('a tool whose inputSchema does not compile is a ConfigError at start, naming the tool', async () => {
    const upstream = new RestUpstream({
      name: 'api',
      config: serverConfig({ tools: { odd: { path: '/odd', args: { q: { in: 'query', schema: { type: 'string', pattern: '(' } } } } } }),
      logger: silentLogger(),
      clock: systemClock,
    });
    const err = await upstream.start().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).message).toMatch(/^mcpServers\.api\.tools\.odd\.args: tool "odd": the schema does not compile/);
  });

  it('property: no generated argument value makes a request leave the pinned origin and prefix', async () => {
    const upstream = await started();
    const fragments = [
      '..', '.', '/', '\\', '%2e%2e', '%2E.', '%2F', '%5C', '?', '#', '@', ':', '&', '=', '%', ' ', '\t', '\r\n', '\n', '\0',
      'é', '😀', '\u2028', 'Host: evil', `//127.0.0.1:${evil.port}/x`, `http://127.0.0.1:${evil.port}/`, `${evil.origin}/api/items/1/detail`,
    ];
    const dangerous = ['..', '.', '/', '?', '#', '\r\n', `${evil.origin}/x`, `//127.0.0.1:${evil.port}`];
    const value = fc.oneof(
      { arbitrary: fc.constantFrom(...dangerous), weight: 3 },
      fc.constantFrom(...fragments),
      fc.array(fc.constantFrom(...fragments), { minLength: 1, maxLength: 5 }).map((a) => a.join('')),
      fc.string({ maxLength: 12 }),
      fc.string({ unit: 'grapheme', maxLength: 8 }),
    );
    const where = fc.constantFrom('path', 'query', 'header');
    await fc.assert(
      fc.asyncProperty(value, where, async (v, at) => {
        const before = api.requests.length;
        const args = { id: at === 'path' ? v : 'fixed', ...(at === 'query' ? { q: v } : {}), ...(at === 'header' ? { trace: v } : {}) };
        let sent = true;
        try {
          await upstream.callTool('get_item', args, options());
        } catch (err) {
          sent = false;
          expect(['rest_host_escape', 'invalid_arguments']).toContain((err as BrokerError).code);
        }
        expect(evil.requests).toHaveLength(0);
        expect(api.requests.length).toBe(before + (sent ? 1 : 0));
        if (!sent) return;
        const seen = api.requests[before]!;
        const target = new URL(seen.url, api.origin);
        expect(target.origin).toBe(api.origin);
        const segments = target.pathname.split('/');
        expect(segments).toHaveLength(5);
        expect(segments.slice(0, 3)).toEqual(['', 'api', 'items']);
        expect(segments[4]).toBe('detail');
        expect(decodeURIComponent(segments[3]!)).toBe(at === 'path' ? v : 'fixed');
        if (at === 'query') expect(target.searchParams.getAll('q')).toEqual([v]);
        if (at === 'header') {
          expect(seen.headers['x-trace']).toBe(Buffer.from(v.trim(), 'latin1').toString('latin1'));
          expect(Object.keys(seen.headers).filter((h) => h === 'host' || h === 'x-trace')).toHaveLength(2);
          expect(seen.headers.host).toBe(`127.0.0.1:${api.port}`);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('a redirect to another origin is refused (rest_host_escape) and not followed', async () => {
    const upstream = await started();
    expect(await codeOf(upstream.callTool('redirect', { to: `${evil.origin}/api/items/1/detail` }, options()))).toBe('rest_host_escape');
    expect(api.requests).toHaveLength(1);
    expect(evil.requests).toHaveLength(0);
  });

  it('a redirect on the same origin but outside the prefix is refused', async () => {
    const upstream = await started();
    expect(await codeOf(upstream.callTool('redirect', { to: '/admin/secrets' }, options()))).toBe('rest_host_escape');
    expect(await codeOf(upstream.callTool('redirect', { to: '/api/../admin' }, options()))).toBe('rest_host_escape');
    expect(api.requests.map((r) => r.url.split('?')[0])).toEqual(['/api/redirect', '/api/redirect']);
  });

  it('a redirect inside the pinned base is followed, keeping the configured headers', async () => {
    const upstream = await started();
    const result = await upstream.callTool('redirect', { to: '/api/text' }, options());
    expect(result.content).toEqual([{ type: 'text', text: 'plain words' }]);
    expect(api.requests.map((r) => r.url.split('?')[0])).toEqual(['/api/redirect', '/api/text']);
    expect(api.requests[1]!.headers['x-api-key']).toBe(KEY);
  });
});

describe('RestUpstream: responses', () => {
  it('a JSON object becomes structuredContent plus a text block', async () => {
    const upstream = await started();
    const result = await upstream.callTool('get_item', { id: '7' }, options());
    expect(result.structuredContent).toMatchObject({ method: 'GET', path: '/api/items/7/detail' });
    expect(result.content).toHaveLength(1);
    expect(JSON.parse((result.content[0] as { text: string }).text)).toMatchObject({ path: '/api/items/7/detail' });
  });

  it('a JSON array, text and binary bodies become text only', async () => {
    const upstream = await started();
    const array = await upstream.callTool('array', {}, options());
    expect(array.structuredContent).toBeUndefined();
    expect(array.content).toEqual([{ type: 'text', text: '[1,2,3]' }]);
    expect((await upstream.callTool('text', {}, options())).content).toEqual([{ type: 'text', text: 'plain words' }]);
    const binary = await upstream.callTool('binary', {}, options());
    expect(binary.content).toEqual([{ type: 'text', text: 'HTTP 200 OK: 5 bytes of application/octet-stream (binary body not shown)' }]);
  });

  it('a body past maxResponseBytes is cut, and says so', async () => {
    const upstream = await started();
    const result = await upstream.callTool('big', { bytes: 100_000 }, options());
    const text = (result.content[0] as { text: string }).text;
    expect(text.startsWith('x'.repeat(4096) + '\n[body cut at maxResponseBytes = 4096 bytes]')).toBe(true);
  });

  it('a secret across the maxResponseBytes cut is scrubbed whole, then the body is cut (regression: its first characters were kept)', async () => {
    const token = 'ghp_' + 'Q7'.repeat(20);
    const scrubber = new Scrubber();
    const upstream = new RestUpstream({ name: 'api', config: serverConfig(), logger: silentLogger(), clock: systemClock, attemptHeadroomMs: 0, scrub: (t) => scrubber.text(t) });
    await upstream.start();
    // The token starts 15 bytes before the cut at 4096: the cut kept its first 15 characters.
    const result = await upstream.callTool('big', { bytes: 4080, tail: ` ${token} and more` }, options());
    const text = scrubber.text((result.content[0] as { text: string }).text);
    expect(text).not.toContain(token.slice(0, 8));
    expect(text.startsWith(`${'x'.repeat(4080)} [REDACTED]`)).toBe(true);
    expect(text).toContain('[body cut at maxResponseBytes = 4096 bytes]');
    expect(text).not.toContain('and more');
  });

  it('a cut body is never longer than maxResponseBytes and one marker, whatever the margin past the cut redacted (regression: all of it up to that redaction was shown)', async () => {
    const scrubber = new Scrubber();
    const upstream = new RestUpstream({ name: 'api', config: serverConfig(), logger: silentLogger(), clock: systemClock, attemptHeadroomMs: 0, scrub: (t) => scrubber.text(t) });
    await upstream.start();
    // Nothing secret at the cut; a password 3,000 bytes into the margin, which the scrub redacts.
    const result = await upstream.callTool('big', { bytes: 4096 + 3000, tail: ' password=hunter2hunter2 ' + 'c'.repeat(900) }, options());
    const text = (result.content[0] as { text: string }).text;
    expect(text.startsWith('x'.repeat(4096) + '\n[body cut at maxResponseBytes = 4096 bytes]')).toBe(true);
    expect(text).not.toContain('password');
  });

  it('4xx is a result with isError, the status and the body', async () => {
    const upstream = await started();
    const result = await upstream.callTool('status', { code: '404' }, options());
    expect(result.isError).toBe(true);
    expect(result.content).toEqual([{ type: 'text', text: 'HTTP 404 Not Found\n{"error":"status 404"}' }]);
  });

  it('429 and 5xx throw upstream_http with the status and Retry-After in ms', async () => {
    const upstream = await started();
    for (const [code, retryAfter, expected] of [['429', '3', 3000], ['503', undefined, undefined], ['500', '0', 0]] as const) {
      try {
        await upstream.callTool('status', { code, ...(retryAfter !== undefined ? { retryAfter } : {}) }, options());
        throw new Error('expected a throw');
      } catch (err) {
        expect((err as BrokerError).code).toBe('upstream_http');
        expect((err as BrokerError).data).toEqual({ httpStatus: Number(code), ...(expected !== undefined ? { retryAfterMs: expected } : {}) });
      }
    }
  });

  it('the configured header values are sent, and masked in the result', async () => {
    const upstream = await started();
    const result = await upstream.callTool('get_item', { id: '1' }, options());
    expect(api.requests[0]!.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(api.requests[0]!.headers['x-api-key']).toBe(KEY);
    const out = JSON.stringify(result);
    expect(out).not.toContain(SECRET);
    expect(out).not.toContain(KEY);
    expect((result.structuredContent as { headers: Record<string, string> }).headers['x-api-key']).toBe('[REDACTED]');
  });
});

describe('RestUpstream: abort and timeout', () => {
  it('an abort of the call signal ends the request and rethrows its reason', async () => {
    const upstream = await started();
    const controller = new AbortController();
    const reason = new Error('deadline');
    const call = upstream.callTool('slow', { ms: 20_000 }, options({ signal: controller.signal }));
    await expect.poll(() => api.requests.length, { timeout: 5_000 }).toBe(1);
    controller.abort(reason);
    await expect(call).rejects.toBe(reason);
  });

  it('an attempt past timeoutMs plus the headroom is a transport_error (injected clock)', async () => {
    const clock = new ManualClock();
    const upstream = new RestUpstream({ name: 'api', config: serverConfig(), logger: silentLogger(), clock, attemptHeadroomMs: 1_000 });
    await upstream.start();
    const call = upstream.callTool('slow', { ms: 20_000 }, options({ timeoutMs: 300 })).catch((e: unknown) => e);
    await expect.poll(() => api.requests.length, { timeout: 5_000 }).toBe(1);
    await clock.advance(1_299);
    expect(clock.pending).toBe(1);
    await clock.advance(1);
    const err = await call;
    expect((err as BrokerError).code).toBe('transport_error');
    expect((err as BrokerError).message).toMatch(/no answer within 1300 ms/);
    expect(clock.pending).toBe(0);
  });

  it('a finished attempt leaves no timer behind', async () => {
    const clock = new ManualClock();
    const upstream = new RestUpstream({ name: 'api', config: serverConfig(), logger: silentLogger(), clock });
    await upstream.start();
    await upstream.callTool('text', {}, options());
    await upstream.callTool('status', { code: '503' }, options()).catch(() => undefined);
    expect(clock.pending).toBe(0);
  });

  it('a refused connection is a transport_error', async () => {
    const closed = await startRestFixture();
    await closed.close();
    const upstream = await started({ baseUrl: `${closed.origin}/api` });
    const err = await upstream.callTool('text', {}, options()).catch((e: unknown) => e);
    expect((err as BrokerError).code).toBe('transport_error');
    expect((err as BrokerError).message).toMatch(/ECONNREFUSED/);
  });
});
