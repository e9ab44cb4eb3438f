/**
 * REST upstreams through the real CLI (issue 7): a hand-configured API and one imported from an
 * OpenAPI file, served as tools next to each other, against a loopback HTTP API that records
 * every request (test/fixtures/rest-http-fixture.ts) and an "evil" server that must see none.
 * Build first (`npx tsc -p .`).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startRestFixture, type RestFixture } from '../fixtures/rest-http-fixture.js';
import { spawnRawBroker, startBroker, type RecordLine, type StartedBroker } from './helpers.js';

const TOKEN = 'sk-e2e-rest-9b1f0c7d2e4a6b8c';
const KEY = 'rest-e2e-key-55d0a1c3';

let api: RestFixture;
let evil: RestFixture;
let specDir: string;
let broker: StartedBroker;

function petstore(serverUrl: string): object {
  const ok = { 200: { description: 'ok' } };
  return {
    openapi: '3.0.3',
    info: { title: 'pets', version: '1.0.0' },
    servers: [{ url: serverUrl }],
    paths: {
      '/pets': {
        get: { operationId: 'listPets', parameters: [{ name: 'limit', in: 'query', schema: { type: 'integer' } }], responses: ok },
        post: {
          operationId: 'createPet',
          requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/NewPet' } } } },
          responses: ok,
        },
      },
      '/pets/{petId}': { get: { operationId: 'getPet', parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'string' } }], responses: ok } },
    },
    components: {
      schemas: { NewPet: { type: 'object', required: ['name'], properties: { name: { type: 'string' }, age: { type: 'integer', minimum: 0 } } } },
    },
  };
}

function servers(): Record<string, unknown> {
  return {
    api: {
      type: 'rest',
      baseUrl: `${api.origin}/api`,
      headers: { Authorization: 'Bearer ${env:REST_E2E_TOKEN}', 'X-Api-Key': '${env:REST_E2E_KEY}' },
      tools: {
        get_item: { description: 'Read an item', path: '/items/{id}', args: { id: { in: 'path' }, q: { in: 'query' } } },
        create_item: {
          method: 'POST',
          path: '/items/{id}',
          args: { id: { in: 'path' }, verbose: { in: 'query', name: 'v', schema: { type: 'boolean' } }, title: { in: 'body', required: true } },
        },
        flaky_read: { path: '/flaky/{key}', args: { key: { in: 'path' } } },
        flaky_write: { method: 'POST', path: '/flaky/{key}', args: { key: { in: 'path' } } },
        flaky_search: { method: 'POST', path: '/flaky/{key}', readOnly: true, args: { key: { in: 'path' } } },
        status: { path: '/status/{code}', args: { code: { in: 'path' } } },
        redirect: { path: '/redirect', args: { to: { in: 'query' } } },
        slow: { path: '/slow', timeoutMs: 500, args: { ms: { in: 'query', schema: { type: 'integer' } } } },
      },
    },
    pets: { type: 'rest', openapi: join(specDir, 'pets.json'), operations: ['getPet', 'createPet'] },
  };
}

function text(result: CallToolResult): string {
  return result.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
}

function outcomeOf(result: CallToolResult): string {
  return (result._meta as Record<string, unknown>)['mcp-broker/outcome'] as string;
}

async function call(name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await broker.client.callTool({ name, arguments: args })) as CallToolResult;
}

async function lastRecord(): Promise<RecordLine> {
  const records = await broker.records();
  return records[records.length - 1]!;
}

beforeAll(async () => {
  api = await startRestFixture();
  evil = await startRestFixture();
  specDir = mkdtempSync(join(tmpdir(), 'mcp-broker-rest-e2e-'));
  writeFileSync(join(specDir, 'pets.json'), JSON.stringify(petstore(`${api.origin}/api`)));
  broker = await startBroker({
    servers: servers(),
    extra: { broker: { retry: { maxRetries: 2, baseDelayMs: 10 } } },
    env: { REST_E2E_TOKEN: TOKEN, REST_E2E_KEY: KEY },
    args: ['--log-level', 'trace'],
  });
});

afterAll(async () => {
  await broker?.close();
  await api?.close();
  await evil?.close();
  rmSync(specDir, { recursive: true, force: true });
});

beforeEach(() => {
  api.requests.length = 0;
  evil.requests.length = 0;
});

describe('rest upstreams through the CLI', () => {
  it('advertises the hand-configured tools and exactly the two allowlisted OpenAPI operations', async () => {
    const { tools } = await broker.client.listTools();
    const names = tools.map((t) => t.name);
    expect(names.filter((n) => n.startsWith('pets__')).sort()).toEqual(['pets__createPet', 'pets__getPet']);
    expect(names).toContain('api__get_item');
    const create = tools.find((t) => t.name === 'api__create_item')!;
    expect(create.inputSchema.required).toEqual(['id', 'title']);
    expect(create.annotations?.readOnlyHint).toBe(false);
  });

  it('maps path, query and body, strips arguments outside the allowlist and names them in the record', async () => {
    const result = await call('api__create_item', { id: 'a/b', verbose: true, title: 'Hi', smuggled: 'marker-xyz' });
    expect(outcomeOf(result)).toBe('ok');
    expect(api.requests).toHaveLength(1);
    expect(api.requests[0]!.method).toBe('POST');
    expect(api.requests[0]!.url).toBe('/api/items/a%2Fb?v=true');
    expect(JSON.parse(api.requests[0]!.body)).toEqual({ title: 'Hi' });
    expect(JSON.stringify(api.requests)).not.toContain('marker-xyz');
    const record = await lastRecord();
    expect(record).toMatchObject({ subject: 'api/create_item', outcome: 'ok', attempts: 1, stripped: ['smuggled'] });
  });

  it('an OpenAPI-imported tool calls servers[0].url', async () => {
    const result = await call('pets__createPet', { name: 'Rex' });
    expect(outcomeOf(result)).toBe('ok');
    expect(api.requests.map((r) => [r.method, r.url, r.body])).toEqual([['POST', '/api/pets', '{"name":"Rex"}']]);
    expect((await call('pets__getPet', { petId: '7' })).structuredContent).toMatchObject({ path: '/api/pets/7' });
  });

  it('arguments outside the inputSchema (a string for an integer, below an OpenAPI minimum) were sent: now invalid_arguments, unsent', async () => {
    for (const age of ['three', -4]) {
      const result = await call('pets__createPet', { name: 'Rex', age });
      expect(result.isError).toBe(true);
      expect(outcomeOf(result)).toBe('invalid_arguments');
      expect(text(result)).toContain('data/age must be');
      expect((await lastRecord()).outcome).toBe('invalid_arguments');
    }
    expect(api.requests).toHaveLength(0);
  });

  it('a path value that would leave the pinned prefix is guard_error / rest_host_escape, unsent', async () => {
    const result = await call('api__get_item', { id: '..' });
    expect(result.isError).toBe(true);
    expect(outcomeOf(result)).toBe('guard_error');
    expect(api.requests).toHaveLength(0);
    const record = await lastRecord();
    expect(record.outcome).toBe('guard_error');
    expect(record.attempts).toBe(0); // nothing was sent (issue 17 §11)
    expect(record.reason).toContain('rest_host_escape');
  });

  it('a cross-origin redirect is refused: guard_error / rest_host_escape, and the other origin sees nothing', async () => {
    const result = await call('api__redirect', { to: `${evil.origin}/api/items/1` });
    expect(outcomeOf(result)).toBe('guard_error');
    expect(text(result)).toContain('rest_host_escape');
    expect(api.requests).toHaveLength(1);
    expect(evil.requests).toHaveLength(0);
  });

  it('503 twice then 200: a read-only tool is retried (attempts 3), a write is not (attempts 1)', async () => {
    const read = await call('api__flaky_read', { key: 'r1' });
    expect(outcomeOf(read)).toBe('ok');
    expect(read.structuredContent).toMatchObject({ ok: true, attempt: 3 });
    expect(await lastRecord()).toMatchObject({ subject: 'api/flaky_read', outcome: 'ok', attempts: 3 });
    expect(api.requests).toHaveLength(3);

    const write = await call('api__flaky_write', { key: 'w1' });
    expect(outcomeOf(write)).toBe('upstream_error');
    expect(await lastRecord()).toMatchObject({ subject: 'api/flaky_write', outcome: 'upstream_error', attempts: 1 });
    expect(api.requests.filter((r) => r.method === 'POST')).toHaveLength(1);

    // A POST marked `readOnly: true` in its tools entry is retried like a read.
    expect(outcomeOf(await call('api__flaky_search', { key: 's1' }))).toBe('ok');
    expect(await lastRecord()).toMatchObject({ subject: 'api/flaky_search', outcome: 'ok', attempts: 3 });
  });

  it('4xx is tool_error with the status and body', async () => {
    const result = await call('api__status', { code: '404' });
    expect(outcomeOf(result)).toBe('tool_error');
    expect(text(result)).toContain('HTTP 404 Not Found');
    expect(text(result)).toContain('status 404');
  });

  it('a per-tool timeoutMs of a rest tool is its deadline', async () => {
    const started = Date.now();
    const result = await call('api__slow', { ms: 10_000 });
    expect(outcomeOf(result)).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(8_000);
    expect(await lastRecord()).toMatchObject({ subject: 'api/slow', outcome: 'timeout' });
  });

  it('secrets in headers reach the API and nothing else: not results, records or logs', async () => {
    const result = await call('api__get_item', { id: 'echo' });
    expect(api.requests[0]!.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(api.requests[0]!.headers['x-api-key']).toBe(KEY);
    expect(outcomeOf(result)).toBe('ok');
    expect(JSON.stringify(result)).toContain('[REDACTED]');
    for (const secret of [TOKEN, KEY]) {
      expect(JSON.stringify(result)).not.toContain(secret);
      expect(readFileSync(broker.recordsPath, 'utf8')).not.toContain(secret);
      expect(broker.stderr()).not.toContain(secret);
    }
    expect(broker.stderr().length).toBeGreaterThan(0);
  });
});

describe('rest tools under policy.mode read-only', () => {
  it('read-only rest tools run; writes are denied and never reach the API', async () => {
    const ro = await startBroker({ servers: servers(), extra: { policy: { mode: 'read-only' } }, env: { REST_E2E_TOKEN: TOKEN, REST_E2E_KEY: KEY } });
    try {
      const read = (await ro.client.callTool({ name: 'api__get_item', arguments: { id: '1' } })) as CallToolResult;
      expect(outcomeOf(read)).toBe('ok');
      const write = (await ro.client.callTool({ name: 'api__create_item', arguments: { id: '1', title: 'x' } })) as CallToolResult;
      expect(outcomeOf(write)).toBe('denied');
      expect(api.requests.map((r) => r.method)).toEqual(['GET']);
    } finally {
      await ro.close();
    }
  });
});

describe('rest upstream config errors through the CLI', () => {
  it('an unknown operationId exits 2 naming mcpServers.<key>.operations', async () => {
    const raw = spawnRawBroker({ servers: { pets: { type: 'rest', openapi: join(specDir, 'pets.json'), operations: ['getPet', 'nope'] } } });
    try {
      raw.send({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
      expect(await raw.exited).toBe(2);
      expect(raw.stderr()).toMatch(/mcpServers\.pets\.operations: no operation with operationId "nope"/);
    } finally {
      await raw.close();
    }
  });

  it('a header argument outside argHeaders exits 2 at load', async () => {
    const raw = spawnRawBroker({ servers: { api: { type: 'rest', baseUrl: 'http://127.0.0.1:9/api', tools: { t: { path: '/x', args: { a: { in: 'header', name: 'Authorization' } } } } } } });
    try {
      expect(await raw.exited).toBe(2);
      expect(raw.stderr()).toMatch(/mcpServers\.api\.tools\.t\.args\.a: header "Authorization" can never be set by an argument/);
    } finally {
      await raw.close();
    }
  });
});
