/**
 * The upstream `tools/call` lane (src/wire/direct-calls.ts) over in-memory transports: the test
 * plays the upstream on the other end of a linked pair, byte for byte, and stands in for the SDK
 * `Client`'s handlers on ours, so what the lane takes and what it leaves to the SDK is seen. One
 * test runs it beside a real SDK `Client` and `Server`.
 */
import { Client, InMemoryTransport, ProtocolError, SdkError, SdkErrorCode } from '@modelcontextprotocol/client';
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/client';
import { Server } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { classifyFailure } from '../../src/broker/failure.js';
import { BrokerError } from '../../src/shared/errors.js';
import { DIRECT_ID_PREFIX, DirectCalls, NET_TICK_MS } from '../../src/wire/direct-calls.js';

/** Our end (with stand-ins for the SDK's handlers), the upstream's end, and what each received. */
async function linked() {
  const [ours, upstream] = InMemoryTransport.createLinkedPair();
  const sdkGot: JSONRPCMessage[] = [];
  let sdkClosed = 0;
  ours.onmessage = (m) => void sdkGot.push(m);
  ours.onclose = () => void sdkClosed++;
  const upstreamGot: JSONRPCMessage[] = [];
  const waiters: Array<(m: JSONRPCMessage) => void> = [];
  upstream.onmessage = (m) => {
    upstreamGot.push(m);
    waiters.shift()?.(m);
  };
  await ours.start();
  await upstream.start();
  const direct = new DirectCalls(ours);
  return {
    ours,
    upstream,
    direct,
    sdkGot,
    upstreamGot,
    get sdkClosed() {
      return sdkClosed;
    },
    /** The next message the upstream receives. */
    nextAtUpstream(): Promise<JSONRPCMessage> {
      return new Promise((resolve) => waiters.push(resolve));
    },
    /** Sends from the upstream and waits until our end handled it (the pair delivers in order). */
    async answer(message: object): Promise<void> {
      await upstream.send(message as JSONRPCMessage);
    },
  };
}

/** A transport that answers nothing; `onSend` sees each message as it is sent, synchronously. */
function sink(onSend?: (m: JSONRPCMessage) => void): Transport {
  return {
    start: async () => undefined,
    close: async () => undefined,
    send(m: JSONRPCMessage) {
      onSend?.(m);
      return Promise.resolve();
    },
  };
}

afterEach(() => {
  vi.useRealTimers();
});

/** A transport whose `send` serialises synchronously, as the stdio framing does, and keeps what it wrote. */
function serialisingTransport(): Transport & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    start: async () => undefined,
    close: async () => undefined,
    send(message: JSONRPCMessage) {
      lines.push(JSON.stringify(message));
      return Promise.resolve();
    },
  };
}

