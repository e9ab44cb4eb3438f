/**
 * Issue 17 §4 over HTTP: a malformed request whose id can be read is answered with that id
 * (-32602 for params that are not an object or wrong-typed, -32600 for what is not a request),
 * over Streamable HTTP and legacy SSE, and the session keeps serving.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer } from './helpers.js';
import { connectHttp, http, MCP_POST_HEADERS, openRawSession, readStream, sseMessages, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const SESSION_HEADERS = (id: string) => ({ ...MCP_POST_HEADERS, 'mcp-session-id': id, 'mcp-protocol-version': '2025-06-18' });

describe('issue 17 §4: malformed requests over HTTP', () => {
  let broker: HttpBroker;
  beforeAll(async () => {
    broker = await startHttpBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) } });
  });
  afterAll(async () => broker?.close());

  it('Streamable HTTP: `params: 42` was an id-less -32700; now -32602 with its id, and the session serves on', async () => {
    const session = await openRawSession(broker.url);
    const post = (body: unknown) => http(`${broker.url}/mcp`, { headers: SESSION_HEADERS(session), body });
    const bad = await post({ jsonrpc: '2.0', id: 'f-1', method: 'prompts/list', params: 42 });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ jsonrpc: '2.0', id: 'f-1', error: { code: -32602 } });
    const fractional = await post({ jsonrpc: '2.0', id: 1.5, method: 'ping' });
    expect(fractional.body).toMatchObject({ id: 1.5, error: { code: -32600 } });
    const batch = await post([
      { jsonrpc: '2.0', id: 'b-1', method: 'tools/list', params: 'x' },
      { jsonrpc: '2.0', id: 'b-2', method: 'ping' },
    ]);
    expect(batch.status).toBe(400);
    expect(batch.body).toMatchObject([
      { id: 'b-1', error: { code: -32602 } },
      { id: 'b-2', error: { code: -32600 } },
    ]);
    // Wrong-typed params of a known method too.
    const wrong = await post({ jsonrpc: '2.0', id: 'w-1', method: 'tools/call', params: { name: 5 } });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toMatchObject({ id: 'w-1', error: { code: -32602, message: expect.stringContaining('params.name') } });
    const ok = await readStream(
      `${broker.url}/mcp`,
      { method: 'POST', headers: SESSION_HEADERS(session), body: JSON.stringify({ jsonrpc: '2.0', id: 'ok', method: 'tools/call', params: { name: 'echo__echo', arguments: { text: 'on' } } }) },
      (t) => t.includes('"ok"'),
    );
    expect(sseMessages(ok.text)[0].result.content[0].text).toBe('on');
  });

  it('2026-07-28, stateless: wrong-typed params of a method both eras share were -32603 with the schema\'s raw issues; now -32602 naming the field', async () => {
    const envelope = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientInfo': { name: 'm', version: '1' },
      'io.modelcontextprotocol/clientCapabilities': {},
    };
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['resources/read', { uri: {} }, 'params.uri'],
      ['tools/list', { cursor: 5 }, 'params.cursor'],
      ['prompts/get', { name: 'x', arguments: 'x' }, 'params.arguments'],
      ['completion/complete', { ref: null, argument: { name: 'a', value: 'b' } }, 'params.ref'],
    ];
    for (const [method, params, field] of cases) {
      const res = await http(`${broker.url}/mcp`, {
        headers: { ...MCP_POST_HEADERS, 'mcp-protocol-version': '2026-07-28', 'mcp-method': method },
        body: { jsonrpc: '2.0', id: `m-${method}`, method, params: { ...params, _meta: envelope } },
      });
      expect(res.body, method).toMatchObject({ id: `m-${method}`, error: { code: -32602, message: expect.stringContaining(field) } });
    }
  });

  it('2026-07-28 tools/call with a bad name or arguments was HTTP 200 with the schema\'s multi-line issues; now 400, -32602 naming the field, as the legacy lane answers', async () => {
    const envelope = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientInfo': { name: 'm', version: '1' },
      'io.modelcontextprotocol/clientCapabilities': {},
    };
    const modern = (id: string, params: Record<string, unknown>) =>
      http(`${broker.url}/mcp`, {
        headers: { ...MCP_POST_HEADERS, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', ...(typeof params.name === 'string' && { 'mcp-name': params.name }) },
        body: { jsonrpc: '2.0', id, method: 'tools/call', params: { ...params, _meta: envelope } },
      });
    const session = await openRawSession(broker.url);
    const legacy = (id: string, params: Record<string, unknown>) => http(`${broker.url}/mcp`, { headers: SESSION_HEADERS(session), body: { jsonrpc: '2.0', id, method: 'tools/call', params } });
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ arguments: {} }, 'params.name'],
      [{ name: 5, arguments: {} }, 'params.name'],
      [{ name: 'echo__echo', arguments: [] }, 'params.arguments'],
    ];
    const served = async (id: string) => {
      const ok = await modern(id, { name: 'echo__echo', arguments: { text: id } });
      expect(ok.status).toBe(200);
      expect(ok.text).toContain(`"text":"${id}"`);
    };
    // Before the principal's first call (the SDK's handler) and after it (the HTTP lane).
    for (const round of ['first', 'again']) {
      for (const [i, [params, field]] of cases.entries()) {
        const id = `${round}-${i}`;
        const bad = await modern(id, params);
        const message = `Invalid params for tools/call: ${field} is missing or of the wrong type`;
        expect(bad.status, id).toBe(400);
        expect(bad.body, id).toEqual({ jsonrpc: '2.0', id, error: { code: -32602, message } });
        const same = await legacy(id, params);
        expect(same.status, id).toBe(400);
        expect(same.body, id).toEqual(bad.body);
      }
      await served(`served-${round}`);
    }
  });

  it('SSE: `params: 42` was an id-less -32600; now -32602 with its id, and the session serves on', async () => {
    const live = await connectHttp(broker.url, 'sse');
    try {
      const id = (live.transport as unknown as { _endpoint?: URL })._endpoint!.searchParams.get('sessionId')!;
      const bad = await http(`${broker.url}/messages?sessionId=${id}`, { body: { jsonrpc: '2.0', id: 'f-1', method: 'resources/read', params: 42 } });
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ jsonrpc: '2.0', id: 'f-1', error: { code: -32602 } });
      const result = await live.client.callTool({ name: 'echo__echo', arguments: { text: 'unharmed' } });
      expect((result.content as { text: string }[])[0]!.text).toBe('unharmed');
    } finally {
      await live.close();
    }
  });
});
