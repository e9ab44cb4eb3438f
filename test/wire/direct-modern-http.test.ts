/**
 * What the modern HTTP lane takes (src/wire/direct-modern-http.ts): only a plain `tools/call`
 * whose envelope the SDK accepted for the same principal, with headers mirroring the body
 * exactly; and what it writes: a plain result as the SDK's JSON answer, anything else handed to
 * the SDK path. The call itself runs on the principal's instance, here a stand-in recording what
 * it was handed (the end-to-end answers are compared with the SDK's in test/e2e/modern-http-lane.test.ts).
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { CancelSignal } from '../../src/shared/cancel.js';
import { modernHttpLane, type LaneSession } from '../../src/wire/direct-modern-http.js';

const MODERN = '2026-07-28';
const envelope = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientInfo': { name: 'c', version: '1' }, 'io.modelcontextprotocol/clientCapabilities': {} };
const body = (params: Record<string, unknown> = {}, more: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'fx__echo', arguments: { text: 'x' }, _meta: envelope, ...params },
  ...more,
});
const headers = (more: Record<string, string> = {}) => ({ 'content-type': 'application/json', 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'fx__echo', ...more });
const request = (h = headers()) => ({ headers: h }) as unknown as IncomingMessage;

/** A response recording what was written. */
function response() {
  const res = Object.assign(new EventEmitter(), {
    status: 0,
    head: {} as Record<string, unknown>,
    text: '',
    writableFinished: false,
    destroyed: false,
    headersSent: false,
    writeHead(status: number, head: Record<string, unknown> = {}) {
      res.status = status;
      res.head = head;
      res.headersSent = true;
      return res;
    },
    end(text = '') {
      res.text = text;
      res.writableFinished = true;
      res.emit('finish');
      return res;
    },
  });
  return res;
}

function laneWith(answer: (params: unknown) => Promise<unknown>) {
  const ran: Array<{ principal: string; params: unknown; envelope: unknown }> = [];
  const handedOff: unknown[] = [];
  const lane = modernHttpLane({
    serverInfo: { name: 'mcp-broker', version: '9' },
    sessionFor: (principal): LaneSession => ({
      directCall: (params, _extra, ctx) => {
        ran.push({ principal, params, envelope: ctx.mcpReq.envelope });
        return answer(params);
      },
    }),
    handOff: async (_principal, req) => void handedOff.push(lane.takeReplay(req)),
  });
  return { lane, ran, handedOff };
}

describe('modern HTTP lane', () => {
  it('takes a call only after the SDK accepted its envelope for the same principal', async () => {
    const { lane, ran } = laneWith(async () => ({ content: [{ type: 'text', text: 'x' }] }));
    expect(lane.take('alice', request(), response() as unknown as ServerResponse, body())).toBeUndefined();
    lane.learn('alice', request(), body(), envelope);
    expect(lane.take('bob', request(), response() as unknown as ServerResponse, body())).toBeUndefined();
    const res = response();
    await lane.take('alice', request(), res as unknown as ServerResponse, body());
    expect(ran).toEqual([{ principal: 'alice', params: { name: 'fx__echo', arguments: { text: 'x' } }, envelope }]);
    const text = JSON.stringify({
      result: { content: [{ type: 'text', text: 'x' }], resultType: 'complete', _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'mcp-broker', version: '9' } } },
      jsonrpc: '2.0',
      id: 1,
    });
    expect([res.status, res.head, res.text]).toEqual([200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }, text]);
  });

  it('learns nothing from a request whose headers do not mirror its body exactly', () => {
    const { lane } = laneWith(async () => ({ content: [] }));
    lane.learn('alice', request(headers({ 'mcp-name': ' fx__echo' })), body(), envelope);
    lane.learn('alice', request(headers({ 'mcp-protocol-version': '2026-07-29' })), body(), envelope);
    lane.learn('alice', request(), body(), { ...envelope, extra: 1 });
    expect(lane.take('alice', request(), response() as unknown as ServerResponse, body())).toBeUndefined();
  });

  it('leaves to the SDK a call that could stream, carries more than a plain call, or whose headers differ', () => {
    const { lane } = laneWith(async () => ({ content: [] }));
    lane.learn('alice', request(), body(), envelope);
    const cases: Array<[string, IncomingMessage, unknown]> = [
      ['progress token', request(), body({ _meta: { ...envelope, progressToken: 't' } })],
      ['log level', request(), body({ _meta: { ...envelope, 'io.modelcontextprotocol/logLevel': 'debug' } })],
      ['retry fields', request(), body({ requestState: 's' })],
      ['task', request(), body({ task: {} })],
      ['other body key', request(), body({}, { extra: true })],
      ['null id', request(), body({}, { id: null })],
      ['encoded name', request(headers({ 'mcp-name': '=?base64?Zng=?=' })), body({ name: '=?base64?Zng=?=' })],
      ['name header differs', request(headers({ 'mcp-name': 'fx__fail' })), body()],
      ['method header missing', request(headers({ 'mcp-method': undefined as unknown as string })), body()],
      ['not json', request(headers({ 'content-type': 'text/plain' })), body()],
      ['other envelope', request(), body({ _meta: { ...envelope, 'io.modelcontextprotocol/clientCapabilities': { sampling: {} } } })],
    ];
    for (const [what, req, b] of cases) expect(lane.take('alice', req, response() as unknown as ServerResponse, b), what).toBeUndefined();
  });

  it('hands an outcome it does not write itself to the SDK path: a throw, an input_required, a result with other keys or content', async () => {
    const outcomes: Array<() => Promise<unknown>> = [
      () => Promise.reject(new Error('boom')),
      async () => ({ resultType: 'input_required', inputRequests: {} }),
      async () => ({ task: { taskId: 't' }, content: [] }),
      async () => ({ content: [{ type: 'image', data: '', mimeType: 'image/png' }] }),
    ];
    for (const outcome of outcomes) {
      const { lane, handedOff } = laneWith(outcome);
      lane.learn('alice', request(), body(), envelope);
      const res = response();
      await lane.take('alice', request(), res as unknown as ServerResponse, body());
      expect(res.status).toBe(0);
      expect(handedOff).toHaveLength(1);
      expect(handedOff[0]).toMatchObject({ ok: expect.any(Boolean) });
    }
  });

  it('closing the response before the answer aborts the call and writes nothing', async () => {
    let signal: CancelSignal | undefined;
    const lane = modernHttpLane({
      serverInfo: { name: 'mcp-broker', version: '9' },
      sessionFor: () => ({
        directCall: (_params, extra) => {
          signal = extra.signal;
          return new Promise((resolve) => extra.signal.addEventListener('abort', () => resolve({ content: [{ type: 'text', text: 'cancelled' }] })));
        },
      }),
      handOff: async () => undefined,
    });
    lane.learn('alice', request(), body(), envelope);
    const res = response();
    const done = lane.take('alice', request(), res as unknown as ServerResponse, body());
    res.destroyed = true;
    res.emit('close');
    await done;
    expect(signal?.aborted).toBe(true);
    expect(res.status).toBe(0);
  });
});