describe('DirectCalls', () => {
  it('a request whose send throws while serialising rejects as unserialisable and unsent, leaves nothing pending, and sends no cancel', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const transport = serialisingTransport();
    const direct = new DirectCalls(transport);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const err = await direct.request('tools/call', { name: 'x', arguments: cyclic }, { timeoutMs: 20 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BrokerError);
    expect(err).toMatchObject({ code: 'unserialisable', data: { sent: false } });
    expect((err as Error).message).toBe('the tools/call request cannot be serialised as JSON; nothing was sent');
    expect(classifyFailure(err)).toMatchObject({ outcome: 'invalid_arguments', sent: false });
    expect(direct.size).toBe(0);
    vi.advanceTimersByTime(40); // past the request's timeout: no cancel for a request never sent
    expect(transport.lines).toEqual([]);
  });

  it('sends {jsonrpc, id, method, params} with an id of its own, resolves with the result, and keeps the response from the SDK', async () => {
    const h = await linked();
    const sent = h.nextAtUpstream();
    const answer = h.direct.request('tools/call', { name: 'echo', arguments: { a: 1 } }, { timeoutMs: 60_000, owner: 'session-1' });
    const request = (await sent) as { id: string };
    expect(Object.keys(request)).toEqual(['jsonrpc', 'id', 'method', 'params']);
    expect(request).toEqual({ jsonrpc: '2.0', id: `${DIRECT_ID_PREFIX}1`, method: 'tools/call', params: { name: 'echo', arguments: { a: 1 } } });
    expect(h.direct.size).toBe(1);
    expect(h.direct.ownerOf(request.id)).toBe('session-1');
    await h.answer({ jsonrpc: '2.0', id: request.id, result: { content: [{ type: 'text', text: 'hi' }] } });
    expect(await answer).toEqual({ content: [{ type: 'text', text: 'hi' }] });
    expect(h.direct.size).toBe(0);
    expect(h.direct.ownerOf(request.id)).toBeUndefined();
    expect(h.sdkGot).toEqual([]);
  });

  it('leaves to the SDK: numeric ids, notifications, and a request from the upstream even when its id has our prefix', async () => {
    const h = await linked();
    const passed = [
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', id: 'other:1', result: {} },
      { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'mcp-broker:1', progress: 1 } },
      { jsonrpc: '2.0', id: `${DIRECT_ID_PREFIX}1`, method: 'sampling/createMessage', params: {} },
    ];
    for (const m of passed) await h.answer(m);
    expect(h.sdkGot).toEqual(passed);
  });

  it('an answer for an id it never sent, or one already settled, is dropped (not passed to the SDK)', async () => {
    const h = await linked();
    const sent = h.nextAtUpstream();
    const answer = h.direct.request('tools/call', { name: 'x' }, { timeoutMs: 60_000 });
    const { id } = (await sent) as { id: string };
    await h.answer({ jsonrpc: '2.0', id, result: { n: 1 } });
    await h.answer({ jsonrpc: '2.0', id, result: { n: 2 } });
    await h.answer({ jsonrpc: '2.0', id: `${DIRECT_ID_PREFIX}99`, result: {} });
    expect(await answer).toEqual({ n: 1 });
    expect(h.sdkGot).toEqual([]);
  });

  it('an error response rejects with the ProtocolError its code names, data kept; one without a usable code is -32603', async () => {
    const h = await linked();
    let sent = h.nextAtUpstream();
    let answer = h.direct.request('tools/call', { name: 'x' }, { timeoutMs: 60_000 });
    let { id } = (await sent) as { id: string };
    await h.answer({ jsonrpc: '2.0', id, error: { code: -32602, message: 'Unknown tool', data: { name: 'x' } } });
    const err = await answer.catch((e: unknown) => e);
    expect(ProtocolError.isInstance(err)).toBe(true);
    expect(err).toMatchObject({ code: -32602, data: { name: 'x' } });
    expect((err as Error).message).toContain('Unknown tool');

    sent = h.nextAtUpstream();
    answer = h.direct.request('tools/call', { name: 'x' }, { timeoutMs: 60_000 });
    ({ id } = (await sent) as { id: string });
    await h.answer({ jsonrpc: '2.0', id, error: { code: 'bad', message: 7 } });
    expect(await answer.catch((e: unknown) => e)).toMatchObject({ code: -32603, message: expect.stringContaining('upstream error') });
  });

  it.each([
    ['a result that is not an object', { result: [1] }, 'neither a result nor an error'],
    ['neither result nor error', {}, 'neither a result nor an error'],
    ['both a result and an error (it was taken for a result)', { result: { content: [] }, error: { code: -32603, message: 'x' } }, 'both a result and an error'],
  ])('an answer with %s rejects at once, not at the timeout', async (_what, body, why) => {
    const h = await linked();
    const sent = h.nextAtUpstream();
    const answer = h.direct.request('tools/call', { name: 'x' }, { timeoutMs: 60_000 });
    const { id } = (await sent) as { id: string };
    await h.answer({ jsonrpc: '2.0', id, ...body });
    const err = await answer.catch((e: unknown) => e);
    expect(ProtocolError.isInstance(err)).toBe(true);
    expect((err as Error).message).toContain(why);
    expect(h.direct.size).toBe(0);
  });

  it('a null member beside the other is left out: "error": null with a result is the result, "result": null with an error the error', async () => {
    const h = await linked();
    let sent = h.nextAtUpstream();
    let answer = h.direct.request('tools/call', { name: 'x' }, { timeoutMs: 60_000 });
    let { id } = (await sent) as { id: string };
    await h.answer({ jsonrpc: '2.0', id, result: { content: [] }, error: null });
    expect(await answer).toEqual({ content: [] });
    sent = h.nextAtUpstream();
    answer = h.direct.request('tools/call', { name: 'x' }, { timeoutMs: 60_000 });
    ({ id } = (await sent) as { id: string });
    await h.answer({ jsonrpc: '2.0', id, result: null, error: { code: -32602, message: 'no such tool' } });
    expect(await answer.catch((e: unknown) => e)).toMatchObject({ code: -32602, message: expect.stringContaining('no such tool') });
  });

  it('an abort sends notifications/cancelled upstream with the reason and rejects with it; the late answer is dropped', async () => {
    const h = await linked();
    const controller = new AbortController();
    const sent = h.nextAtUpstream();
    const answer = h.direct.request('tools/call', { name: 'slow' }, { timeoutMs: 60_000, signal: controller.signal });
    const { id } = (await sent) as { id: string };
    const cancelled = h.nextAtUpstream();
    controller.abort('user stop');
    const err = await answer.catch((e: unknown) => e);
    expect(SdkError.isInstance(err)).toBe(true);
    expect(err).toMatchObject({ code: SdkErrorCode.RequestTimeout, message: 'user stop' });
    expect(await cancelled).toEqual({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'user stop' } });
    await h.answer({ jsonrpc: '2.0', id, result: {} });
    expect(h.sdkGot).toEqual([]);
    expect(h.direct.size).toBe(0);
  });

  it('an abort whose reason is an SdkError or ProtocolError rejects with that very error', async () => {
    const h = await linked();
    const controller = new AbortController();
    const reason = new SdkError(SdkErrorCode.ConnectionClosed, 'going');
    const answer = h.direct.request('tools/call', { name: 'slow' }, { timeoutMs: 60_000, signal: controller.signal });
    controller.abort(reason);
    expect(await answer.catch((e: unknown) => e)).toBe(reason);
  });

  it('an already aborted signal rejects with its reason and sends nothing', async () => {
    const h = await linked();
    const err = await h.direct.request('tools/call', { name: 'x' }, { timeoutMs: 60_000, signal: AbortSignal.abort('before') }).catch((e: unknown) => e);
    expect(err).toBe('before');
    await h.ours.send({ jsonrpc: '2.0', method: 'notifications/initialized' } as JSONRPCMessage);
    expect(h.upstreamGot).toEqual([{ jsonrpc: '2.0', method: 'notifications/initialized' }]);
  });

  it('the timeout sends notifications/cancelled and rejects with RequestTimeout', async () => {
    const h = await linked();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const sent = h.nextAtUpstream();
    const answer = h.direct.request('tools/call', { name: 'slow' }, { timeoutMs: 5000 });
    const { id } = (await sent) as { id: string };
    const cancelled = h.nextAtUpstream();
    vi.advanceTimersByTime(4999);
    expect(h.direct.size).toBe(1);
    vi.advanceTimersByTime(1);
    expect(await answer.catch((e: unknown) => e)).toMatchObject({ code: SdkErrorCode.RequestTimeout, message: 'Request timed out', data: { timeout: 5000 } });
    expect(await cancelled).toMatchObject({ method: 'notifications/cancelled', params: { requestId: id, reason: expect.stringContaining('Request timed out') } });
  });

  it('a request with a signal that never fires is timed out by the net, between timeoutMs and two ticks after, and the net then stops', async () => {
    const h = await linked();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    const sent = h.nextAtUpstream();
    const answer = h.direct.request('tools/call', { name: 'slow' }, { timeoutMs: 5000, signal: new AbortController().signal });
    const { id } = (await sent) as { id: string };
    const cancelled = h.nextAtUpstream();
    // No timer of its own: the net's one interval.
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(5000);
    expect(h.direct.size).toBe(1);
    vi.advanceTimersByTime(2 * NET_TICK_MS);
    expect(await answer.catch((e: unknown) => e)).toMatchObject({ code: SdkErrorCode.RequestTimeout, message: 'Request timed out', data: { timeout: 5000 } });
    expect(await cancelled).toMatchObject({ method: 'notifications/cancelled', params: { requestId: id, reason: expect.stringContaining('Request timed out') } });
    expect(vi.getTimerCount()).toBe(0);
  });

  it('the net never times a request out before its timeoutMs, whatever the phase of its tick', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    const direct = new DirectCalls(sink());
    // Keeps the net running, so each request below meets it at another phase.
    direct.request('tools/call', {}, { timeoutMs: 1e9, signal: new AbortController().signal }).catch(() => undefined);
    for (const timeoutMs of [1, 999, 1000, 1001, 1500, 5000]) {
      for (const phase of [0, 1, 500, 999]) {
        vi.advanceTimersByTime(phase);
        const start = Date.now();
        let after = -1;
        direct.request('tools/call', {}, { timeoutMs, signal: new AbortController().signal }).catch(() => (after = Date.now() - start));
        while (after < 0) await vi.advanceTimersByTimeAsync(1);
        expect(after, `timeoutMs ${timeoutMs}, phase ${phase}`).toBeGreaterThanOrEqual(timeoutMs);
        expect(after, `timeoutMs ${timeoutMs}, phase ${phase}`).toBeLessThanOrEqual(timeoutMs + 2 * NET_TICK_MS);
      }
    }
  });

  it('a request sent while the net times another out (a synchronous send) is watched too', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    let late: Promise<unknown> | undefined;
    const direct: DirectCalls = new DirectCalls(
      sink((m) => {
        if ((m as { method?: string }).method === 'notifications/cancelled' && !late) {
          late = direct.request('tools/call', { name: 'late' }, { timeoutMs: 1000, signal: new AbortController().signal }).catch((e: unknown) => e);
        }
      }),
    );
    const first = direct.request('tools/call', {}, { timeoutMs: 1000, signal: new AbortController().signal }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(2 * NET_TICK_MS);
    expect(await first).toMatchObject({ code: SdkErrorCode.RequestTimeout });
    expect(direct.size).toBe(1);
    await vi.advanceTimersByTimeAsync(3 * NET_TICK_MS);
    expect(direct.size).toBe(0);
    expect(await late).toMatchObject({ code: SdkErrorCode.RequestTimeout });
    expect(vi.getTimerCount()).toBe(0);
  });

  it('the net leaves answered requests alone and stops at its first tick with none left to watch', async () => {
    const h = await linked();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    const signal = new AbortController().signal;
    const sent = h.nextAtUpstream();
    const answer = h.direct.request('tools/call', { name: 'x' }, { timeoutMs: 60_000, signal });
    const { id } = (await sent) as { id: string };
    await h.answer({ jsonrpc: '2.0', id, result: { content: [] } });
    expect(await answer).toEqual({ content: [] });
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(NET_TICK_MS);
    expect(vi.getTimerCount()).toBe(0);
    // A later request starts it again.
    const again = h.direct.request('tools/call', { name: 'x' }, { timeoutMs: 1000, signal });
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(3 * NET_TICK_MS);
    expect(await again.catch((e: unknown) => e)).toMatchObject({ code: SdkErrorCode.RequestTimeout });
  });

  it('closing the connection rejects every pending request with ConnectionClosed, later ones at once, and still reaches the SDK onclose', async () => {
    const h = await linked();
    const a = h.direct.request('tools/call', { name: 'a' }, { timeoutMs: 60_000 });
    const b = h.direct.request('tools/call', { name: 'b' }, { timeoutMs: 60_000 });
    await h.upstream.close();
    for (const p of [a, b]) expect(await p.catch((e: unknown) => e)).toMatchObject({ code: SdkErrorCode.ConnectionClosed });
    expect(h.sdkClosed).toBe(1);
    expect(await h.direct.request('tools/call', { name: 'c' }, { timeoutMs: 60_000 }).catch((e: unknown) => e)).toMatchObject({
      code: SdkErrorCode.ConnectionClosed,
    });
    expect(h.direct.size).toBe(0);
  });

  it('runs beside a real SDK Client on one connection: each gets its own answers', async () => {
    const [clientEnd, serverEnd] = InMemoryTransport.createLinkedPair();
    const server = new Server({ name: 'up', version: '0.0.0' }, { capabilities: { tools: {} } });
    const seenIds: unknown[] = [];
    server.setRequestHandler('tools/list', async () => ({ tools: [{ name: 'echo', inputSchema: { type: 'object' } }] }));
    server.fallbackRequestHandler = async (request) => {
      seenIds.push(request.id);
      return { content: [{ type: 'text', text: `echo ${JSON.stringify(request.params)}` }] } as never;
    };
    await server.connect(serverEnd);
    const client = new Client({ name: 'down', version: '0.0.0' });
    await client.connect(clientEnd);
    const direct = new DirectCalls(clientEnd);
    const [listed, called] = await Promise.all([client.listTools(), direct.request('tools/call', { name: 'echo', arguments: { a: 1 } }, { timeoutMs: 60_000 })]);
    expect(listed.tools.map((t) => t.name)).toEqual(['echo']);
    expect(called).toEqual({ content: [{ type: 'text', text: 'echo {"name":"echo","arguments":{"a":1}}' }] });
    expect(seenIds).toEqual([`${DIRECT_ID_PREFIX}1`]);
    expect((await client.callTool({ name: 'echo', arguments: {} })).content).toEqual([{ type: 'text', text: 'echo {"name":"echo","arguments":{}}' }]);
    await client.close();
  });
});
