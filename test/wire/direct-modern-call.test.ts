/**
 * The modern `tools/call` lane (src/wire/direct-modern-call.ts) against the SDK's own path, over
 * the SDK's `serveStdio` and the broker's stdio transport on in-memory streams, with a real SDK
 * `Server` behind the lane wired as `transports/session.ts` wires it. Every case is sent twice
 * with one envelope: the first time the SDK serves it (the lane has not seen that envelope
 * accepted), the second time the lane does; the bytes written to stdout must be the same.
 */
import { PassThrough } from 'node:stream';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { ProtocolError, Server } from '@modelcontextprotocol/server';
import type { ServerContext } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { afterEach, describe, expect, it } from 'vitest';
import { StdioServerTransport } from '../../src/transports/stdio-server.js';
import { encodePlainResult, routeModernToolsCallDirectly, sameJson, type ModernDirectLane } from '../../src/wire/direct-modern-call.js';
import type { DirectCallExtra, DirectCallParams } from '../../src/wire/direct-tools-call.js';
import { encodeMessage, LAZY_STRING_MIN_BYTES, parseResponseLine, RAW_MIN_BYTES, rawJsonString, withMeta } from '../../src/wire/raw-json.js';
import { resultOf } from '../support/messages.js';

const SERVER_INFO = { name: 'lane-test', version: '1.2.3' };
const PV = 'io.modelcontextprotocol/protocolVersion';
const CAPS = 'io.modelcontextprotocol/clientCapabilities';
const INFO = 'io.modelcontextprotocol/clientInfo';
const LEVEL = 'io.modelcontextprotocol/logLevel';

/** What the stand-in broker does per tool name; `via` tells which lane called it. */
type Tool = (params: DirectCallParams, extra: Pick<DirectCallExtra, 'signal' | 'sendNotification'>, ctx: ServerContext) => Promise<unknown>;

const text = (t: string) => ({ type: 'text', text: t });
const TOOLS: Record<string, Tool> = {
  ok: async () => ({ content: [text('hello')], _meta: { 'mcp-broker/outcome': 'ok', 'mcp-broker/callId': 'c1' } }),
  tool_error: async () => ({ content: [text('it broke')], isError: true, _meta: { 'mcp-broker/outcome': 'tool_error', 'mcp-broker/callId': 'c2' } }),
  refusal: async () => ({ content: [text('denied: rule r1 (policy)')], isError: true, _meta: { 'mcp-broker/outcome': 'denied', 'mcp-broker/callId': 'c3' } }),
  bare: async () => ({ content: [text('no meta')] }),
  structured: async () => ({ structuredContent: { n: 1 }, extra: [1, 2], content: [text('{"n":1}')], isError: false }),
  image: async () => ({ content: [{ type: 'image', data: 'aGk=', mimeType: 'image/png' }], _meta: { 'mcp-broker/outcome': 'ok' } }),
  reordered: async () => ({ content: [{ text: 'order', type: 'text' }] }),
  contentless: async () => ({ _meta: { 'mcp-broker/outcome': 'ok' } }),
  // As the broker hands on a large upstream result that passed through unchanged (raw-json.ts).
  large: async () => {
    const line = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [text('x'.repeat(RAW_MIN_BYTES))], isError: false } });
    const { result } = parseResponseLine(Buffer.from(line)) as unknown as { result: Record<string, unknown> };
    return withMeta(result, { 'mcp-broker/outcome': 'ok', 'mcp-broker/callId': 'c9' });
  },
  unknown: async (params) => {
    throw new ProtocolError(-32602, `Unknown tool: ${params.name}`);
  },
  not_found: async () => {
    throw new ProtocolError(-32002, 'gone', { uri: 'x://y' });
  },
  url_required: async () => {
    throw new ProtocolError(-32042, 'open a URL', { elicitations: [] });
  },
  crash: async () => {
    throw new TypeError('boom');
  },
  input: async () => ({
    resultType: 'input_required',
    inputRequests: { 'up/1': { method: 'elicitation/create', params: { mode: 'form', message: 'name?', requestedSchema: { type: 'object', properties: {} } } } },
    requestState: 'sealed',
  }),
  progress: async (params, extra) => {
    await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: params._meta!.progressToken as string, progress: 1, total: 2 } });
    return { content: [text('done')] };
  },
  log: async (_params, _extra, ctx) => {
    await ctx.mcpReq.log('debug', 'hidden', 'mcp-broker');
    await ctx.mcpReq.log('warning', { seen: true }, 'mcp-broker');
    return { content: [text('logged')] };
  },
  slow: (_params, extra) =>
    new Promise((resolve) => extra.signal.addEventListener('abort', () => resolve({ content: [text('too late')] }), { once: true })),
};

