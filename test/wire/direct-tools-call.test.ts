/**
 * The downstream `tools/call` lane (src/wire/direct-tools-call.ts) over an in-memory transport
 * pair, with a real SDK `Server` behind it: which calls take the lane, which go to the SDK
 * unchanged, cancellation, errors and close. The client end is raw JSON-RPC, so every byte the
 * lane or the SDK answers is seen.
 */
import { InMemoryTransport, RELATED_TASK_META_KEY, Server } from '@modelcontextprotocol/server';
import type { JSONRPCMessage, JSONRPCRequest } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { routeToolsCallDirectly, settleLaneCall, type DirectCallExtra, type DirectCallParams } from '../../src/wire/direct-tools-call.js';
import { resultOf } from '../support/messages.js';

interface Pending {
  readonly params: DirectCallParams;
  readonly extra: DirectCallExtra;
  resolve(result: unknown): void;
  reject(error: unknown): void;
}

/** A deferred call the test settles by hand. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** A raw client end, a `Server` whose SDK path answers `{sdk: <method>}`, and the lane in front of it. */
async function harness() {
  const [clientEnd, serverEnd] = InMemoryTransport.createLinkedPair();
  const received: JSONRPCMessage[] = [];
  const waiters: Array<{ test: (m: JSONRPCMessage) => boolean; resolve: (m: JSONRPCMessage) => void }> = [];
  clientEnd.onmessage = (message) => {
    received.push(message);
    for (const w of [...waiters]) {
      if (w.test(message)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(message);
      }
    }
  };
  await clientEnd.start();

  const server = new Server({ name: 'lane-test', version: '0.0.0' }, { capabilities: { tools: {} } });
  const sdkSeen: JSONRPCRequest[] = [];
  server.fallbackRequestHandler = async (request) => {
    sdkSeen.push(request);
    return { content: [{ type: 'text', text: `sdk:${request.method}` }] } as never;
  };
  const sdkNotifications: string[] = [];
  server.fallbackNotificationHandler = async (n) => void sdkNotifications.push(n.method);
  let sdkClosed = 0;
  server.onclose = () => void sdkClosed++;
  const sdkErrors: string[] = [];
  server.onerror = (err) => void sdkErrors.push(err.message);
  await server.connect(serverEnd);

  const calls: Pending[] = [];
  const called: Array<(p: Pending) => void> = [];
  routeToolsCallDirectly(server, serverEnd, (params, extra) =>
    new Promise((resolve, reject) => {
      const p = { params, extra, resolve, reject };
      calls.push(p);
      called.shift()?.(p);
    }),
  );

  return {
    received,
    sdkSeen,
    sdkNotifications,
    sdkErrors,
    calls,
    get sdkClosed() {
      return sdkClosed;
    },
    send: (message: object) => clientEnd.send(message as JSONRPCMessage),
    /** The next message the client end gets that passes `test`. */
    next(test: (m: JSONRPCMessage) => boolean): Promise<JSONRPCMessage> {
      const seen = received.find(test);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve) => waiters.push({ test, resolve }));
    },
    /** The next call the lane hands to its handler. */
    nextCall(): Promise<Pending> {
      return new Promise((resolve) => called.push(resolve));
    },
    close: () => clientEnd.close(),
    server,
  };
}

const answerTo = (id: string | number) => (m: JSONRPCMessage) => (m as { id?: unknown }).id === id && !('method' in m);

let open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const h of open) await h.close().catch(() => undefined);
  open = [];
});

async function started() {
  const h = await harness();
  open.push(h);
  return h;
}

