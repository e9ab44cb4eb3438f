import { PassThrough } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LineFramer, serializeMessage } from '../../src/shared/framing.js';
import { StdioServerTransport } from '../../src/transports/stdio-server.js';

function collect(max?: number) {
  const out = { messages: [] as unknown[], noise: [] as string[], oversize: [] as number[] };
  const framer = new LineFramer(
    { message: (m) => out.messages.push(m), noise: (l) => out.noise.push(l), oversize: (b) => out.oversize.push(b) },
    max,
  );
  return { framer, out };
}

/** Cuts `bytes` at the given offsets. */
function cut(bytes: Buffer, at: number[]): Buffer[] {
  const points = [...new Set(at.map((p) => p % (bytes.length + 1)))].sort((a, b) => a - b);
  const parts: Buffer[] = [];
  let start = 0;
  for (const p of points) {
    parts.push(bytes.subarray(start, p));
    start = p;
  }
  parts.push(bytes.subarray(start));
  return parts;
}

describe('LineFramer', () => {
  it('F05: a message split inside every multi-byte character decodes exactly', () => {
    const message = { jsonrpc: '2.0', id: 1, result: { text: 'naïve — 😀 汉字' } };
    const bytes = Buffer.from(serializeMessage(message as never));
    // One byte per chunk: every character is split at every possible point.
    const { framer, out } = collect();
    for (let i = 0; i < bytes.length; i++) framer.push(bytes.subarray(i, i + 1));
    expect(out.messages).toEqual([message]);
    expect(out.noise).toEqual([]);
  });

  it('F05: any text, cut anywhere, comes out the same (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: 'binary', maxLength: 40 }), { minLength: 1, maxLength: 5 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        (texts, offsets) => {
          const messages = texts.map((text, i) => ({ jsonrpc: '2.0', id: i, result: { text } }));
          const bytes = Buffer.from(messages.map((m) => serializeMessage(m as never)).join(''));
          const { framer, out } = collect();
          for (const part of cut(bytes, offsets)) framer.push(part);
          expect(out.messages).toEqual(messages);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('F06: a multi-megabyte line arriving in 64 KB chunks is one message', () => {
    const text = 'é'.repeat(3 * 1024 * 1024);
    const bytes = Buffer.from(serializeMessage({ jsonrpc: '2.0', id: 7, result: { text } } as never));
    const { framer, out } = collect();
    for (let i = 0; i < bytes.length; i += 65536) framer.push(bytes.subarray(i, i + 65536));
    expect(out.messages).toHaveLength(1);
    expect((out.messages[0] as { result: { text: string } }).result.text).toBe(text);
  });

  it('F07: non-JSON lines are reported as noise and the stream goes on', () => {
    const { framer, out } = collect();
    framer.push(Buffer.from('Server started ✓\n{"jsonrpc":"2.0","id":1,"result":{}}\n{not json}\r\n\n  \n'));
    framer.push(Buffer.from('{"jsonrpc":"2.0","method":"notifications/initialized"}\r\n'));
    expect(out.noise).toEqual(['Server started ✓', '{not json}']);
    expect(out.messages).toEqual([
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
    ]);
  });

  it('an oversize line is dropped with its length reported; the next line parses', () => {
    const { framer, out } = collect(1024);
    const big = serializeMessage({ jsonrpc: '2.0', id: 1, result: { text: 'x'.repeat(5000) } } as never);
    const small = serializeMessage({ jsonrpc: '2.0', id: 2, result: {} } as never);
    const bytes = Buffer.from(big + small);
    for (let i = 0; i < bytes.length; i += 100) framer.push(bytes.subarray(i, i + 100));
    expect(out.oversize).toEqual([Buffer.byteLength(big) - 1]);
    expect(out.messages).toEqual([{ jsonrpc: '2.0', id: 2, result: {} }]);
  });

  it('a JSON-RPC batch line yields each message; reset drops a partial line', () => {
    const { framer, out } = collect();
    framer.push(Buffer.from('[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]\n{"jsonrpc":"2.0","id":3'));
    framer.reset();
    framer.push(Buffer.from('{"jsonrpc":"2.0","id":4,"method":"ping"}\n'));
    expect(out.messages.map((m) => (m as { id: number }).id)).toEqual([1, 2, 4]);
    expect(out.noise).toEqual([]);
  });
});

describe('StdioServerTransport', () => {
  function setup(max?: number) {
    const stdin = new PassThrough();
    const stdout = new PassThrough();
    const transport = new StdioServerTransport(stdin, stdout, max);
    const received: unknown[] = [];
    transport.onmessage = (m) => received.push(m);
    let written = '';
    stdout.on('data', (c: Buffer) => (written += c.toString('utf8')));
    const replies = () => written.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { id: unknown; error?: { code: number } });
    return { stdin, transport, received, replies };
  }

  it('answers a non-JSON line with -32700 and keeps serving; blank and CRLF lines get no answer', async () => {
    const { stdin, transport, received, replies } = setup();
    await transport.start();
    stdin.write('hello there\n\r\n   \n{"jsonrpc":"2.0","id":1,"method":"ping"}\n');
    await new Promise((r) => setImmediate(r));
    expect(received).toEqual([{ jsonrpc: '2.0', id: 1, method: 'ping' }]);
    expect(replies()).toEqual([{ jsonrpc: '2.0', id: null, error: { code: -32700, message: expect.any(String) } }]);
  });

  it('answers an oversize request with -32600 naming the limit, then goes on', async () => {
    const { stdin, transport, received, replies } = setup(1024);
    await transport.start();
    stdin.write(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"p":"${'y'.repeat(4000)}"}}\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n`);
    await new Promise((r) => setImmediate(r));
    expect(received).toEqual([{ jsonrpc: '2.0', id: 2, method: 'ping' }]);
    const [reply] = replies();
    expect(reply!.error!.code).toBe(-32600);
    expect(JSON.stringify(reply)).toContain('1024');
  });

  it('closes on stdin end', async () => {
    const { stdin, transport } = setup();
    let closed = false;
    transport.onclose = () => (closed = true);
    await transport.start();
    stdin.end();
    await new Promise((r) => setImmediate(r));
    expect(closed).toBe(true);
  });
});