async function harness() {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const lines: string[] = [];
  let buffered = '';
  const waiters: Array<{ test: (line: string) => boolean; resolve: (line: string) => void }> = [];
  stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      lines.push(line);
      for (const w of [...waiters]) {
        if (w.test(line)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  });
  const ran: Array<'sdk' | 'lane'> = [];
  let replayed = 0;
  const wire = new StdioServerTransport(stdin, stdout);
  const serving = serveStdio(
    () => {
      const server = new Server(SERVER_INFO, { capabilities: { tools: {}, logging: {} } });
      let lane: ModernDirectLane | undefined;
      const tool = (params: DirectCallParams, extra: Pick<DirectCallExtra, 'signal' | 'sendNotification'>, ctx: ServerContext, via: 'sdk' | 'lane') => {
        ran.push(via);
        return (TOOLS[params.name] ?? TOOLS.unknown)(params, extra, ctx);
      };
      server.setRequestHandler('tools/call', (req, ctx) => {
        const replay = lane?.takeReplay(ctx.mcpReq.id);
        if (replay) {
          replayed++;
          return (replay.ok ? Promise.resolve(replay.value) : Promise.reject(replay.err)) as never;
        }
        lane?.learn(ctx.mcpReq.envelope as Record<string, unknown>);
        const extra = { signal: ctx.mcpReq.signal, sendNotification: (n: never) => ctx.mcpReq.notify(n) };
        return tool(req.params as DirectCallParams, extra as never, ctx, 'sdk') as never;
      });
      const connect = server.connect.bind(server);
      server.connect = async (transport) => {
        await connect(transport);
        lane = routeModernToolsCallDirectly(server, transport, (params, extra, ctx) => tool(params, extra, ctx, 'lane'), { serverInfo: SERVER_INFO, logging: true });
      };
      return server;
    },
    { transport: wire },
  );
  const send = (message: object) => void stdin.write(JSON.stringify(message) + '\n');
  /** The first line from index `from` on that passes `test`. */
  const next = (test: (line: string) => boolean, from = 0) => {
    const seen = lines.slice(from).find(test);
    if (seen) return Promise.resolve(seen);
    return new Promise<string>((resolve) => waiters.push({ test, resolve }));
  };
  return { send, next, lines, ran, get replayed() { return replayed; }, close: () => serving.close() };
}

const answerTo = (id: string | number) => (line: string) => {
  const m = JSON.parse(line) as { id?: unknown; method?: unknown };
  return m.id === id && m.method === undefined;
};

let open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const h of open) await h.close().catch(() => undefined);
  open = [];
});

let envelopes = 0;
/** A fresh envelope: the lane has never seen the SDK accept it. */
function envelope(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { [PV]: '2026-07-28', [INFO]: { name: `client-${++envelopes}`, version: '1' }, [CAPS]: { elicitation: { form: {} } }, ...extra };
}

async function started() {
  const h = await harness();
  open.push(h);
  // The opening request pins the connection modern (it carries a classification: the SDK serves it).
  h.send({ jsonrpc: '2.0', id: 'open', method: 'server/discover', params: { _meta: envelope() } });
  await h.next(answerTo('open'));
  return h;
}