describe('routeToolsCallDirectly: what takes the lane', () => {
  it('a well-formed tools/call goes to the handler with its params, id and _meta, and its result is the answer; the SDK never sees it', async () => {
    const h = await started();
    const call = h.nextCall();
    await h.send({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: { a: 1 }, _meta: { progressToken: 'p1', 'x/y': 2 } } });
    const p = await call;
    expect(p.params).toEqual({ name: 'echo', arguments: { a: 1 }, _meta: { progressToken: 'p1', 'x/y': 2 } });
    expect(p.extra.requestId).toBe(7);
    expect(p.extra._meta).toEqual({ progressToken: 'p1', 'x/y': 2 });
    expect(p.extra.signal.aborted).toBe(false);
    p.resolve({ content: [{ type: 'text', text: 'direct' }] });
    expect(await h.next(answerTo(7))).toEqual({ jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text: 'direct' }] } });
    expect(h.sdkSeen).toEqual([]);
  });

  it('takes string ids, calls without arguments or _meta, and a numeric progress token', async () => {
    const h = await started();
    for (const [id, params] of [
      ['s-1', { name: 'a' }],
      [0, { name: 'b', arguments: {} }],
      ['s-2', { name: 'c', _meta: { progressToken: 3 } }],
    ] as const) {
      const call = h.nextCall();
      await h.send({ jsonrpc: '2.0', id, method: 'tools/call', params });
      const p = await call;
      expect(p.extra.requestId).toBe(id);
      p.resolve({ content: [] });
      expect(await h.next(answerTo(id))).toMatchObject({ result: { content: [] } });
    }
    expect(h.sdkSeen).toEqual([]);
  });

  it.each([
    ['a task-augmented call', { name: 'x', task: { ttl: 1000 } }],
    ['arguments that are not an object', { name: 'x', arguments: [1, 2] }],
    ['arguments null', { name: 'x', arguments: null }],
    ['no name', { arguments: {} }],
    ['a name that is not a string', { name: 5 }],
    ['_meta naming a related task', { name: 'x', _meta: { [RELATED_TASK_META_KEY]: { taskId: 't' } } }],
  ])('%s goes to the SDK unchanged', async (_what, params) => {
    const h = await started();
    await h.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params });
    expect(await h.next(answerTo(1))).toMatchObject({ result: { content: [{ type: 'text', text: 'sdk:tools/call' }] } });
    expect(h.sdkSeen).toEqual([expect.objectContaining({ method: 'tools/call', params })]);
    expect(h.calls).toEqual([]);
  });

  it.each([
    ['_meta that is not an object', { name: 'x', _meta: 'm' }],
    ['a progress token that is neither string nor number', { name: 'x', _meta: { progressToken: { t: 1 } } }],
  ])('%s goes to the SDK unchanged (which refuses the message as malformed)', async (_what, params) => {
    const h = await started();
    await h.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params });
    await h.send({ jsonrpc: '2.0', id: 2, method: 'prompts/list', params: {} });
    await h.next(answerTo(2)); // in order: the SDK has handled the first by now
    expect(h.sdkErrors).toEqual([expect.stringContaining(JSON.stringify(params))]);
    expect(h.calls).toEqual([]);
  });

  it('other methods and a tools/call notification (no id) go to the SDK', async () => {
    const h = await started();
    await h.send({ jsonrpc: '2.0', id: 2, method: 'prompts/list', params: {} });
    expect(await h.next(answerTo(2))).toMatchObject({ result: { content: [{ text: 'sdk:prompts/list' }] } });
    await h.send({ jsonrpc: '2.0', method: 'tools/call', params: { name: 'x' } });
    await h.send({ jsonrpc: '2.0', id: 3, method: 'prompts/list', params: {} });
    await h.next(answerTo(3)); // in order: the notification was delivered before
    expect(h.calls).toEqual([]);
    expect(h.sdkNotifications).toContain('tools/call');
  });

  it('a second tools/call with the id of one in flight is not taken (the SDK answers it); the first is answered once', async () => {
    const h = await started();
    const first = h.nextCall();
    await h.send({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'slow' } });
    const p = await first;
    await h.send({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'again' } });
    expect(await h.next(answerTo(9))).toMatchObject({ result: { content: [{ text: 'sdk:tools/call' }] } });
    expect(h.sdkSeen.map((r) => (r.params as { name: string }).name)).toEqual(['again']);
    p.resolve({ content: [{ type: 'text', text: 'direct' }] });
    await h.next((m) => answerTo(9)(m) && JSON.stringify(m).includes('"direct"'));
    await h.send({ jsonrpc: '2.0', id: 'sync', method: 'prompts/list', params: {} });
    await h.next(answerTo('sync'));
    // Once the first settled, the id is free: the next call with it takes the lane again.
    const third = h.nextCall();
    await h.send({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'third' } });
    expect((await third).params.name).toBe('third');
    expect(h.received.filter(answerTo(9)).map((m) => resultOf<{ content: [{ text: string }] }>(m).content[0].text)).toEqual([
      'sdk:tools/call',
      'direct',
    ]);
  });
});

