/**
 * SSE events of pass-through results (src/transports/http/raw-sse.ts): written with the result's
 * own bytes, as the SDK's writer would write the same message otherwise, installed on the SDK
 * transport the broker makes, and left to the SDK's writer for every other message.
 */
import { describe, expect, it } from 'vitest';
import { WebStandardStreamableHTTPServerTransport, type JSONRPCMessage } from '@modelcontextprotocol/server';
import { writeResultsAsArrived } from '../../src/transports/http/raw-sse.js';
import { parseResponseLine, withMeta } from '../../src/wire/raw-json.js';

type Writer = (controller: { enqueue(chunk: Uint8Array): void }, encoder: TextEncoder, message: JSONRPCMessage, eventId?: string) => boolean;

const transport = () => new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: () => 'session-1', keepAliveMs: 0 });

/** What `writer` writes for `message`, as text, and how many chunks it took. */
function written(t: WebStandardStreamableHTTPServerTransport, message: JSONRPCMessage, eventId?: string) {
  const chunks: Uint8Array[] = [];
  const ok = (t as unknown as { writeSSEEvent: Writer }).writeSSEEvent({ enqueue: (c) => void chunks.push(c) }, new TextEncoder(), message, eventId);
  return { ok, text: Buffer.concat(chunks).toString('utf8'), chunks: chunks.length };
}

const big = 'The quick brown fox, "quoted", with a \\ and a\nnewline; '.repeat(2_000);
const passThrough = (id: number, text = big) => {
  const parsed = parseResponseLine(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }] } })));
  return parsed as { jsonrpc: '2.0'; id: number; result: object };
};

describe('raw SSE events', () => {
  it('installs on the SDK transport the broker makes (an SDK that moves its writer fails here)', () => {
    expect(writeResultsAsArrived(transport())).toBe(true);
  });

  it('writes a pass-through result as the SDK writes the same message, from its bytes', () => {
    const sdk = transport();
    const raw = transport();
    writeResultsAsArrived(raw);
    for (const eventId of ['stream-1|7', undefined]) {
      const message = { result: passThrough(3).result, jsonrpc: '2.0', id: 3 } as JSONRPCMessage;
      const ours = written(raw, message, eventId);
      expect(ours.ok).toBe(true);
      expect(ours.chunks).toBeGreaterThan(1); // the bytes, not one encoded string
      // Compared as a boolean: a diff of two 100 KiB events says nothing more.
      expect(ours.text === written(sdk, message, eventId).text).toBe(true);
    }
    // With the broker's _meta added to the result: the same event, the members of the result in
    // the order the stdio face writes them (_meta first).
    const extended = { result: withMeta(passThrough(4).result, { outcome: 'ok' }), jsonrpc: '2.0', id: 'x' } as JSONRPCMessage;
    const ours = written(raw, extended, 'e|1');
    expect(ours.chunks).toBeGreaterThan(1);
    const [head, data, end] = [ours.text.slice(0, ours.text.indexOf('data: ') + 6), ours.text.slice(ours.text.indexOf('data: ') + 6, -2), ours.text.slice(-2)];
    expect([head, end]).toEqual(['event: message\nid: e|1\ndata: ', '\n\n']);
    expect(data.includes('\n')).toBe(false);
    expect(JSON.parse(data)).toEqual(JSON.parse(JSON.stringify(extended)));
  });

  it('leaves other messages, and bytes holding a carriage return, to the SDK writer', () => {
    const raw = transport();
    writeResultsAsArrived(raw);
    const plain = { result: { content: [{ type: 'text', text: big }] }, jsonrpc: '2.0', id: 5 } as JSONRPCMessage;
    expect(written(raw, plain, 'e|2')).toEqual({ ok: true, text: `event: message\nid: e|2\ndata: ${JSON.stringify(plain)}\n\n`, chunks: 1 });
    // JSON whitespace may be a carriage return, which SSE reads as a line end.
    const spaced = Buffer.from(`{"jsonrpc":"2.0","id":6,"result":{"content":[{"type":"text",\r"text":${JSON.stringify(big)}}]}}`);
    const parsed = parseResponseLine(spaced) as { result: object };
    const message = { result: parsed.result, jsonrpc: '2.0', id: 6 } as JSONRPCMessage;
    const out = written(raw, message, 'e|3');
    expect(out.chunks).toBe(1);
    expect(out.text).not.toContain('\r');
    expect(out.text).toBe(`event: message\nid: e|3\ndata: ${JSON.stringify(message)}\n\n`);
  });

  it('reports a closed stream as the SDK writer does: false, and the error to onerror', () => {
    const raw = transport();
    const errors: Error[] = [];
    raw.onerror = (err) => void errors.push(err);
    writeResultsAsArrived(raw);
    const message = { result: passThrough(7).result, jsonrpc: '2.0', id: 7 } as JSONRPCMessage;
    const closed = { enqueue: () => { throw new TypeError('Invalid state: the stream is closed'); } };
    expect((raw as unknown as { writeSSEEvent: Writer }).writeSSEEvent(closed, new TextEncoder(), message, 'e|4')).toBe(false);
    expect(errors.map((e) => e.message)).toEqual(['Invalid state: the stream is closed']);
  });

  it('leaves a transport without the writer it knows as it is', () => {
    const t = transport();
    Object.defineProperty(t, 'writeSSEEvent', { value: () => true, writable: true });
    expect(writeResultsAsArrived(t)).toBe(false);
  });
});
