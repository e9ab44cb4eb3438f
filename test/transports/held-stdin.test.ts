/** stdin held while a stdio broker starts (src/transports/held-stdin.ts), over in-memory streams. */
import { PassThrough, type Readable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HeldStdin } from '../../src/transports/held-stdin.js';

/** Everything `stream` gives until it ends. */
async function drain(stream: Readable): Promise<string> {
  let text = '';
  stream.on('data', (c: Buffer) => (text += c.toString()));
  stream.resume();
  await new Promise((resolve) => stream.once('end', resolve));
  return text;
}

const never = new Promise<void>(() => undefined);

describe('HeldStdin', () => {
  afterEach(() => vi.useRealTimers());

  it('the start settling first wins (rejected too); what arrived meanwhile is read first by the transport, then the rest', async () => {
    const stdin = new PassThrough();
    const held = new HeldStdin(stdin, 1024);
    stdin.write('{"id":1}\n');
    await new Promise(setImmediate);
    const failed = Promise.reject(new Error('bad module'));
    expect(await held.outlastsClient(failed, 10_000)).toBe(true);
    await expect(failed).rejects.toThrow('bad module');
    const stream = held.release();
    expect(stream).toBe(stdin);
    stdin.end('{"id":2}\n');
    expect(await drain(stream)).toBe('{"id":1}\n{"id":2}\n');
  });

  it('stdin ending with nothing but whitespace sent: the start still has graceMs to settle (a failing one is reported), then the client is gone', async () => {
    vi.useFakeTimers();
    const stdin = new PassThrough();
    const held = new HeldStdin(stdin, 1024);
    stdin.end('\n \r\n');
    let graced = 0;
    const verdict = held.outlastsClient(never, 5_000, () => graced++);
    let settled: boolean | undefined;
    void verdict.then((v) => (settled = v));
    await vi.advanceTimersByTimeAsync(4_999);
    expect(graced).toBe(1);
    expect(settled).toBeUndefined();
    expect(held.requestsSent).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await verdict).toBe(false);

    const again = new PassThrough();
    const failing = new HeldStdin(again, 1024);
    again.end();
    let fail!: (err: Error) => void;
    const start = new Promise<void>((_, reject) => (fail = reject));
    const outcome = failing.outlastsClient(start, 5_000, () => fail(new Error('bad module')));
    expect(await outcome).toBe(true);
    await expect(start).rejects.toThrow('bad module');
  });

  it('stdin ending with requests sent: the start has graceMs to finish, then the client is gone', async () => {
    vi.useFakeTimers();
    const stdin = new PassThrough();
    const held = new HeldStdin(stdin, 1024);
    let graced = 0;
    stdin.end('{"id":1}\n');
    const verdict = held.outlastsClient(never, 5_000, () => graced++);
    await vi.advanceTimersByTimeAsync(4_999);
    expect(graced).toBe(1);
    let settled: boolean | undefined;
    void verdict.then((v) => (settled = v));
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(await verdict).toBe(false);
  });

  it('stdin ending with requests sent, the start finishing within graceMs: the transport reads them, then the end', async () => {
    const stdin = new PassThrough();
    const held = new HeldStdin(stdin, 1024);
    let started!: () => void;
    const start = new Promise<void>((resolve) => (started = resolve));
    stdin.end('{"id":1}\n');
    const verdict = held.outlastsClient(start, 60_000, () => started());
    expect(await verdict).toBe(true);
    const stream = held.release();
    expect(stream).not.toBe(stdin);
    expect(await drain(stream)).toBe('{"id":1}\n');
  });

  it('past maxBytes reading pauses (a client that sent that much is not judged gone) until the transport reads', async () => {
    const stdin = new PassThrough();
    const held = new HeldStdin(stdin, 8);
    stdin.write('0123456789\n');
    await new Promise(setImmediate);
    expect(stdin.isPaused()).toBe(true);
    stdin.end('rest\n');
    await new Promise(setImmediate);
    // The end is not seen while paused: no verdict but the start's.
    expect(await held.outlastsClient(Promise.resolve(), 0)).toBe(true);
    expect(await drain(held.release())).toBe('0123456789\nrest\n');
  });

  it('stdin ending after the start won (before the transport reads) starts no grace timer (regression: a timer of graceMs was left running)', async () => {
    vi.useFakeTimers();
    const stdin = new PassThrough();
    const held = new HeldStdin(stdin, 1024);
    let graced = 0;
    expect(await held.outlastsClient(Promise.resolve(), 60_000, () => graced++)).toBe(true);
    stdin.end('{"id":1}\n');
    await new Promise((resolve) => process.nextTick(resolve));
    await vi.advanceTimersByTimeAsync(0);
    expect(graced).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    expect(await drain(held.release())).toBe('{"id":1}\n');
  });
});
