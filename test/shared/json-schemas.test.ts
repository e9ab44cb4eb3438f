import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { JsonSchemas, MAX_SCHEMA_DEPTH } from '../../src/shared/json-schemas.js';
import { Scrubber } from '../../src/shared/scrub.js';

describe('JsonSchemas', () => {
  it('checks values and names the failing path and rule, never the value', () => {
    const schemas = new JsonSchemas();
    const schema = { type: 'object', properties: { qty: { type: 'integer' } }, required: ['qty'] };
    expect(schemas.check(schema, { qty: 2 })).toBeUndefined();
    const why = schemas.check(schema, { qty: 'secret-value' });
    expect(why).toContain('qty');
    expect(why).not.toContain('secret-value');
  });

  it('issue 13 §5: reads a schema without $schema as JSON Schema 2020-12 (prefixItems, unevaluatedProperties, dependentSchemas)', () => {
    const schemas = new JsonSchemas();
    // Under draft-07 `prefixItems` is unknown and `items: false` forbids every item.
    const pair = { type: 'array', prefixItems: [{ type: 'string' }, { type: 'number' }], items: false };
    expect(schemas.check(pair, ['a', 1])).toBeUndefined();
    expect(schemas.check(pair, ['a', 1, 2])).toBeDefined();
    expect(schemas.check(pair, [1, 'a'])).toBeDefined();
    const closed = { type: 'object', allOf: [{ properties: { a: { type: 'string' } } }], unevaluatedProperties: false };
    expect(schemas.check(closed, { a: 'x' })).toBeUndefined();
    expect(schemas.check(closed, { a: 'x', b: 1 })).toBeDefined();
    const dependent = { type: 'object', dependentSchemas: { card: { required: ['billing'] } } };
    expect(schemas.check(dependent, { card: 1, billing: 2 })).toBeUndefined();
    expect(schemas.check(dependent, { card: 1 })).toBeDefined();
    // Array-form `items` is draft-07 only: without $schema it does not compile.
    expect(schemas.compileError({ type: 'array', items: [{ type: 'string' }] })).toMatch(/does not compile/);
  });

  it('honours a declared draft-07 $schema: array-form items is a tuple', () => {
    const schemas = new JsonSchemas();
    const tuple = { $schema: 'http://json-schema.org/draft-07/schema#', type: 'array', items: [{ type: 'string' }, { type: 'number' }] };
    expect(schemas.compileError(tuple)).toBeUndefined();
    expect(schemas.check(tuple, ['a', 1])).toBeUndefined();
    expect(schemas.check(tuple, [1, 'a'])).toBeDefined();
    expect(schemas.compileError({ $schema: 'https://example.com/my-dialect', type: 'string' })).toMatch(/unsupported dialect/);
  });

  it('names a refused $ref whole, so a secret in it is scrubbed whole (regression: it was cut at 200 characters first, leaving its first characters)', () => {
    const token = 'ghp_' + 'Q7'.repeat(20);
    const ref = `https://schemas.example.com/${'y'.repeat(150)}/${token}/x.json`;
    const why = new JsonSchemas().check({ type: 'object', properties: { item: { $ref: ref } } }, { item: 'x' })!;
    expect(new Scrubber().text(why)).not.toContain(token.slice(0, 12));
    expect(why).toContain(ref);
  });

  it('issue 13 §5: a remote $ref is a compile error naming it, and nothing is fetched', async () => {
    let requests = 0;
    const server = createServer((_req, res) => {
      requests++;
      res.setHeader('content-type', 'application/schema+json');
      res.end('{"type":"string"}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/item.json`;
    try {
      const schemas = new JsonSchemas();
      const remote = { type: 'object', properties: { item: { $ref: url } } };
      expect(schemas.compileError(remote)).toBe(
        `the schema does not compile: the reference "${url}" at /properties/item/$ref is not inside the schema; remote references are never fetched`,
      );
      expect(schemas.check(remote, { item: 'x' })).toMatch(/never fetched/);
      // Local references, by pointer or by an $id the schema declares, still resolve.
      const local = {
        $id: 'https://example.com/root.json',
        type: 'object',
        properties: { a: { $ref: '#/$defs/A' }, b: { $ref: 'https://example.com/b.json' } },
        $defs: { A: { type: 'string' }, B: { $id: 'https://example.com/b.json', type: 'number' } },
      };
      expect(schemas.check(local, { a: 'x', b: 1 })).toBeUndefined();
      expect(schemas.check(local, { a: 1, b: 'x' })).toBeDefined();
      // Let a fetch, had one been started, reach the server before counting.
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(requests).toBe(0);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it(`issue 13 §5: composition depth is bounded at MAX_SCHEMA_DEPTH (${MAX_SCHEMA_DEPTH}) levels`, () => {
    const schemas = new JsonSchemas();
    const nest = (levels: number) => {
      let s: object = { type: 'string' };
      for (let i = 0; i < levels; i++) s = { allOf: [s] };
      return s;
    };
    // Each allOf level is two JSON levels (the object and its array).
    const fits = nest((MAX_SCHEMA_DEPTH - 1) / 2 | 0);
    expect(schemas.compileError(fits)).toBeUndefined();
    expect(schemas.check(fits, 'x')).toBeUndefined();
    expect(schemas.compileError(nest(5000))).toMatch(new RegExp(`nested deeper than ${MAX_SCHEMA_DEPTH} levels`));
  });

  it('two schemas declaring one $id are each checked by their own rules (regression: the second got the first one\'s validator)', () => {
    const schemas = new JsonSchemas();
    const asString = { $id: 'https://example.com/shared.json', type: 'string' };
    const asNumber = { $id: 'https://example.com/shared.json', type: 'number' };
    expect(schemas.check(asString, 's')).toBeUndefined();
    expect(schemas.check(asNumber, 1)).toBeUndefined();
    expect(schemas.check(asNumber, 's')).toBeDefined();
  });

  it('checks formats', () => {
    const schemas = new JsonSchemas();
    expect(schemas.check({ type: 'string', format: 'email' }, 'not an address')).toBeDefined();
    expect(schemas.check({ type: 'string', format: 'email' }, 'a@example.com')).toBeUndefined();
  });
});
