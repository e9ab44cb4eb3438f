import { PassThrough, Writable } from 'node:stream';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LineFramer, serializeMessage, writeMessage } from '../../src/wire/framing.js';
import { knownJsonBytes, RAW_MIN_BYTES, type MessageEnds } from '../../src/wire/raw-json.js';
import { OutputPressure } from '../../src/wire/output-pressure.js';
import { StdioServerTransport, type StdioServerOptions } from '../../src/transports/stdio-server.js';

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

  it('issue 17 §1: a UTF-8 BOM before the first line made it noise; it is dropped, whole or split across chunks', () => {
    const line = Buffer.from('{"jsonrpc":"2.0","id":1,"result":{}}\n{"jsonrpc":"2.0","id":2,"result":{}}\n');
    const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), line]);
    for (const parts of [[bytes], cut(bytes, [1]), cut(bytes, [2]), cut(bytes, [1, 2]), cut(bytes, [1, 2, 3])]) {
      const { framer, out } = collect();
      for (const part of parts) framer.push(part);
      expect(out.noise).toEqual([]);
      expect(out.messages.map((m) => (m as { id: number }).id)).toEqual([1, 2]);
    }
  });

  it('issue 17 §1: only the stream\'s first bytes may be a BOM; a stream starting with other bytes is left as it is', () => {
    const { framer, out } = collect();
    framer.push(Buffer.from([0xef]));
    framer.push(Buffer.from('x\n'));
    framer.push(Buffer.from('\ufeff{"jsonrpc":"2.0","id":3,"result":{}}\n'));
    expect(out.noise).toEqual(['\ufffdx', '\ufeff{"jsonrpc":"2.0","id":3,"result":{}}']);
    expect(out.messages).toEqual([]);
  });

  it('the limit is inclusive: a line of exactly maxMessageBytes is a message, one byte more is oversize, however it is cut', () => {
    const line = (n: number) => {
      const head = '{"jsonrpc":"2.0","id":1,"result":{"t":"';
      return Buffer.from(head + 'x'.repeat(n - head.length - 3) + '"}}');
    };
    const exact = line(100);
    const over = line(101);
    expect([exact.length, over.length]).toEqual([100, 101]);
    for (const at of [[], [50], [99], [100], [1, 2, 3, 99, 100]]) {
      const { framer, out } = collect(100);
      for (const part of cut(Buffer.concat([exact, Buffer.from('\n'), over, Buffer.from('\n')]), at.concat(at.map((a) => a + 101)))) framer.push(part);
      expect(out.messages).toEqual([JSON.parse(exact.toString())]);
      expect(out.oversize).toEqual([101]);
    }
  });

  it('an oversize line fed a byte at a time still shows its id and kind at its ends', () => {
    const ends: Array<MessageEnds | undefined> = [];
    const framer = new LineFramer({ message: () => undefined, noise: () => undefined, oversize: (_b, e) => void ends.push(e) }, 2048);
    const bytes = Buffer.from(`{"jsonrpc":"2.0","method":"tools/call","params":{"blob":"${'y'.repeat(5000)}"},"id":"req-7"}\n`);
    for (let i = 0; i < bytes.length; i++) framer.push(bytes.subarray(i, i + 1));
    expect(ends).toEqual([{ id: 'req-7', kind: 'request' }]);
  });

  it('CRLF line ends: small and large lines parse, and a large response keeps its bytes', () => {
    const { framer, out } = collect();
    const large = { jsonrpc: '2.0', id: 2, result: { content: [{ type: 'text', text: 'z'.repeat(RAW_MIN_BYTES) }] } };
    framer.push(Buffer.from(`{"jsonrpc":"2.0","id":1,"result":{}}\r\n${JSON.stringify(large)}\r\n`));
    expect(out.messages).toEqual([{ jsonrpc: '2.0', id: 1, result: {} }, large]);
    expect(knownJsonBytes((out.messages[1] as { result: object }).result)).toBe(JSON.stringify(large.result).length);
    expect(out.noise).toEqual([]);
  });

  it('a large line that is not a plain response (a request, an error) is parsed whole, with no bytes remembered', () => {
    const { framer, out } = collect();
    const request = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { arguments: { big: 'q'.repeat(RAW_MIN_BYTES) } } };
    const error = { jsonrpc: '2.0', id: 4, error: { code: -32000, message: 'e'.repeat(RAW_MIN_BYTES) } };
    framer.push(Buffer.from(`${JSON.stringify(request)}\n${JSON.stringify(error)}\n`));
    expect(out.messages).toEqual([request, error]);
    expect(knownJsonBytes((out.messages[0] as { params: object }).params)).toBeUndefined();
  });

  it('issue 17 §2: end() takes a last line that has no newline', () => {
    const { framer, out } = collect();
    framer.push(Buffer.from('{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"jsonrpc":"2.0","id":2,"method":"ping"}'));
    expect(out.messages).toHaveLength(1);
    framer.end();
    expect(out.messages.map((m) => (m as { id: number }).id)).toEqual([1, 2]);
  });
});

