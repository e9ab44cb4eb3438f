import type { JSONRPCMessage } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { BoundedEventStore, COMPACT_FROM_BYTES } from '../../src/transports/http/event-store.js';
import { LAZY_STRING_MIN_BYTES, parseResponseLine, rawJsonString, withMeta } from '../../src/wire/raw-json.js';
import { resultOf } from '../support/messages.js';

const result = (id: number, bytes: number): JSONRPCMessage =>
  ({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: 'x'.repeat(bytes) }] } }) as JSONRPCMessage;

describe('BoundedEventStore byte bound (issue 6)', () => {
  it('keeps at most maxBytes of messages, dropping the oldest, and never keeps one larger than that', async () => {
    const store = new BoundedEventStore(100, 1500);
    const first = await store.storeEvent('s', result(1, 600));
    await store.storeEvent('s', result(2, 600));
    expect(store.size).toBe(2);
    await store.storeEvent('s', result(3, 600));
    expect(store.size).toBe(2); // the first went to make room
    await store.storeEvent('s', result(4, 5000)); // too large to keep at all
    expect(store.size).toBe(2);
    const sent: number[] = [];
    await store.replayEventsAfter(first, { send: async (_id, m) => void sent.push((m as { id: number }).id) });
    expect(sent).toEqual([2, 3]);
  });
});

describe('BoundedEventStore large messages', () => {
  it('replays a large message kept as its JSON exactly as it was stored, a pass-through result included', async () => {
    const store = new BoundedEventStore(100);
    const first = await store.storeEvent('s', result(1, 10));
    const large = result(2, COMPACT_FROM_BYTES * 2);
    await store.storeEvent('s', large);
    // A result that arrived as bytes (wire/raw-json.ts), extended with _meta the way the broker does.
    const line = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 3, result: { content: [{ type: 'text', text: 'é'.repeat(COMPACT_FROM_BYTES) }] } }));
    const parsed = resultOf<{ content: unknown[]; _meta?: Record<string, unknown> }>(parseResponseLine(line));
    const raw = { jsonrpc: '2.0', id: 3, result: withMeta(parsed, { outcome: 'ok' }) } as JSONRPCMessage;
    await store.storeEvent('s', raw);
    const sent: JSONRPCMessage[] = [];
    await store.replayEventsAfter(first, { send: async (_id, m) => void sent.push(m) });
    expect(sent).toEqual([large, { jsonrpc: '2.0', id: 3, result: { _meta: { outcome: 'ok' }, content: parsed.content } }]);
  });
});

describe('BoundedEventStore byte accounting of large messages', () => {
  it('counts a large message by its encoded JSON, escapes included', async () => {
    // 40 KiB of newlines: ~40 KiB estimated, ~80 KiB as JSON ("\\n" per character).
    const store = new BoundedEventStore(100, 120 * 1024);
    const newlines = (id: number) => ({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: '\n'.repeat(40 * 1024) }] } }) as JSONRPCMessage;
    const first = await store.storeEvent('s', result(1, 10));
    await store.storeEvent('s', newlines(2));
    await store.storeEvent('s', newlines(3));
    const sent: number[] = [];
    await store.replayEventsAfter(first, { send: async (_id, m) => void sent.push((m as { id: number }).id) });
    // Two of them (~160 KiB) do not fit in 120 KiB: the older one went.
    expect(sent).toEqual([3]);
  });
});

describe('BoundedEventStore: a pass-through result over 512 KiB', () => {
  it('is replayed as stored, with characters of two, three and four bytes across the slices it is decoded in', async () => {
    const store = new BoundedEventStore(100);
    const first = await store.storeEvent('s', result(1, 10));
    // 1.5 MiB of text whose characters straddle every 512 KiB boundary at some offset.
    const text = 'aé€😀'.repeat(160_000);
    const line = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 2, result: { content: [{ type: 'text', text }] } }));
    const parsed = parseResponseLine(line) as { id: number; result: object };
    await store.storeEvent('s', { jsonrpc: '2.0', id: 2, result: parsed.result } as JSONRPCMessage);
    const sent: JSONRPCMessage[] = [];
    await store.replayEventsAfter(first, { send: async (_id, m) => void sent.push(m) });
    expect(sent).toEqual([{ jsonrpc: '2.0', id: 2, result: { content: [{ type: 'text', text }] } }]);
  });
});

describe('BoundedEventStore: a pass-through result is sized by its bytes', () => {
  it('neither keeps nor reads a text held in its bytes when the result is over the bound', async () => {
    const text = 'y'.repeat(LAZY_STRING_MIN_BYTES * 4);
    const line = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text }] } }));
    for (const maxBytes of [LAZY_STRING_MIN_BYTES, LAZY_STRING_MIN_BYTES * 8]) {
      const parsed = resultOf<{ content: object[]; _meta?: Record<string, unknown> }>(parseResponseLine(line));
      const store = new BoundedEventStore(100, maxBytes);
      await store.storeEvent('s', { result: withMeta(parsed, { outcome: 'ok' }), jsonrpc: '2.0', id: 1 } as JSONRPCMessage);
      expect(store.size).toBe(maxBytes > line.length ? 1 : 0);
      // Kept or not, the text was never decoded from its bytes.
      expect(rawJsonString(parsed.content[0], 'text')?.read).toBe(false);
    }
  });
});