/** Sends `params` (with `meta` as `_meta`) twice under one id and envelope; resolves with the two answers and the lanes that ran. */
async function twice(h: Awaited<ReturnType<typeof harness>>, id: string | number, params: Record<string, unknown>, meta: Record<string, unknown> = envelope()) {
  const before = h.ran.length;
  const answers: string[] = [];
  for (let i = 0; i < 2; i++) {
    const from = h.lines.length;
    h.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { ...params, _meta: meta } });
    answers.push(await h.next(answerTo(id), from));
  }
  return { sdk: answers[0]!, lane: answers[1]!, ran: h.ran.slice(before) };
}

describe('routeModernToolsCallDirectly: the lane answers byte for byte what the SDK answers', () => {
  it.each([
    ['ok', 'ok'],
    ['tool_error', 'tool_error'],
    ['a refusal', 'refusal'],
    ['a result without _meta', 'bare'],
    ['structuredContent and a key of its own', 'structured'],
    ['a large result written as the bytes it arrived in', 'large'],
    ['an unknown tool (-32602)', 'nope'],
    ['-32002 (answered -32602 on 2026-07-28)', 'not_found'],
    ['an Error without a code (-32603)', 'crash'],
  ])('%s: taken by the lane, same bytes', async (_what, name) => {
    const h = await started();
    const { sdk, lane, ran } = await twice(h, 5, { name, arguments: { a: 1 } });
    expect(ran).toEqual(['sdk', 'lane']);
    expect(lane).toBe(sdk);
    expect(h.replayed).toBe(0);
  });

  it.each([
    ['image content', 'image'],
    ['text content with its keys in another order', 'reordered'],
    ['a result without content', 'contentless'],
    ['an input_required result', 'input'],
    ['-32042 (URL elicitation required, no such error on 2026-07-28)', 'url_required'],
  ])('%s: run by the lane, answered by the SDK from its outcome (same bytes, the tool ran once)', async (_what, name) => {
    const h = await started();
    const { sdk, lane, ran } = await twice(h, 'r', { name });
    expect(ran).toEqual(['sdk', 'lane']);
    expect(h.replayed).toBe(1);
    expect(lane).toBe(sdk);
  });

  it('progress: the notification and the answer are the same bytes', async () => {
    const h = await started();
    const meta = envelope({ progressToken: 'tok' });
    const { sdk, lane, ran } = await twice(h, 8, { name: 'progress' }, meta);
    expect(ran).toEqual(['sdk', 'lane']);
    expect(lane).toBe(sdk);
    const progress = h.lines.filter((line) => line.includes('notifications/progress'));
    expect(progress).toHaveLength(2);
    expect(progress[1]).toBe(progress[0]);
  });

  it("logs: sent at or above the envelope's logLevel, the same bytes", async () => {
    const h = await started();
    const { sdk, lane, ran } = await twice(h, 9, { name: 'log' }, envelope({ [LEVEL]: 'info' }));
    expect(ran).toEqual(['sdk', 'lane']);
    expect(lane).toBe(sdk);
    const logs = h.lines.filter((line) => line.includes('notifications/message'));
    expect(logs).toHaveLength(2);
    expect(logs[1]).toBe(logs[0]);
    expect(logs[0]).toContain('"warning"');
  });

  it('cancel: notifications/cancelled aborts the call and neither lane answers', async () => {
    const h = await started();
    const meta = envelope();
    for (const via of ['sdk', 'lane']) {
      const before = h.ran.length;
      h.send({ jsonrpc: '2.0', id: `c-${via}`, method: 'tools/call', params: { name: 'slow', _meta: meta } });
      await expect.poll(() => h.ran.length).toBe(before + 1);
      expect(h.ran.at(-1)).toBe(via);
      h.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: `c-${via}`, reason: 'enough' } });
      // In order: the cancel was handled before this answer is written.
      h.send({ jsonrpc: '2.0', id: `after-${via}`, method: 'tools/call', params: { name: 'ok', _meta: meta } });
      await h.next(answerTo(`after-${via}`));
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(h.lines.filter((line) => line.includes('too late'))).toEqual([]);
  });

  it.each([
    ['arguments that are not an object (-32602 from the SDK)', { name: 'ok', arguments: 'x' }],
    ['a task', { name: 'ok', task: { ttl: 1 } }],
    ['a retry (requestState)', { name: 'ok', requestState: 'abc' }],
    ['a params key of its own', { name: 'ok', other: 1 }],
  ])('%s: the SDK serves it both times', async (_what, params) => {
    const h = await started();
    const meta = (params as { _meta?: Record<string, unknown> })._meta ?? envelope();
    const { sdk, lane } = await twice(h, 3, params, meta);
    expect(h.ran.includes('lane')).toBe(false);
    expect(lane).toBe(sdk);
  });

  it('a progress token that is not an integer goes to the SDK (which drops the message as no request)', async () => {
    const h = await started();
    const meta = envelope();
    await twice(h, 'learn', { name: 'ok' }, meta);
    h.send({ jsonrpc: '2.0', id: 'bad', method: 'tools/call', params: { name: 'ok', _meta: { ...meta, progressToken: 1.5 } } });
    h.send({ jsonrpc: '2.0', id: 'sync', method: 'tools/call', params: { name: 'ok', _meta: meta } });
    await h.next(answerTo('sync'));
    expect(h.ran).toEqual(['sdk', 'lane', 'lane']);
    expect(h.lines.some(answerTo('bad'))).toBe(false);
  });

  it('an envelope the SDK refuses is never learned: every such call is answered by the SDK (-32602)', async () => {
    const h = await started();
    const bad = { [PV]: '2026-07-28', [CAPS]: { sampling: 'yes' } };
    const { sdk, lane } = await twice(h, 4, { name: 'ok' }, bad);
    expect(JSON.parse(sdk)).toMatchObject({ error: { code: -32602 } });
    expect(lane).toBe(sdk);
    expect(h.ran).toEqual([]);
  });
});

