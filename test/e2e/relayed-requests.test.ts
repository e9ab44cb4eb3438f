/**
 * Requests an upstream makes of the client during a call (`roots/list`, `sampling/createMessage`,
 * `elicitation/create`) that are malformed on either side of the relay, driven by a raw upstream
 * (test/fixtures/raw-asker.mjs) that sends what no SDK server would and logs every answer it gets.
 */
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { connectHttp, startHttpBroker, type HttpBroker } from '../transports/harness.js';
import { fixture, nodeServer, readNdjson, spawnRawBroker, startBroker, waitFor, type RawBroker, type StartedBroker } from './helpers.js';

/** One answer the fixture got to a request it sent to the client. */
interface Answer {
  event: 'answer';
  id: string;
  message: { id: string; result?: unknown; error?: { code: number; message: string } };
}

const servers = { raw: nodeServer(fixture('raw-asker.mjs'), { env: { FIXTURE_LOG: '${configDir}/raw.log' } }) };
const answers = (broker: { dir: string }) => readNdjson<Answer>(join(broker.dir, 'raw.log')).filter((e) => e.event === 'answer');

let broker: StartedBroker | undefined;
let raw: RawBroker | undefined;
let http: HttpBroker | undefined;
afterEach(async () => {
  await broker?.close();
  await raw?.close();
  await http?.close();
  broker = raw = http = undefined;
});

describe('an upstream request to the client whose params is no object', () => {
  it('is answered -32602 at once (it was dropped unanswered: the upstream waited out the call); the broker keeps serving', async () => {
    // A deadline the test would wait out should the request go unanswered.
    broker = await startBroker({ servers, capabilities: { roots: {}, sampling: {}, elicitation: {} }, extra: { broker: { timeoutMs: 60_000 } } });
    broker.client.setRequestHandler('roots/list', async () => ({ roots: [{ uri: 'file:///tmp' }] }));
    for (const [method, params] of [['roots/list', 5], ['sampling/createMessage', 'text'], ['elicitation/create', [1]]] as const) {
      const result = (await broker.client.callTool({ name: 'raw__ask', arguments: { method, params } }, { timeout: 20_000 })) as CallToolResult;
      const answer = JSON.parse((result.content[0] as { text: string }).text) as Answer['message'];
      expect(answer.error?.code, method).toBe(-32602);
      expect(answer.result, method).toBeUndefined();
    }
    expect(answers(broker)).toHaveLength(3);
    // The same upstream's well-formed request is still relayed and answered.
    const ok = (await broker.client.callTool({ name: 'raw__ask', arguments: { method: 'roots/list' } }, { timeout: 20_000 })) as CallToolResult;
    expect(JSON.parse((ok.content[0] as { text: string }).text)).toMatchObject({ result: { roots: [{ uri: 'file:///tmp' }] } });
  }, 60_000);
});