describe('StdioServerTransport', () => {
  afterEach(() => void vi.useRealTimers());

  function setup(max?: number, options?: StdioServerOptions) {
    const stdin = new PassThrough();
    const stdout = new PassThrough();
    const transport = new StdioServerTransport(stdin, stdout, max, options);
    const received: unknown[] = [];
    transport.onmessage = (m) => received.push(m);
    let written = '';
    stdout.on('data', (c: Buffer) => (written += c.toString('utf8')));
    const replies = () => written.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { id: unknown; error?: { code: number; message: string } });
    let closed = false;
    transport.onclose = () => (closed = true);
    return { stdin, stdout, transport, received, replies, closed: () => closed };
  }
  const turn = () => new Promise((r) => setImmediate(r));

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
    const { stdin, transport, closed } = setup();
    await transport.start();
    stdin.end();
    await turn();
    expect(closed()).toBe(true);
  });

  it('issue 17 §2: stdin EOF with a request pending closed before its answer; now the answer is written, then it closes', async () => {
    const { stdin, transport, received, replies, closed } = setup();
    await transport.start();
    stdin.end('{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n{"jsonrpc":"2.0","id":2,"method":"ping"}');
    await turn();
    expect(received.map((m) => (m as { id: number }).id)).toEqual([1, 2]); // the last line had no newline
    expect(closed()).toBe(false);
    await transport.send({ jsonrpc: '2.0', id: 2, result: {} });
    await turn();
    expect(closed()).toBe(false);
    await transport.send({ jsonrpc: '2.0', id: 1, result: { tools: [] } });
    await vi.waitFor(() => expect(closed()).toBe(true));
    expect(replies().map((r) => r.id)).toEqual([2, 1]);
  });

  it('issue 17 §2: after stdin EOF our requests to the client fail at once (no answer can come), those asked before and after', async () => {
    const { stdin, transport, received } = setup();
    await transport.start();
    stdin.write('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}\n');
    await turn();
    await transport.send({ jsonrpc: '2.0', id: 'ask-1', method: 'elicitation/create', params: {} });
    stdin.end();
    await turn();
    await transport.send({ jsonrpc: '2.0', id: 'ping-1', method: 'ping' });
    await vi.waitFor(() => expect(received.filter((m) => 'error' in (m as object)).map((m) => (m as { id: string }).id)).toEqual(['ask-1', 'ping-1']));
    expect(received.filter((m) => 'error' in (m as object))).toMatchObject([{ error: { code: -32000 } }, { error: { code: -32000 } }]);
  });

  it('issue 17 §2: a request the client cancelled is not waited for after EOF', async () => {
    const { stdin, transport, closed } = setup();
    await transport.start();
    stdin.write('{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"x"}}\n');
    stdin.end('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c"}}\n');
    await vi.waitFor(() => expect(closed()).toBe(true));
  });

  it('issue 17 §2: at drainTimeoutMs, onDrainTimeout cancels what runs; what is still unanswered gets -32603; then it closes', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    let cancelled = 0;
    const { stdin, transport, replies, closed } = setup(undefined, {
      drainTimeoutMs: 5000,
      onDrainTimeout: async () => {
        cancelled++;
        await transport.send({ jsonrpc: '2.0', id: 1, result: { isError: true } }); // the cancelled call's answer
      },
    });
    await transport.start();
    stdin.end('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}\n{"jsonrpc":"2.0","id":2,"method":"prompts/list"}\n');
    await turn();
    await vi.advanceTimersByTimeAsync(4999);
    expect(cancelled).toBe(0);
    expect(closed()).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await vi.waitFor(() => expect(closed()).toBe(true));
    expect(cancelled).toBe(1);
    const [first, second] = replies();
    expect(first).toMatchObject({ id: 1, result: { isError: true } });
    expect(second).toMatchObject({ id: 2, error: { code: -32603 } });
    expect(second!.error!.message).toContain('drainTimeoutMs (5000 ms)');
  });

  it('issue 17 §3: a client that stops reading made output pile up; past maxPendingOutputBytes stdin is not read and the pressure is set until stdout drains', async () => {
    const pressure = new OutputPressure();
    const stdin = new PassThrough();
    const stdout = new PassThrough({ highWaterMark: 1024 });
    const transport = new StdioServerTransport(stdin, stdout, undefined, { maxPendingOutputBytes: 64 * 1024, pressure });
    const received: unknown[] = [];
    transport.onmessage = (m) => received.push(m);
    await transport.start();
    const big = (id: number) => ({ jsonrpc: '2.0' as const, id, result: { text: 'x'.repeat(40 * 1024) } });
    void transport.send(big(1));
    await turn();
    expect(pressure.congested).toBe(false);
    void transport.send(big(2));
    expect(stdout.writableLength).toBeGreaterThan(64 * 1024);
    expect(pressure.congested).toBe(true);
    expect(stdin.isPaused()).toBe(true);
    stdin.write('{"jsonrpc":"2.0","id":3,"method":"ping"}\n');
    await turn();
    expect(received).toEqual([]); // not read while congested
    stdout.resume(); // the client reads again
    await vi.waitFor(() => expect(pressure.congested).toBe(false));
    await vi.waitFor(() => expect(received).toEqual([{ jsonrpc: '2.0', id: 3, method: 'ping' }]));
  });
});

