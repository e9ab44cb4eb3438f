/**
 * OpenAPI import for rest upstreams (issue 7 §3): an allowlist of operationIds from a local 3.x
 * file becomes tools, parsed by @apidevtools/swagger-parser; bad files and unknown operations
 * are ConfigErrors naming `mcpServers.<key>.openapi` / `.operations`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import type { RestServerConfig } from '../../src/config/schema.js';
import { systemClock } from '../../src/shared/clock.js';
import { ConfigError } from '../../src/shared/errors.js';
import { silentLogger } from '../../src/shared/logger.js';
import { RestUpstream } from '../../src/upstream/rest/index.js';
import { startRestFixture, type RestFixture } from '../fixtures/rest-http-fixture.js';

let api: RestFixture;
let dir: string;

/** Three operations; `components` reached through `$ref`s. */
function petstore(serverUrl: string): object {
  return {
    openapi: '3.0.3',
    info: { title: 'pets', version: '1.0.0' },
    servers: [{ url: serverUrl }],
    paths: {
      '/pets': {
        get: {
          operationId: 'listPets',
          summary: 'List pets',
          parameters: [
            { name: 'limit', in: 'query', schema: { type: 'integer' } },
            { name: 'X-Request-Id', in: 'header', schema: { type: 'string' } },
          ],
          responses: { 200: { description: 'ok' } },
        },
        post: {
          operationId: 'createPet',
          summary: 'Create a pet',
          requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/NewPet' } } } },
          responses: { 201: { description: 'created' } },
        },
      },
      '/pets/{petId}': {
        parameters: [{ $ref: '#/components/parameters/PetId' }],
        get: { operationId: 'getPet', summary: 'Read a pet', description: 'By id.', responses: { 200: { description: 'ok' } } },
      },
    },
    components: {
      parameters: { PetId: { name: 'petId', in: 'path', required: true, description: 'the pet', schema: { type: 'string' } } },
      schemas: {
        NewPet: {
          type: 'object',
          required: ['name'],
          properties: { name: { type: 'string', description: 'its name' }, tag: { type: 'string' } },
        },
      },
    },
  };
}

