/**
 * Framing behaviour added for issue 6 (the F05/F06 basics are in framing.test.ts): large
 * responses parsed by their parts and passed through as bytes, dropped oversize messages that
 * still settle their request, and writes coalesced per burst (the first one at once).
 */
import { PassThrough, Writable } from 'node:stream';
import type { JSONRPCMessage } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { LineFramer, serializeMessage, writeMessage } from '../../src/wire/framing.js';
import { encodeMessage, knownJsonBytes, messageIdFromEnds, parseResponseLine, type MessageEnds } from '../../src/wire/raw-json.js';
import { StdioServerTransport } from '../../src/transports/stdio-server.js';

function collect(max?: number) {
  const out = { messages: [] as unknown[], oversize: [] as Array<{ bytes: number; ends?: MessageEnds }> };
  const framer = new LineFramer(
    { message: (m) => out.messages.push(m), noise: () => undefined, oversize: (bytes, ends) => out.oversize.push({ bytes, ends }) },
    max,
  );
  return { framer, out };
}

/** A stream that records each system-call-sized write it takes: 1 for a lone write, n for a writev of n chunks. */
function countingSink(): { writes: number[]; sink: Writable } {
  const writes: number[] = [];
  const sink = new Writable({
    write(_chunk: Buffer, _enc, done) {
      writes.push(1);
      done();
    },
    writev(chunks, done) {
      writes.push(chunks.length);
      done();
    },
  });
  return { writes, sink };
}

function feed(framer: LineFramer, text: string, chunk = 4096): void {
  const bytes = Buffer.from(text);
  for (let i = 0; i < bytes.length; i += chunk) framer.push(bytes.subarray(i, i + chunk));
}

