/**
 * The legacy Streamable HTTP `tools/call` lane (src/transports/http/legacy-call-lane.ts) through
 * the CLI: raw POSTs on a legacy session of two brokers, one with the lane and one with
 * `MCP_BROKER_NO_HTTP_CALL_LANE=1` (every request on the SDK's path). Each answer must be the
 * same status, headers and bytes but for what differs per broker and per call (session and stream
 * ids, call ids, the upstream's request id). Also: a call whose stream the client drops is
 * answered on the stream it resumes with `Last-Event-ID`, and a request the lane declines is
 * answered by the SDK as before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer } from './helpers.js';
import { MCP_POST_HEADERS, openRawSession, openStream, readStream, sseMessages, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const servers = { fx: nodeServer(fixture('echo.mjs')) };
const extra = { policy: { rules: [{ tools: ['fx__emit'], action: 'deny' }] } };

/** What differs per broker and per call, blanked. */
const blanked = (text: string) =>
  text
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>')
    .replace(/"mcp-broker:\d+"/g, '"mcp-broker:*"')
    .replace(/"(ts)":"[^"]*"/g, '"$1":"*"')
    .replace(/"durationMs":\d+/g, '"durationMs":0');

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A raw POST of `body` on `session`, read to its end. */
async function post(broker: HttpBroker, session: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${broker.url}/mcp`, {
    method: 'POST',
    headers: { ...MCP_POST_HEADERS, 'mcp-session-id': session, ...headers },
    body: JSON.stringify(body),
  });
  const out: Record<string, string> = {};
  res.headers.forEach((value, key) => {
    if (key !== 'date') out[key] = blanked(value);
  });
  return { status: res.status, headers: out, body: blanked(await res.text()) };
}

describe('legacy Streamable HTTP tools/call lane, through the CLI', () => {
  let lane: HttpBroker;
  let sdk: HttpBroker;
  beforeAll(async () => {
    [lane, sdk] = await Promise.all([
      startHttpBroker({ servers, extra }),
      startHttpBroker({ servers, extra, env: { MCP_BROKER_NO_HTTP_CALL_LANE: '1' } }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([lane?.close(), sdk?.close()]);
  });

  it.each([
    ['ok', { name: 'fx__echo', arguments: { text: 'hi' } }],
    ['a tool error', { name: 'fx__fail', arguments: {} }],
    ['a refusal (policy deny)', { name: 'fx__emit', arguments: {} }],
    ['an unknown tool (-32602)', { name: 'fx__nope', arguments: {} }],
    ['progress during the call', { name: 'fx__echo', arguments: { text: 'p' }, _meta: { progressToken: 'tok' } }],
    ['a string id and no arguments', { name: 'fx__fail' }],
  ])('%s: the same answer as the SDK path, at 2025-06-18 and at 2025-11-25 (with the priming event)', async (_what, params) => {
    for (const version of ['2025-06-18', '2025-11-25']) {
      const [a, b] = await Promise.all([openRawSession(lane.url), openRawSession(sdk.url)]);
      const headers = { 'mcp-protocol-version': version };
      const id = 'arguments' in params ? 7 : 'seven';
      const body = { jsonrpc: '2.0', id, method: 'tools/call', params };
      const [viaLane, viaSdk] = await Promise.all([post(lane, a, body, headers), post(sdk, b, body, headers)]);
      expect(viaLane).toEqual(viaSdk);
      expect(viaLane.status).toBe(200);
      expect(sseMessages(viaLane.body).at(-1)).toMatchObject({ jsonrpc: '2.0', id });
      // The priming event (an id with empty data) only from 2025-11-25 on.
      expect(/^id: <uuid>\|\d+\ndata: \n\n/m.test(viaLane.body)).toBe(version === '2025-11-25');
    }
  });

  it('requests the lane declines are answered by the SDK as before: a batch, a notification, Accept without JSON, an unsupported version', async () => {
    const [a, b] = await Promise.all([openRawSession(lane.url), openRawSession(sdk.url)]);
    const call = { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'fx__echo', arguments: { text: 'x' } } };
    const cases: Array<[unknown, Record<string, string>]> = [
      [[call], {}],
      [{ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 99 } }, {}],
      [call, { accept: 'text/event-stream' }],
      [call, { 'mcp-protocol-version': '1999-01-01' }],
      [{ ...call, id: 1.5 }, {}],
    ];
    for (const [body, headers] of cases) {
      const [viaLane, viaSdk] = await Promise.all([post(lane, a, body, headers), post(sdk, b, body, headers)]);
      expect(viaLane).toEqual(viaSdk);
    }
  });

  it.each([
    ['the lane', () => lane],
    ['the SDK path', () => sdk],
  ])('%s: a resume while the call stream is open is refused (409) and harms nothing; once dropped, the resume with Last-Event-ID gets the answer', async (_path, broker) => {
    const url = `${broker().url}/mcp`;
    const session = await openRawSession(broker().url);
    const headers = { ...MCP_POST_HEADERS, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' };
    // The call's stream, read up to its priming event and held open; the call is still running (delayMs).
    const held = await openStream(
      url,
      { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 21, method: 'tools/call', params: { name: 'fx__echo', arguments: { text: 'later', delayMs: 2000 } } }) },
      (text) => /^id: .+$/m.test(text),
    );
    const first = held.text;
    const primed = /^id: (.+)$/m.exec(first)?.[1];
    expect(primed).toBeDefined();
    expect(first).not.toContain('"result"');
    const resume = () =>
      readStream(
        url,
        { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25', 'last-event-id': primed! } },
        (text) => text.includes('"result"'),
      );
    // Still open: the stream has an active connection.
    const refused = await resume();
    expect(refused.status).toBe(409);
    expect(refused.text).toContain('Stream already has an active connection');
    // Harmless: the session serves another call meanwhile, on a stream of its own.
    const other = await post(broker(), session, { jsonrpc: '2.0', id: 22, method: 'tools/call', params: { name: 'fx__echo', arguments: { text: 'meanwhile' } } }, {
      'mcp-protocol-version': '2025-11-25',
    });
    expect(other.status).toBe(200);
    expect(sseMessages(other.body).find((m) => m.id === 22)).toMatchObject({ result: { content: [{ type: 'text', text: 'meanwhile' }] } });
    // Dropped. The broker may take the next GET before it has seen that close (two sockets, one
    // event loop), and answer 409 again; a client resumes again, as the SDK client's reconnection
    // does, and so does this one (bounded).
    await held.close();
    let resumed = await resume();
    for (let tries = 1; resumed.status === 409 && tries < 40; tries++) {
      await new Promise((r) => setTimeout(r, 25));
      resumed = await resume();
    }
    expect(resumed.status).toBe(200);
    expect(sseMessages(resumed.text).find((m) => m.id === 21)).toMatchObject({ result: { content: [{ type: 'text', text: 'later' }] } });
  });
});