describe('writeMessage', () => {
  it('a burst of answers over a full buffer waits on one drain listener, without the listener-leak warning, and each settles at the drain', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const stdout = new PassThrough({ highWaterMark: 256 });
      stdout.pause(); // nobody reads yet: every write past the mark reports a full buffer
      const message = (id: number) => ({ jsonrpc: '2.0' as const, id, result: { text: 'x'.repeat(200) } });
      let settled = 0;
      const writes = Array.from({ length: 64 }, (_, i) => writeMessage(stdout, message(i)).then(() => settled++));
      await new Promise((r) => setImmediate(r)); // the corked burst leaves
      expect(stdout.writableNeedDrain).toBe(true);
      expect(stdout.listenerCount('drain')).toBe(1);
      expect(settled).toBeLessThan(64);
      stdout.resume();
      await Promise.all(writes);
      expect(settled).toBe(64);
      expect(stdout.listenerCount('drain')).toBe(0);
      // The next burst over a full buffer waits again, on a fresh listener.
      stdout.pause();
      const again = Array.from({ length: 16 }, (_, i) => writeMessage(stdout, message(100 + i)));
      await new Promise((r) => setImmediate(r));
      expect(stdout.listenerCount('drain')).toBe(1);
      stdout.resume();
      await Promise.all(again);
      await new Promise((r) => setImmediate(r)); // a warning is emitted on the next tick
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a message the stream takes at once is written when the call returns and settles; one over a full buffer that the stream then fails rejects', async () => {
    const written: string[] = [];
    const taking = new Writable({
      write(chunk: Buffer, _enc, cb) {
        written.push(chunk.toString());
        cb();
      },
    });
    await writeMessage(taking, { jsonrpc: '2.0', id: 1, result: {} });
    expect(written.join('')).toBe('{"jsonrpc":"2.0","id":1,"result":{}}\n');

    // Nothing is taken until the stream fails: the second write finds the buffer full, then the stream errors.
    let fail!: (err: Error) => void;
    const failing = new Writable({
      highWaterMark: 8,
      write(_chunk: Buffer, _enc, cb) {
        fail = cb;
      },
    });
    failing.on('error', () => undefined);
    const first = writeMessage(failing, { jsonrpc: '2.0', id: 2, result: { text: 'x'.repeat(32) } });
    fail(new Error('pipe closed'));
    expect(await first.then(() => 'settled', (err: Error) => err.message)).toBe('pipe closed');

    // A stream whose write throws (not Node's own): a rejection, never a throw out of writeMessage.
    const throwing = { write: () => { throw new Error('write threw'); } } as unknown as Writable;
    let answer!: Promise<void>;
    expect(() => (answer = writeMessage(throwing, { jsonrpc: '2.0', id: 3, result: {} }))).not.toThrow();
    expect(await answer.then(() => 'settled', (err: Error) => err.message)).toBe('write threw');
  });
});