describe('routeToolsCallDirectly: cancel, errors, close', () => {
  it('notifications/cancelled aborts the call with its reason and nothing is answered', async () => {
    const h = await started();
    const call = h.nextCall();
    await h.send({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'slow' } });
    const p = await call;
    const aborted = deferred();
    p.extra.signal.addEventListener('abort', aborted.resolve);
    await h.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 4, reason: 'user stop' } });
    await aborted.promise;
    expect(p.extra.signal.reason).toBe('user stop');
    // Nothing more goes out for it: a progress notification is dropped, and so is the late result.
    await p.extra.sendNotification({ method: 'notifications/progress', params: { progressToken: 'x', progress: 1 } });
    await expect(p.extra.sendRequest({ method: 'ping' } as never, undefined as never)).rejects.toThrow('Request was cancelled');
    p.resolve({ content: [{ type: 'text', text: 'late' }] });
    await h.send({ jsonrpc: '2.0', id: 5, method: 'prompts/list', params: {} });
    await h.next(answerTo(5));
    expect(h.received.filter(answerTo(4))).toEqual([]);
    expect(h.received.filter((m) => 'method' in m && m.method === 'notifications/progress')).toEqual([]);
  });

  it('an id the client cancelled is free at once: a new call with it takes the lane while the cancelled one has not unwound, and only the new one is answered', async () => {
    const h = await started();
    const first = h.nextCall();
    await h.send({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'slow' } });
    const slow = await first;
    await h.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 4, reason: 'user stop' } });
    expect(slow.extra.signal.aborted).toBe(true);
    // The cancelled call's handler has not settled yet; the id is used again.
    const second = h.nextCall();
    await h.send({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'again' } });
    const again = await second;
    expect(again.params.name).toBe('again');
    expect(h.sdkSeen).toEqual([]);
    slow.resolve({ content: [{ type: 'text', text: 'late' }] });
    again.resolve({ content: [{ type: 'text', text: 'fresh' }] });
    const answer = resultOf<{ content: Array<{ text: string }> }>(await h.next(answerTo(4)));
    expect(answer.content[0]!.text).toBe('fresh');
    await h.send({ jsonrpc: '2.0', id: 5, method: 'prompts/list', params: {} });
    await h.next(answerTo(5));
    expect(h.received.filter(answerTo(4))).toHaveLength(1);
  });

  it('a cancel of a call the SDK serves still reaches the SDK', async () => {
    const h = await started();
    const aborted = deferred();
    h.server.fallbackRequestHandler = (_request, ctx) =>
      new Promise((_resolve, reject) => {
        ctx.mcpReq.signal.addEventListener('abort', () => {
          aborted.resolve();
          reject(new Error('aborted'));
        });
      });
    await h.send({ jsonrpc: '2.0', id: 11, method: 'tools/call', params: { name: 'x', task: { ttl: 1 } } });
    await h.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 11, reason: 'stop' } });
    await aborted.promise;
    expect(h.calls).toEqual([]);
  });

  it('a cancel for an id that is not on the lane changes nothing on it', async () => {
    const h = await started();
    const call = h.nextCall();
    await h.send({ jsonrpc: '2.0', id: 'live', method: 'tools/call', params: { name: 'slow' } });
    const p = await call;
    await h.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'other' } });
    await h.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: { no: 1 } } });
    await h.send({ jsonrpc: '2.0', id: 5, method: 'prompts/list', params: {} });
    await h.next(answerTo(5));
    expect(p.extra.signal.aborted).toBe(false);
    p.resolve({ content: [] });
    expect(await h.next(answerTo('live'))).toMatchObject({ result: { content: [] } });
  });

  it('abort() from the broker (deadline, shutdown) aborts the signal and the answer is still sent', async () => {
    const h = await started();
    const call = h.nextCall();
    await h.send({ jsonrpc: '2.0', id: 6, method: 'tools/call', params: { name: 'slow' } });
    const p = await call;
    p.extra.abort('deadline');
    expect(p.extra.signal.aborted).toBe(true);
    expect(p.extra.signal.reason).toBe('deadline');
    p.resolve({ content: [{ type: 'text', text: 'timeout' }], isError: true });
    expect(await h.next(answerTo(6))).toMatchObject({ result: { isError: true } });
  });

  it('progress from the handler goes out while the call runs', async () => {
    const h = await started();
    const call = h.nextCall();
    await h.send({ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'p', _meta: { progressToken: 'tok' } } });
    const p = await call;
    await p.extra.sendNotification({ method: 'notifications/progress', params: { progressToken: 'tok', progress: 1, total: 2 } });
    expect(await h.next((m) => 'method' in m && m.method === 'notifications/progress')).toMatchObject({
      params: { progressToken: 'tok', progress: 1, total: 2 },
    });
    p.resolve({ content: [] });
    await h.next(answerTo(8));
  });

  it.each([
    ['a numeric code, message and data', Object.assign(new Error('bad args'), { code: -32602, data: { field: 'a' } }), { code: -32602, message: 'bad args', data: { field: 'a' } }],
    ['no code', new Error('boom'), { code: -32603, message: 'boom' }],
    ['a code that is not an integer', Object.assign(new Error('odd'), { code: 1.5 }), { code: -32603, message: 'odd' }],
    ['a string code', Object.assign(new Error('str'), { code: 'E_X' }), { code: -32603, message: 'str' }],
    ['no message', { code: -32000 }, { code: -32000, message: 'Internal error' }],
  ])('a thrown error with %s is answered as a JSON-RPC error', async (_what, thrown, error) => {
    const h = await started();
    const call = h.nextCall();
    await h.send({ jsonrpc: '2.0', id: 10, method: 'tools/call', params: { name: 'x' } });
    (await call).reject(thrown);
    expect(await h.next(answerTo(10))).toEqual({ jsonrpc: '2.0', id: 10, error });
  });

  it('closing the transport aborts every call in flight, sends nothing for them, and still reaches the SDK onclose', async () => {
    const h = await started();
    const a = h.nextCall();
    await h.send({ jsonrpc: '2.0', id: 'a', method: 'tools/call', params: { name: 'slow' } });
    const pa = await a;
    const b = h.nextCall();
    await h.send({ jsonrpc: '2.0', id: 'b', method: 'tools/call', params: { name: 'slow' } });
    const pb = await b;
    await h.close();
    expect(pa.extra.signal.aborted).toBe(true);
    expect(pb.extra.signal.aborted).toBe(true);
    expect(h.sdkClosed).toBe(1);
    pa.resolve({ content: [] });
    pb.reject(new Error('gone'));
    await Promise.resolve();
    expect(h.received.filter((m) => 'id' in m && (m.id === 'a' || m.id === 'b'))).toEqual([]);
  });
});

