/**
 * `tools/call` past the SDK `serveStdio` entry (src/wire/stdio-entry-lane.ts) against the SDK's
 * own way: the same scripts run over the SDK's `serveStdio` and the broker's stdio transport on
 * in-memory streams, with a real SDK `Server` wired as `transports/session.ts` wires it, once
 * with the entry lane and once without; the lines written to stdout must be the same, and the
 * lane must have taken exactly the calls it may take.
 */
import { PassThrough } from 'node:stream';
import { ProtocolError, Server } from '@modelcontextprotocol/server';
import type { JSONRPCMessage, ServerContext } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { afterEach, describe, expect, it } from 'vitest';
import type { CancelSignal } from '../../src/shared/cancel.js';
import { unprefixErrors } from '../../src/transports/error-prefix.js';
import { guardRequestIds } from '../../src/transports/request-ids.js';
import { StdioServerTransport } from '../../src/transports/stdio-server.js';
import { routeModernToolsCallDirectly, type ModernDirectLane } from '../../src/wire/direct-modern-call.js';
import { routeToolsCallDirectly, type DirectCallParams } from '../../src/wire/direct-tools-call.js';
import { StdioEntryLane } from '../../src/wire/stdio-entry-lane.js';

const SERVER_INFO = { name: 'entry-lane-test', version: '1.0.0' };
const PV = 'io.modelcontextprotocol/protocolVersion';
const CAPS = 'io.modelcontextprotocol/clientCapabilities';
const INFO = 'io.modelcontextprotocol/clientInfo';
const ENVELOPE = { [PV]: '2026-07-28', [INFO]: { name: 'c', version: '1' }, [CAPS]: {} };

const text = (t: string) => ({ type: 'text', text: t });
const TOOLS: Record<string, (params: DirectCallParams, signal: CancelSignal) => Promise<unknown>> = {
  echo: async (params) => ({ content: [text(JSON.stringify(params.arguments ?? {}))], _meta: { 'mcp-broker/outcome': 'ok' } }),
  fail: async () => {
    throw new ProtocolError(-32602, 'MCP error -32602: bad arguments for fail');
  },
  crash: async () => {
    throw new TypeError('boom');
  },
  slow: (_params, signal) => new Promise((resolve) => signal.addEventListener('abort', () => resolve({ content: [text('too late')] }), { once: true })),
};

/** Write these messages in one chunk; wait for the `nth` answer (default the first) to `answer`; close stdin and wait for the close. */
type Step = { send: object[] } | { answer: string | number; nth?: number } | { end: true };

async function harness(withLane: boolean) {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const lines: string[] = [];
  let buffered = '';
  const answered = new Map<unknown, number>();
  const waiters: Array<{ id: string | number; nth: number; resolve: () => void }> = [];
  stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      lines.push(line);
      const m = JSON.parse(line) as { id?: unknown; method?: unknown };
      if (m.method === undefined) answered.set(m.id, (answered.get(m.id) ?? 0) + 1);
      for (const w of [...waiters]) {
        if ((answered.get(w.id) ?? 0) >= w.nth) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
      }
    }
  });
  const wire = new StdioServerTransport(stdin, stdout);
  const entryLane = withLane ? new StdioEntryLane(wire) : undefined;
  const serving = serveStdio(
    ({ era }) => {
      const server = new Server(SERVER_INFO, { capabilities: { tools: {} } });
      let lane: ModernDirectLane | undefined;
      const tool = (params: DirectCallParams, signal: CancelSignal) => (TOOLS[params.name] ?? TOOLS.fail!)(params, signal);
      server.setRequestHandler('tools/call', (req, ctx: ServerContext) => {
        const replay = lane?.takeReplay(ctx.mcpReq.id);
        if (replay) return (replay.ok ? Promise.resolve(replay.value) : Promise.reject(replay.err)) as never;
        lane?.learn(ctx.mcpReq.envelope as Record<string, unknown>);
        return tool(req.params as DirectCallParams, ctx.mcpReq.signal) as never;
      });
      server.setRequestHandler('tools/list', () => ({ tools: [] }));
      const connect = server.connect.bind(server);
      // As DownstreamSession.wrapTransport does.
      server.connect = async (transport) => {
        await connect(transport);
        const watch = entryLane?.attach(transport);
        unprefixErrors(transport);
        if (era === 'legacy') routeToolsCallDirectly(server, transport, (params, extra) => tool(params, extra.signal));
        else lane = routeModernToolsCallDirectly(server, transport, (params, extra) => tool(params, extra.signal), { serverInfo: SERVER_INFO, logging: false });
        guardRequestIds(transport);
        watch?.();
      };
      return server;
    },
    { transport: wire },
  );
  // As transports/stdio.ts does.
  const entry = wire.onmessage;
  const viaEntry: unknown[] = [];
  const toEntry = (m: JSONRPCMessage) => {
    viaEntry.push((m as { id?: unknown }).id ?? (m as { method?: unknown }).method);
    entry?.(m);
  };
  wire.onmessage = (m) => (entryLane ? entryLane.deliver(m, toEntry) : toEntry(m));
  const entryClose = wire.onclose;
  let onClosed!: () => void;
  const closed = new Promise<void>((resolve) => (onClosed = resolve));
  wire.onclose = () => {
    entryLane?.wireClose();
    entryClose?.();
    onClosed();
  };
  const run = async (steps: Step[]) => {
    for (const step of steps) {
      if ('send' in step) stdin.write(step.send.map((m) => JSON.stringify(m) + '\n').join(''));
      else if ('answer' in step) {
        const { answer: id, nth = 1 } = step;
        if ((answered.get(id) ?? 0) < nth) await new Promise<void>((resolve) => waiters.push({ id, nth, resolve }));
      } else {
        stdin.end();
        await closed;
      }
    }
  };
  return { run, lines, viaEntry, close: () => serving.close() };
}

