import { describe, expect, it } from 'vitest';
import { JsonSchemas } from '../../src/shared/json-schemas.js';

describe('JsonSchemas', () => {
  it('checks values and names the failing path and rule, never the value', () => {
    const schemas = new JsonSchemas();
    const schema = { type: 'object', properties: { qty: { type: 'integer' } }, required: ['qty'] };
    expect(schemas.check(schema, { qty: 2 })).toBeUndefined();
    const why = schemas.check(schema, { qty: 'secret-value' });
    expect(why).toContain('qty');
    expect(why).not.toContain('secret-value');
  });

  it('reads a schema without $schema as draft-07, as SDK v1 did: array-form items is a tuple', () => {
    const schemas = new JsonSchemas();
    const tuple = { type: 'array', items: [{ type: 'string' }, { type: 'number' }] };
    expect(schemas.compileError(tuple)).toBeUndefined();
    expect(schemas.check(tuple, ['a', 1])).toBeUndefined();
    expect(schemas.check(tuple, [1, 'a'])).toBeDefined();
  });

  it('checks formats', () => {
    const schemas = new JsonSchemas();
    expect(schemas.check({ type: 'string', format: 'email' }, 'not an address')).toBeDefined();
    expect(schemas.check({ type: 'string', format: 'email' }, 'a@example.com')).toBeUndefined();
  });
});