describe('large messages (issue 6)', () => {
  it('a large response is parsed by its parts and knows its exact size in bytes', () => {
    const result = { content: [{ type: 'text', text: 'é'.repeat(100_000) }] };
    const { framer, out } = collect();
    feed(framer, `{"result":${JSON.stringify(result)},"jsonrpc":"2.0","id":9}\n`);
    expect(out.messages).toEqual([{ jsonrpc: '2.0', id: 9, result }]);
    expect(knownJsonBytes((out.messages[0] as { result: object }).result)).toBe(Buffer.byteLength(JSON.stringify(result)));
  });

  it('an oversize line reports the id and kind its ends show, whichever order the members came in', () => {
    const big = 'x'.repeat(5000);
    const { framer, out } = collect(1024);
    feed(framer, `${JSON.stringify({ result: { text: big }, jsonrpc: '2.0', id: 7 })}\n`, 100);
    feed(framer, `${JSON.stringify({ jsonrpc: '2.0', id: 'r-8', result: { text: big } })}\n`, 100);
    feed(framer, `${JSON.stringify({ method: 'tools/call', params: { text: big }, jsonrpc: '2.0', id: 9 })}\n`, 100);
    feed(framer, `${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { data: big } })}\n`, 100);
    expect(out.oversize.map((o) => o.ends)).toEqual([{ id: 7, kind: 'response' }, { id: 'r-8', kind: 'response' }, { id: 9, kind: 'request' }, undefined]);
    expect(out.messages).toEqual([]);
  });

  it('reads an id only from plain members at the top level', () => {
    const ends = (text: string) => messageIdFromEnds(Buffer.from(text.slice(0, 40)), Buffer.from(text.slice(-40)));
    expect(ends('{"jsonrpc":"2.0","result":{"a":1,"id":5}}')).toBeUndefined();
    expect(ends('{"jsonrpc":"2.0","result":{"text":"\\"id\\":5"}}')).toBeUndefined();
    expect(ends('{"result":{"x":1},"id":"a\\"b","jsonrpc":"2.0"}')).toBeUndefined();
    expect(ends('{ "id" : 12 , "result" : { } }')).toEqual({ id: 12, kind: 'response' });
  });

  it('the stdio server answers an oversize request with its own id and the limit, then serves on', async () => {
    const stdin = new PassThrough();
    const stdout = new PassThrough();
    let written = '';
    stdout.on('data', (c: Buffer) => (written += c.toString('utf8')));
    const transport = new StdioServerTransport(stdin, stdout, 1024);
    const received: unknown[] = [];
    transport.onmessage = (m) => received.push(m);
    await transport.start();
    // The SDK's own client puts the id last.
    stdin.write(`${JSON.stringify({ method: 'tools/call', params: { name: 'x', arguments: { t: 'y'.repeat(4000) } }, jsonrpc: '2.0', id: 41 })}\n`);
    stdin.write('{"jsonrpc":"2.0","id":42,"method":"ping"}\n');
    await new Promise((r) => setImmediate(r));
    const reply = JSON.parse(written.split('\n')[0]!) as { id: unknown; error: { code: number; message: string } };
    expect(reply.id).toBe(41);
    expect(reply.error.code).toBe(-32600);
    expect(reply.error.message).toContain('maxMessageBytes 1024');
    expect(received).toEqual([{ jsonrpc: '2.0', id: 42, method: 'ping' }]);
  });

  it('the stdio server turns an oversize response from the client into an error for the request it answers', async () => {
    const stdin = new PassThrough();
    const transport = new StdioServerTransport(stdin, new PassThrough(), 1024);
    const received: Array<{ id?: unknown; error?: { message: string } }> = [];
    transport.onmessage = (m) => received.push(m as never);
    await transport.start();
    stdin.write(`${JSON.stringify({ result: { content: 'z'.repeat(4000) }, jsonrpc: '2.0', id: 3 })}\n`);
    await new Promise((r) => setImmediate(r));
    expect(received).toHaveLength(1);
    expect(received[0]!.id).toBe(3);
    expect(received[0]!.error!.message).toContain('over maxMessageBytes (1024 bytes)');
  });

  it('the first message of a burst leaves at once, the rest of the burst in one write', async () => {
    const { writes, sink } = countingSink();
    const ping = (id: number) => ({ jsonrpc: '2.0', id, method: 'ping' }) as JSONRPCMessage;
    const first = writeMessage(sink, ping(1));
    // A lone call waits for nothing: its message was written before writeMessage returned.
    expect(writes).toEqual([1]);
    await Promise.all([first, ...[2, 3, 4].map((id) => writeMessage(sink, ping(id)))]);
    expect(writes).toEqual([1]);
    await new Promise((r) => setImmediate(r));
    expect(writes).toEqual([1, 3]);
    // A result passed through as its bytes is written in parts, still in one system call.
    const raw = parseResponseLine(Buffer.from('{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"hi"}]}}'))!;
    expect(Array.isArray(encodeMessage(raw))).toBe(true);
    await writeMessage(sink, raw);
    expect(writes).toEqual([1, 3, 3]);
    await new Promise((r) => setImmediate(r));
    expect(writes).toEqual([1, 3, 3]);
  });

  it('busy (the peer has other work of ours in flight): the first message waits for the burst too, one write in all', async () => {
    const { writes, sink } = countingSink();
    const ping = (id: number) => ({ jsonrpc: '2.0', id, method: 'ping' }) as JSONRPCMessage;
    const written = [writeMessage(sink, ping(1), true), writeMessage(sink, ping(2), true), writeMessage(sink, ping(3))];
    expect(writes).toEqual([]);
    await new Promise((r) => setImmediate(r));
    await Promise.all(written);
    expect(writes).toEqual([3]);
  });

  it('a burst leaves once the task that wrote it has settled, awaits and all, before the event loop runs anything else', async () => {
    const { writes, sink } = countingSink();
    const ping = (id: number) => ({ jsonrpc: '2.0', id, method: 'ping' }) as JSONRPCMessage;
    const seen = await new Promise<number[]>((resolve) => {
      // Like a records flush: a check-phase callback whose answers are written along chains of awaits.
      setImmediate(() => {
        setImmediate(() => resolve([...writes]));
        const answer = async (id: number, hops: number) => {
          for (let i = 0; i < hops; i++) await null;
          void writeMessage(sink, ping(id), true);
        };
        void answer(1, 0);
        void answer(2, 3);
        void answer(3, 10);
        expect(writes).toEqual([]);
      });
    });
    // One write of all three, made before the next callback of the event loop (here the next check phase).
    expect(seen).toEqual([3]);
  });

  it('the stdio server writes an answer at once when nothing else is to be answered, else with the burst', async () => {
    const stdin = new PassThrough();
    let bytes = 0;
    const stdout = new Writable({
      write(chunk: Buffer, _enc, done) {
        bytes += chunk.length;
        done();
      },
    });
    const wire = new StdioServerTransport(stdin, stdout);
    await wire.start();
    stdin.write('{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n');
    void wire.send({ jsonrpc: '2.0', id: 1, result: {} } as JSONRPCMessage);
    expect(bytes).toBe(0); // request 2 is still to be answered: the client is not waiting on this one alone
    await new Promise((r) => setImmediate(r));
    expect(bytes).toBeGreaterThan(0);
    const before = bytes;
    void wire.send({ jsonrpc: '2.0', id: 2, result: {} } as JSONRPCMessage);
    expect(bytes).toBeGreaterThan(before); // the last one leaves at once
    await wire.close();
  });
});