let open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const h of open) await h.close().catch(() => undefined);
  open = [];
});

/** Runs `steps` with and without the entry lane; resolves with both outputs and what went through the entry. */
async function both(steps: Step[]) {
  const out: Record<'sdk' | 'lane', { lines: string[]; viaEntry: unknown[] }> = {} as never;
  for (const side of ['sdk', 'lane'] as const) {
    const h = await harness(side === 'lane');
    open.push(h);
    await h.run(steps);
    out[side] = { lines: [...h.lines], viaEntry: h.viaEntry };
  }
  return out;
}

const call = (id: string | number, name: string, args: Record<string, unknown> = {}, meta?: object) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args, ...(meta && { _meta: meta }) },
});
const cancel = (id: string | number) => ({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'no longer needed' } });
const initialize = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } } };
const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' };

describe('StdioEntryLane: the same bytes as the SDK entry', () => {
  it('legacy: results, errors, a cancel, a duplicate id, a list; a call behind a message still in the entry waits its turn', async () => {
    const { sdk, lane } = await both([
      { send: [initialize] },
      { answer: 0 },
      { send: [initialized, call(1, 'echo', { a: 1 })] },
      { answer: 1 },
      { send: [call(2, 'fail')] },
      { answer: 2 },
      { send: [call('3', 'crash')] },
      { answer: '3' },
      // The second is refused (the id is in flight).
      { send: [call(4, 'slow'), call(4, 'echo')] },
      { answer: 4 },
      { send: [cancel(4), call(5, 'echo', { b: 'x' })] },
      { answer: 5 },
      // The cancelled call's id, used again.
      { send: [call(4, 'echo', { again: true })] },
      { answer: 4, nth: 2 },
      // The list is delivered at once; the ping then waits in the entry's queue, and the call behind it.
      { send: [{ jsonrpc: '2.0', id: 6, method: 'tools/list' }, { jsonrpc: '2.0', id: 9, method: 'ping' }, call(7, 'echo')] },
      { answer: 7 },
      { answer: 6 },
      { answer: 9 },
      { send: [call(8, 'echo', { c: [1, 2] })] },
      { answer: 8 },
    ]);
    expect(lane.lines).toEqual(sdk.lines);
    expect(sdk.lines.filter((l) => l.includes('again'))).toHaveLength(1);
    expect(sdk.viaEntry).toEqual([0, 'notifications/initialized', 1, 2, '3', 4, 4, 'notifications/cancelled', 5, 4, 6, 9, 7, 8]);
    // Taken past the entry: every call once the connection is pinned, unless a message before it was still in the entry.
    expect(lane.viaEntry).toEqual([0, 'notifications/initialized', 'notifications/cancelled', 6, 9, 7]);
  });

  it('legacy: stdin EOF with calls in flight answers them as the SDK does', async () => {
    const { sdk, lane } = await both([{ send: [initialize] }, { answer: 0 }, { send: [call(1, 'echo'), call(2, 'fail')] }, { end: true }]);
    expect(sdk.lines.length).toBe(3);
    expect(lane.lines).toEqual(sdk.lines);
    expect(lane.viaEntry).toEqual([0]);
  });

  it('modern: the call that pins the connection goes through the entry, the ones after it do not', async () => {
    const { sdk, lane } = await both([
      { send: [{ jsonrpc: '2.0', id: 'open', method: 'server/discover', params: { _meta: ENVELOPE } }] },
      { answer: 'open' },
      { send: [call(1, 'echo', { a: 1 }, ENVELOPE)] },
      { answer: 1 },
      { send: [call(2, 'echo', { a: 2 }, ENVELOPE)] },
      { answer: 2 },
      { send: [call(3, 'fail', {}, ENVELOPE)] },
      { answer: 3 },
      { send: [call(4, 'echo', {})] },
      { answer: 4 },
    ]);
    expect(lane.lines).toEqual(sdk.lines);
    expect(lane.viaEntry).toEqual(['open', 1]);
  });

  it('a probe discarded for initialize: calls wait for the legacy instance, then go past the entry', async () => {
    const { sdk, lane } = await both([
      { send: [{ jsonrpc: '2.0', id: 'open', method: 'server/discover', params: { _meta: ENVELOPE } }] },
      { answer: 'open' },
      { send: [initialize, call(1, 'echo')] },
      { answer: 1 },
      { answer: 0 },
      { send: [call(2, 'echo')] },
      { answer: 2 },
    ]);
    expect(lane.lines).toEqual(sdk.lines);
    expect(lane.viaEntry).toEqual(['open', 0, 1]);
  });
});