describe('sameJson (the lane\'s envelope check)', () => {
  /** `value` rebuilt with every object's keys in reverse order. */
  const reordered = (value: unknown): unknown =>
    Array.isArray(value)
      ? value.map(reordered)
      : value !== null && typeof value === 'object'
        ? Object.fromEntries(Object.keys(value).reverse().map((k) => [k, reordered((value as Record<string, unknown>)[k])]))
        : value;

  it('property: says what isDeepStrictEqual says of JSON values, whatever the order of their keys', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (a, b) => {
        const copy = JSON.parse(JSON.stringify(a)) as unknown;
        expect(sameJson(a, reordered(copy), 0)).toBe(isDeepStrictEqual(a, copy));
        expect(sameJson(a, b, 0)).toBe(isDeepStrictEqual(a, b));
      }),
      { numRuns: 3000 },
    );
  });
});

describe('encodePlainResult of a large text still in its bytes (raw-json.ts)', () => {
  it('is a plain result without reading the text, and is written as the bytes it came in', () => {
    const text = 'The quick brown fox; \\"q\\"\\n'.repeat(Math.ceil(LAZY_STRING_MIN_BYTES / 20));
    const parsed = resultOf<{ content: object[] }>(parseResponseLine(Buffer.from(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"${text}"}]}}`)));
    const block = parsed.content[0]!;
    // As the broker answers it: its outcome stamped first (withMeta), then the lane's encoding.
    const encoded = encodePlainResult(withMeta(parsed as Record<string, unknown>, { 'mcp-broker/outcome': 'ok' }), { name: 'broker', version: '1' });
    expect(encoded).toBeDefined();
    expect(rawJsonString(block, 'text')!.read).toBe(false);
    const written = encodeMessage({ jsonrpc: '2.0', id: 9, result: encoded } as never);
    expect(typeof written).not.toBe('string');
    expect(rawJsonString(block, 'text')!.read).toBe(false);
    expect(JSON.parse(Buffer.concat(written as Buffer[]).toString('utf8')).result.resultType).toBe('complete');
  });
});