function writeSpec(name: string, content: unknown): string {
  const file = join(dir, name);
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

function upstreamFor(server: Record<string, unknown>): RestUpstream {
  const config = parseConfig({ mcpServers: { pets: { type: 'rest', ...server } } }, { baseDir: dir, env: {} });
  return new RestUpstream({ name: 'pets', config: config.mcpServers.pets as RestServerConfig, logger: silentLogger(), clock: systemClock });
}

async function startError(server: Record<string, unknown>): Promise<ConfigError> {
  const err = await upstreamFor(server).start().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return err as ConfigError;
}

const options = () => ({ signal: new AbortController().signal, timeoutMs: 10_000 });

beforeAll(async () => {
  api = await startRestFixture();
  dir = mkdtempSync(join(tmpdir(), 'mcp-broker-openapi-'));
  writeSpec('api.json', petstore(`${api.origin}/api`));
});
afterAll(async () => {
  await api.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  api.requests.length = 0;
});

describe('OpenAPI import', () => {
  it('a file with three operations, two allowlisted, advertises exactly two tools', async () => {
    const upstream = upstreamFor({ openapi: './api.json', operations: ['getPet', 'createPet'] });
    await upstream.start();
    expect(upstream.catalog.tools.map((t) => t.name)).toEqual(['getPet', 'createPet']);
    const [getPet, createPet] = upstream.catalog.tools;
    expect(getPet!.description).toBe('Read a pet\n\nBy id.');
    expect(getPet!.inputSchema).toEqual({ type: 'object', properties: { petId: { type: 'string', description: 'the pet' } }, required: ['petId'] });
    expect(getPet!.annotations?.readOnlyHint).toBe(true);
    expect(createPet!.inputSchema).toEqual({
      type: 'object',
      properties: { name: { type: 'string', description: 'its name' }, tag: { type: 'string' } },
      required: ['name'],
    });
    expect(createPet!.annotations?.readOnlyHint).toBe(false);
  });

  it('imported tools call servers[0].url with path parameters and a JSON body', async () => {
    const upstream = upstreamFor({ openapi: './api.json', operations: ['getPet', 'createPet'] });
    await upstream.start();
    await upstream.callTool('getPet', { petId: 'rex/1' }, options());
    await upstream.callTool('createPet', { name: 'Rex', tag: 'dog', owner: 'stripped' }, options());
    expect(api.requests.map((r) => [r.method, r.url, r.body])).toEqual([
      ['GET', '/api/pets/rex%2F1', ''],
      ['POST', '/api/pets', '{"name":"Rex","tag":"dog"}'],
    ]);
  });

  it('an OpenAPI minimum was not enforced: an argument below it is invalid_arguments and nothing is sent', async () => {
    const spec = petstore(`${api.origin}/api`) as { components: { schemas: { NewPet: { properties: Record<string, object> } } } };
    spec.components.schemas.NewPet.properties.age = { type: 'integer', minimum: 0 };
    writeSpec('ages.json', spec);
    const upstream = upstreamFor({ openapi: './ages.json', operations: ['createPet'] });
    await upstream.start();
    for (const age of [-4, 'three']) {
      const err = await upstream.callTool('createPet', { name: 'Rex', age }, options()).catch((e: unknown) => e);
      expect((err as { code?: string }).code).toBe('invalid_arguments');
      expect((err as Error).message).toContain('data/age must be');
    }
    expect(api.requests).toHaveLength(0);
    await upstream.callTool('createPet', { name: 'Rex', age: 0 }, options());
    expect(api.requests.map((r) => r.body)).toEqual(['{"name":"Rex","age":0}']);
  });

  it('baseUrl, when set, wins over servers[0].url', async () => {
    writeSpec('elsewhere.json', petstore('https://unreachable.invalid/v1'));
    const upstream = upstreamFor({ openapi: './elsewhere.json', operations: ['getPet'], baseUrl: `${api.origin}/api` });
    await upstream.start();
    await upstream.callTool('getPet', { petId: '9' }, options());
    expect(api.requests.map((r) => r.url)).toEqual(['/api/pets/9']);
  });

  it('a header parameter must be in argHeaders', async () => {
    const err = await startError({ openapi: './api.json', operations: ['listPets'] });
    expect(err.message).toMatch(/^mcpServers\.pets\.operations: operation "listPets" cannot be served: args\.X-Request-Id: header "X-Request-Id" is not in "argHeaders"/);
    const upstream = upstreamFor({ openapi: './api.json', operations: ['listPets'], argHeaders: ['x-request-id'] });
    await upstream.start();
    await upstream.callTool('listPets', { limit: 2, 'X-Request-Id': 'r-1' }, options());
    expect(api.requests[0]!.url).toBe('/api/pets?limit=2');
    expect(api.requests[0]!.headers['x-request-id']).toBe('r-1');
  });

  it('an unknown operationId is a ConfigError naming operations', async () => {
    const err = await startError({ openapi: './api.json', operations: ['getPet', 'deletePet'] });
    expect(err.message).toMatch(/^mcpServers\.pets\.operations: no operation with operationId "deletePet"/);
  });

  it('a missing, unparsable or invalid file is a ConfigError naming openapi', async () => {
    expect((await startError({ openapi: './missing.json', operations: ['getPet'] })).message).toMatch(/^mcpServers\.pets\.openapi: cannot load .*missing\.json/);
    writeSpec('broken.json', '{"openapi": "3.0.3", ');
    expect((await startError({ openapi: './broken.json', operations: ['getPet'] })).message).toMatch(/^mcpServers\.pets\.openapi: cannot load/);
    writeSpec('invalid.json', { openapi: '3.0.3', info: { title: 't' }, paths: {} });
    expect((await startError({ openapi: './invalid.json', operations: ['getPet'] })).message).toMatch(/^mcpServers\.pets\.openapi: cannot load/);
  });

  it('Swagger 2.0 is refused: only 3.x', async () => {
    writeSpec('swagger.json', { swagger: '2.0', info: { title: 't', version: '1' }, paths: {} });
    expect((await startError({ openapi: './swagger.json', operations: ['getPet'] })).message).toMatch(
      /^mcpServers\.pets\.openapi: .*is Swagger 2\.0; only OpenAPI 3\.x is supported/,
    );
  });

  it('a relative servers[0].url without baseUrl is a ConfigError', async () => {
    writeSpec('relative.json', petstore('/v1'));
    expect((await startError({ openapi: './relative.json', operations: ['getPet'] })).message).toMatch(/^mcpServers\.pets\.openapi: servers\[0\]\.url must be an absolute/);
  });

  it('an operation named like a hand-written tool is a ConfigError', async () => {
    const err = await startError({ openapi: './api.json', operations: ['getPet'], tools: { getPet: { path: '/x' } } });
    expect(err.message).toMatch(/^mcpServers\.pets\.operations: operation "getPet" has the name of a tool in "tools"/);
  });
});
