/**
 * `isModernPost` (src/transports/era.ts) routes `POST /mcp` by the SDK's classification without
 * building a web `Request`: for every body and header combination here it must agree with the
 * SDK's own `isLegacyRequest` on a web `Request` carrying the same headers (the way it decided before).
 */
import { isLegacyRequest } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { isModernPost } from '../../src/transports/era.js';

const V = 'io.modelcontextprotocol/protocolVersion';
const envelope = { [V]: '2026-07-28', 'io.modelcontextprotocol/clientInfo': { name: 'c', version: '1' }, 'io.modelcontextprotocol/clientCapabilities': {} };

const bodies: Array<[string, unknown]> = [
  ['modern call', { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 't', _meta: envelope } }],
  ['modern list', { jsonrpc: '2.0', id: 'a', method: 'tools/list', params: { _meta: envelope } }],
  ['bad envelope', { jsonrpc: '2.0', id: 2, method: 'tools/list', params: { _meta: { [V]: 7 } } }],
  ['old version claim', { jsonrpc: '2.0', id: 3, method: 'tools/list', params: { _meta: { ...envelope, [V]: '2025-11-25' } } }],
  ['modern initialize', { jsonrpc: '2.0', id: 4, method: 'initialize', params: { _meta: envelope } }],
  ['initialize with a bad claim', { jsonrpc: '2.0', id: 5, method: 'initialize', params: { protocolVersion: '2025-11-25', _meta: { [V]: 'x' } } }],
  ['legacy initialize', { jsonrpc: '2.0', id: 6, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } } }],
  ['legacy call', { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 't' } }],
  ['modern notification', { jsonrpc: '2.0', method: 'notifications/cancelled', params: { _meta: envelope } }],
  ['legacy notification', { jsonrpc: '2.0', method: 'notifications/initialized' }],
  ['response with a claim', { jsonrpc: '2.0', id: 8, result: {}, params: { _meta: envelope } }],
  ['batch', [{ jsonrpc: '2.0', id: 9, method: 'tools/list' }]],
  ['batch with a modern element', [{ jsonrpc: '2.0', id: 10, method: 'tools/list', params: { _meta: envelope } }]],
  ['not json-rpc', { hello: 'world', params: { _meta: envelope } }],
  ['null id', { jsonrpc: '2.0', id: null, method: 'tools/list', params: { _meta: envelope } }],
];
const headerSets: Array<[string, Record<string, string | string[]>]> = [
  ['none', {}],
  ['modern version', { 'mcp-protocol-version': '2026-07-28' }],
  ['legacy version', { 'mcp-protocol-version': '2025-11-25' }],
  ['mirroring', { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 't' }],
  ['mismatched method', { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' }],
  ['future version', { 'mcp-protocol-version': '2099-01-01' }],
  ['repeated', { 'mcp-method': ['tools/call', 'tools/list'] }],
];

describe('isModernPost', () => {
  it('agrees with the SDK isLegacyRequest on every body and header combination', async () => {
    for (const [what, body] of bodies) {
      for (const [which, headers] of headerSets) {
        const web = new Headers({ 'content-type': 'application/json' });
        for (const [name, value] of Object.entries(headers)) web.set(name, Array.isArray(value) ? value.join(', ') : value);
        const sdk = !(await isLegacyRequest(new Request('http://broker.invalid/mcp', { method: 'POST', headers: web }), body));
        expect(await isModernPost({ 'content-type': 'application/json', ...headers }, body), `${what}, ${which} headers`).toBe(sdk);
      }
    }
  });

  it('a request with Mcp-Session-Id is legacy', async () => {
    expect(await isModernPost({ 'mcp-session-id': 's' }, bodies[0]![1])).toBe(false);
  });
});
