/**
 * `x-mcp-header` (2026-07-28 Streamable HTTP, "Schema Extension"; issue 14 §2): which marks are
 * valid, and the `Mcp-Param-*` headers a call gets. Cases from the spec's rules.
 */
import { describe, expect, it } from 'vitest';
import { mcpParamHeaders, scanMcpHeaders } from '../../src/upstream/mcp-param-headers.js';

const obj = (properties: Record<string, unknown>, more: Record<string, unknown> = {}) => ({ type: 'object', properties, ...more });

describe('scanMcpHeaders', () => {
  it('collects marks on primitive properties reached through properties, at any depth', () => {
    const scan = scanMcpHeaders(obj({ region: { type: 'string', 'x-mcp-header': 'Region' }, opts: obj({ dry: { type: 'boolean', 'x-mcp-header': 'Dry-Run' } }) }));
    expect(scan).toEqual({ valid: true, declarations: [{ path: ['region'], headerName: 'Region' }, { path: ['opts', 'dry'], headerName: 'Dry-Run' }] });
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
    { path: ['s'], headerName: 'S' },
    { path: ['i'], headerName: 'I' },
    { path: ['b'], headerName: 'B' },
    { path: ['deep', 'x'], headerName: 'X' },
  ];

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
