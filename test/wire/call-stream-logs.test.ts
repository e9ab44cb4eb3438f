/** Log messages taken off a tool call's own Streamable HTTP response stream (src/wire/call-stream-logs.ts). */
import { describe, expect, it } from 'vitest';
import { callStreamLogFetch, logEventFilter, type ArrivedNotification } from '../../src/wire/call-stream-logs.js';

const enc = new TextEncoder();
const log = (data: string) => JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data } });
const result = (text: string) => JSON.stringify({ jsonrpc: '2.0', id: 'mcp-broker:7', result: { content: [{ type: 'text', text }] } });

/** Runs `text` through the filter cut into `pieces`; returns what came out and what the sink got. */
async function filter(pieces: string[]): Promise<{ out: string; taken: ArrivedNotification[] }> {
  const taken: ArrivedNotification[] = [];
  const input = new ReadableStream<Uint8Array>({
    start(c) {
      for (const p of pieces) c.enqueue(enc.encode(p));
      c.close();
    },
  });
  const chunks: Uint8Array[] = [];
  const reader = input.pipeThrough(logEventFilter((n) => taken.push(n))).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
  }
  return { out: Buffer.concat(chunks).toString('utf8'), taken };
}

/** Every way of cutting `text` in two, plus one byte at a time. */
function cuts(text: string): string[][] {
  const all = [[text], [...text]];
  for (let i = 1; i < text.length; i++) all.push([text.slice(0, i), text.slice(i)]);
  return all;
}

describe('logEventFilter', () => {
  it('passes a stream without log messages byte for byte, however it is cut', async () => {
    // A result whose text names the log method is not a log message.
    const text = `id: 1\nevent: message\ndata: ${result('see notifications/message')}\n\n: keepalive\n\n`;
    for (const pieces of cuts(text)) {
      const { out, taken } = await filter(pieces);
      expect(out).toBe(text);
      expect(taken).toEqual([]);
    }
  });

  it('takes a log message off, keeping its id line, however the stream is cut (LF, CRLF, CR)', async () => {
    for (const nl of ['\n', '\r\n', '\r']) {
      const before = `id: 1${nl}data: ${result('first')}${nl}${nl}`;
      const logged = `event: message${nl}id: 2${nl}data: ${log('for this call')}${nl}${nl}`;
      const after = `id: 3${nl}data: ${result('last')}${nl}${nl}`;
      for (const pieces of cuts(before + logged + after)) {
        const { out, taken } = await filter(pieces);
        expect(taken.map((n) => (n.params as { data: string }).data)).toEqual(['for this call']);
        // What the SDK parses is what it would have parsed, without the log event's data.
        expect(out.replace(/\r\n|\r/g, '\n').replace(/\n{3,}/g, '\n\n')).toBe(`id: 1\ndata: ${result('first')}\n\nid: 2\n\nid: 3\ndata: ${result('last')}\n\n`);
      }
    }
  });

  it('a log event without an id leaves nothing behind; a request or another event type passes', async () => {
    const request = JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'notifications/message', params: {} });
    const text = `data: ${log('a')}\n\ndata: ${request}\n\nevent: other\ndata: ${log('b')}\n\n`;
    const { out, taken } = await filter([text]);
    expect(taken).toHaveLength(1);
    expect(out).toBe(`data: ${request}\n\nevent: other\ndata: ${log('b')}\n\n`);
  });
});

