/**
 * `x-mcp-header` (2026-07-28 Streamable HTTP, "Schema Extension"; issue 14 §2): which marks are
 * valid, and the `Mcp-Param-*` headers a call gets. Cases from the spec's rules.
 */
import { describe, expect, it } from 'vitest';
import { mcpParamHeaders, paramHeaderMismatch, scanMcpHeaders } from '../../src/upstream/mcp-param-headers.js';

const obj = (properties: Record<string, unknown>, more: Record<string, unknown> = {}) => ({ type: 'object', properties, ...more });

describe('scanMcpHeaders', () => {
  it('collects marks on primitive properties reached through properties, at any depth', () => {
    const scan = scanMcpHeaders(obj({ region: { type: 'string', 'x-mcp-header': 'Region' }, opts: obj({ dry: { type: 'boolean', 'x-mcp-header': 'Dry-Run' } }) }));
    expect(scan).toEqual({ valid: true, declarations: [{ path: ['region'], headerName: 'Region', type: 'string' }, { path: ['opts', 'dry'], headerName: 'Dry-Run', type: 'boolean' }] });
    expect(scanMcpHeaders(obj({ a: { type: 'string' } }))).toEqual({ valid: true, declarations: [] });
  });

  it.each([
    ['an object-typed property', obj({ f: { type: 'object', 'x-mcp-header': 'F' } })],
    ['a number-typed property', obj({ n: { type: 'number', 'x-mcp-header': 'N' } })],
    ['a property without a type', obj({ n: { 'x-mcp-header': 'N' } })],
    ['a name that is not an RFC 9110 token', obj({ s: { type: 'string', 'x-mcp-header': 'Has Space' } })],
    ['an empty name', obj({ s: { type: 'string', 'x-mcp-header': '' } })],
    ['a name declared twice ignoring case', obj({ a: { type: 'string', 'x-mcp-header': 'Id' }, b: { type: 'string', 'x-mcp-header': 'ID' } })],
    ['a mark under items', obj({ l: { type: 'array', items: { type: 'string', 'x-mcp-header': 'L' } } })],
    ['a mark under anyOf', obj({}, { anyOf: [obj({ s: { type: 'string', 'x-mcp-header': 'S' } })] })],
    ['a mark under $defs', obj({}, { $defs: { d: { type: 'string', 'x-mcp-header': 'D' } } })],
    ['a mark on the root', { type: 'object', 'x-mcp-header': 'Root' }],
  ])('refuses %s', (_what, schema) => {
    expect(scanMcpHeaders(schema).valid).toBe(false);
  });
});

describe('mcpParamHeaders', () => {
  const declarations = [
    { path: ['s'], headerName: 'S', type: 'string' },
    { path: ['i'], headerName: 'I', type: 'integer' },
    { path: ['b'], headerName: 'B', type: 'boolean' },
    { path: ['deep', 'x'], headerName: 'X', type: 'string' },
  ] as const;

  it('sends strings, integers and booleans as text; absent and null values send no header', () => {
    expect(mcpParamHeaders(declarations, { s: 'eu-west', i: 42, b: false, deep: { x: null } })).toEqual({ 'Mcp-Param-S': 'eu-west', 'Mcp-Param-I': '42', 'Mcp-Param-B': 'false' });
    expect(mcpParamHeaders(declarations, undefined)).toEqual({});
  });

  it('base64-wraps what is not a plain printable ASCII field value', () => {
    const b64 = (s: string) => `=?base64?${Buffer.from(s, 'utf8').toString('base64')}?=`;
    expect(mcpParamHeaders(declarations, { s: 'Zürich' })).toEqual({ 'Mcp-Param-S': b64('Zürich') });
    expect(mcpParamHeaders(declarations, { s: ' padded' })).toEqual({ 'Mcp-Param-S': b64(' padded') });
    expect(mcpParamHeaders(declarations, { s: 'a\nb' })).toEqual({ 'Mcp-Param-S': b64('a\nb') });
    expect(mcpParamHeaders(declarations, { s: '' })).toEqual({ 'Mcp-Param-S': b64('') });
    expect(mcpParamHeaders(declarations, { s: '=?base64?x?=' })).toEqual({ 'Mcp-Param-S': b64('=?base64?x?=') });
  });

  it('sends no header for a value that is not a primitive, or an unsafe integer', () => {
    expect(mcpParamHeaders(declarations, { s: { no: 1 }, i: 2 ** 60, b: [true] })).toEqual({});
  });
});

describe('paramHeaderMismatch (downstream check)', () => {
  const declarations = [
    { path: ['s'], headerName: 'S', type: 'string' },
    { path: ['i'], headerName: 'I', type: 'integer' },
    { path: ['b'], headerName: 'B', type: 'boolean' },
  ] as const;
  const headersOf = (headers: Record<string, string>) => (name: string) => headers[name];

  it('agrees with the headers mcpParamHeaders makes, for any value it mirrors', () => {
    for (const args of [{ s: 'eu-west', i: 42, b: true }, { s: 'zürich\n', i: -7 }, { s: ' padded ', b: false }, {}]) {
      const sent = Object.fromEntries(Object.entries(mcpParamHeaders(declarations, args)).map(([k, v]) => [k.toLowerCase(), v]));
      expect(paramHeaderMismatch(declarations, args, headersOf(sent)), JSON.stringify(args)).toBeUndefined();
    }
  });

  it('compares integers as numbers, everything else as text', () => {
    expect(paramHeaderMismatch(declarations, { i: 42 }, headersOf({ 'mcp-param-i': '42.0' }))).toBeUndefined();
    expect(paramHeaderMismatch(declarations, { i: 42 }, headersOf({ 'mcp-param-i': '43' }))?.header).toBe('Mcp-Param-I');
    expect(paramHeaderMismatch(declarations, { s: '42' }, headersOf({ 'mcp-param-s': '42.0' }))?.header).toBe('Mcp-Param-S');
  });

  it('refuses a missing header, a malformed Base64 value and raw characters outside printable ASCII; null expects none', () => {
    expect(paramHeaderMismatch(declarations, { b: true }, headersOf({}))?.problem).toMatch(/absent/);
    expect(paramHeaderMismatch(declarations, { s: 'x' }, headersOf({ 'mcp-param-s': '=?base64?eA?=' }))?.problem).toMatch(/invalid characters or a malformed Base64/);
    expect(paramHeaderMismatch(declarations, { s: 'é' }, headersOf({ 'mcp-param-s': 'é' }))?.header).toBe('Mcp-Param-S');
    expect(paramHeaderMismatch(declarations, { s: null }, headersOf({ 'mcp-param-s': 'stale' }))).toBeUndefined();
  });
});