describe("a client's answer to a relayed request that is no well-formed response", () => {
  it('is an error to the upstream at once, both for result and error together and for neither (it was dropped: the upstream waited)', async () => {
    raw = spawnRawBroker({ servers, extra: { broker: { timeoutMs: 60_000 } } });
    await raw.initialize({ roots: {} });
    const replies = [{ result: { roots: [] }, error: { code: -32603, message: 'no roots' } }, { result: null }];
    for (const [i, reply] of replies.entries()) {
      const from = raw.messages.length;
      raw.send({ jsonrpc: '2.0', id: i + 1, method: 'tools/call', params: { name: 'raw__ask', arguments: { method: 'roots/list' } } });
      const asked = await raw.waitForMessage((m) => raw!.messages.indexOf(m) >= from && m.method === 'roots/list', 'the relayed roots/list');
      raw.send({ jsonrpc: '2.0', id: asked.id, ...reply });
      // The upstream's answer is the call's result; a dropped reply would leave the call to its 60 s deadline.
      const answer = await raw.waitForMessage((m) => m.id === i + 1, 'the call\'s answer', 20_000);
      const relayed = JSON.parse(((answer.result as CallToolResult).content[0] as { text: string }).text) as Answer['message'];
      expect(relayed.result, JSON.stringify(reply)).toBeUndefined();
      expect(relayed.error?.message, JSON.stringify(reply)).toMatch(i === 0 ? /both a result and an error/ : /neither a result nor an error/);
    }
    // The session goes on: a well-formed answer is relayed as it was sent.
    raw.send({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'raw__ask', arguments: { method: 'roots/list' } } });
    const asked = await raw.waitForMessage((m) => m.method === 'roots/list' && raw!.messages.filter((n) => n.method === 'roots/list').indexOf(m) === 2, 'the third roots/list');
    raw.send({ jsonrpc: '2.0', id: asked.id, result: { roots: [{ uri: 'file:///tmp' }] } });
    const ok = await raw.waitForMessage((m) => m.id === 9, 'the last call\'s answer', 20_000);
    expect(JSON.parse(((ok.result as CallToolResult).content[0] as { text: string }).text)).toMatchObject({ result: { roots: [{ uri: 'file:///tmp' }] } });
    await waitFor(() => answers(raw!).length === 3, 'the fixture to log three answers');
  }, 60_000);

  it.each(['streamable', 'sse'] as const)('over HTTP (%s) too (the transport refused the body with 400 and the upstream waited)', async (kind) => {
    http = await startHttpBroker({ servers, extra: { broker: { timeoutMs: 60_000 }, http: { clientCapabilities: { roots: {} } } } });
    const { client, transport, close } = await connectHttp(http.url, kind, { capabilities: { roots: {} } });
    try {
      client.setRequestHandler('roots/list', async () => ({ roots: [] }));
      // This client's answers carry an error beside their result.
      const send = transport.send.bind(transport);
      transport.send = (message, options) => send('result' in message ? ({ ...message, error: { code: -32603, message: 'no roots' } } as typeof message) : message, options);
      const result = (await client.callTool({ name: 'raw__ask', arguments: { method: 'roots/list' } }, { timeout: 20_000 })) as CallToolResult;
      const relayed = JSON.parse((result.content[0] as { text: string }).text) as Answer['message'];
      expect(relayed.result).toBeUndefined();
      expect(relayed.error?.message).toMatch(/both a result and an error/);
    } finally {
      await close();
    }
  }, 60_000);
});

describe('a request relayed to the client while its call ends', () => {
  it.each([
    ['passes its deadline', { timeoutMs: 1500 }, undefined],
    ['is cancelled by the client', { timeoutMs: 60_000 }, 'cancel'],
  ] as const)('%s: the client is sent notifications/cancelled for it and the upstream an error (both were left waiting)', async (_what, brokerSection, cancel) => {
    raw = spawnRawBroker({ servers, extra: { broker: brokerSection } });
    await raw.initialize({ roots: {} });
    raw.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'raw__ask', arguments: { method: 'roots/list' } } });
    // Never answered by this client.
    const asked = await raw.waitForMessage((m) => m.method === 'roots/list', 'the relayed roots/list');
    if (cancel) raw.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, reason: 'user stopped it' } });
    const cancelled = await raw.waitForMessage(
      (m) => m.method === 'notifications/cancelled' && (m.params as { requestId?: unknown } | undefined)?.requestId === asked.id,
      'notifications/cancelled for the relayed roots/list',
      20_000,
    );
    expect(typeof (cancelled.params as { reason?: unknown }).reason).toBe('string');
    const [answer] = await waitFor(() => (answers(raw!).length ? answers(raw!) : undefined), 'the upstream to be answered', 20_000);
    expect(answer!.message.error?.code).toBeTypeOf('number');
    expect(answer!.message.result).toBeUndefined();
    if (!cancel) expect((await raw.waitForMessage((m) => m.id === 1, "the call's answer")).result).toMatchObject({ isError: true, _meta: { 'mcp-broker/outcome': 'timeout' } });
  }, 60_000);

  it('with two calls of one session in flight, ending one cancels no relayed request: neither can be told to be its own', async () => {
    raw = spawnRawBroker({ servers });
    await raw.initialize({ roots: {} });
    // One write: both calls are in flight at the upstream before either relayed roots/list arrives.
    for (const id of [1, 2]) raw.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'raw__ask', arguments: { method: 'roots/list' } } });
    await waitFor(() => (raw!.messages.filter((m) => m.method === 'roots/list').length === 2 ? true : undefined), 'both relayed roots/list');
    raw.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2, reason: 'user stopped it' } });
    expect((await raw.request(3, 'ping')).result).toEqual({}); // the cancel was read and acted on before this answer
    expect(raw.messages.filter((m) => m.method === 'notifications/cancelled')).toEqual([]);
    for (const asked of raw.messages.filter((m) => m.method === 'roots/list')) raw.send({ jsonrpc: '2.0', id: asked.id, result: { roots: [] } });
    const result = (await raw.waitForMessage((m) => m.id === 1 && m.method === undefined, "call 1's answer", 20_000)).result as CallToolResult;
    expect(result.isError).toBeFalsy();
  }, 60_000);
});