describe('settleLaneCall', () => {
  const flush = () => new Promise((resolve) => setImmediate(resolve));

  it('answers with the outcome, then frees the id; a fulfilled and a rejected handler alike', async () => {
    const seen: string[] = [];
    settleLaneCall(
      Promise.resolve('r'),
      (ok, value) => void seen.push(`answer ${ok} ${String(value)}`),
      () => void seen.push('release'),
      () => void seen.push('error'),
    );
    settleLaneCall(
      Promise.reject(new Error('no')),
      (ok, value) => void seen.push(`answer ${ok} ${(value as Error).message}`),
      () => void seen.push('release'),
      () => void seen.push('error'),
    );
    await flush();
    expect(seen).toEqual(['answer true r', 'release', 'answer false no', 'release']);
  });

  it('a send that fails and an answer that throws both reach onSendError, and the id is freed', async () => {
    const errors: unknown[] = [];
    const released: number[] = [];
    const gone = new Error('pipe closed');
    settleLaneCall(Promise.resolve(1), () => Promise.reject(gone), () => void released.push(1), (err) => void errors.push(err));
    const thrown = new Error('cannot encode');
    settleLaneCall(
      Promise.resolve(2),
      () => {
        throw thrown;
      },
      () => void released.push(2),
      (err) => void errors.push(err),
    );
    await flush();
    expect(released).toEqual([1, 2]);
    expect(errors).toHaveLength(2);
    expect(errors).toEqual(expect.arrayContaining([thrown, gone]));
  });

  it('the id is freed even when the answer throws and reporting it throws too', async () => {
    const released: number[] = [];
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      settleLaneCall(
        Promise.resolve(1),
        () => {
          throw new Error('cannot encode');
        },
        () => void released.push(1),
        () => {
          throw new Error('report failed');
        },
      );
      await flush();
      await flush();
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    expect(released).toEqual([1]);
  });
});