describe('callStreamLogFetch', () => {
  const sse = (body: string) => new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });

  it("filters the response stream of a direct request only, with that request's sink", async () => {
    const asked: string[] = [];
    const taken: ArrivedNotification[] = [];
    const wrapped = callStreamLogFetch(
      async () => sse(`data: ${log('x')}\n\n`),
      (id) => (asked.push(id), (n) => taken.push(n)),
    );
    const direct = JSON.stringify({ jsonrpc: '2.0', id: 'mcp-broker:12', method: 'tools/call', params: {} });
    expect(await (await wrapped('http://u/mcp', { method: 'POST', body: direct })).text()).toBe('');
    expect(asked).toEqual(['mcp-broker:12']);
    expect(taken).toHaveLength(1);
    // The SDK's own requests (numeric ids) and GET streams are left alone.
    const sdk = JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} });
    expect(await (await wrapped('http://u/mcp', { method: 'POST', body: sdk })).text()).toBe(`data: ${log('x')}\n\n`);
    expect(await (await wrapped('http://u/mcp', { method: 'GET' })).text()).toBe(`data: ${log('x')}\n\n`);
    expect(asked).toEqual(['mcp-broker:12']);
  });

  it('notes the requests on the standalone GET stream, its logs left on it; a GET resuming a stream (Last-Event-ID) is not the standalone one (its calls\' questions were refused)', async () => {
    const request = JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'elicitation/create', params: { message: 'm', requestedSchema: { type: 'object' } } });
    const body = `data: ${request}\n\ndata: ${log('x')}\n\n`;
    const noted: [string | number, string][] = [];
    const sinks = Object.assign(() => undefined, { standalone: (id: string | number, method: string) => void noted.push([id, method]) });
    const wrapped = callStreamLogFetch(async () => sse(body), sinks);
    expect(await (await wrapped('http://u/mcp', { method: 'GET' })).text()).toBe(body);
    expect(noted).toEqual([[8, 'elicitation/create']]);
    expect(await (await wrapped('http://u/mcp', { method: 'GET', headers: { 'Last-Event-ID': '3' } })).text()).toBe(body);
    expect(noted).toHaveLength(1);
  });

  it('leaves a direct request whose sink is undefined (no owner) untouched', async () => {
    const wrapped = callStreamLogFetch(async () => sse(`data: ${log('x')}\n\n`), () => undefined);
    const direct = JSON.stringify({ jsonrpc: '2.0', id: 'mcp-broker:1', method: 'tools/call', params: {} });
    expect(await (await wrapped('http://u/mcp', { method: 'POST', body: direct })).text()).toBe(`data: ${log('x')}\n\n`);
  });
});

describe('logEventFilter: upstream requests on a call stream', () => {
  it("tells the sink's request hook the id and method of a sampling, elicitation or roots request and leaves the event on the stream, however it is cut", async () => {
    const request = JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'sampling/createMessage', params: { messages: [], maxTokens: 1 } });
    const text = `id: 2\nevent: message\ndata: ${request}\n\nevent: message\ndata: ${log('x')}\n\n`;
    for (const pieces of cuts(text)) {
      const seen: [string | number, string][] = [];
      const taken: ArrivedNotification[] = [];
      const sink = Object.assign((n: ArrivedNotification) => void taken.push(n), { request: (id: string | number, method: string) => void seen.push([id, method]) });
      const input = new ReadableStream<Uint8Array>({
        start(c) {
          for (const p of pieces) c.enqueue(enc.encode(p));
          c.close();
        },
      });
      const chunks: Uint8Array[] = [];
      const reader = input.pipeThrough(logEventFilter(sink)).getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks.push(value);
      }
      expect(seen).toEqual([[4, 'sampling/createMessage']]);
      expect(Buffer.concat(chunks).toString('utf8')).toBe(`id: 2\nevent: message\ndata: ${request}\n\n`);
      expect(taken).toHaveLength(1);
    }
  });

  it('a notification or result naming a request method is not a request', async () => {
    const notification = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { message: 'elicitation/create soon' } });
    const seen: unknown[] = [];
    const sink = Object.assign(() => undefined, { request: (id: string | number) => void seen.push(id) });
    const input = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(enc.encode(`data: ${notification}\n\ndata: ${result('roots/list')}\n\n`));
        c.close();
      },
    });
    const reader = input.pipeThrough(logEventFilter(sink)).getReader();
    while (!(await reader.read()).done);
    expect(seen).toEqual([]);
  });
});
