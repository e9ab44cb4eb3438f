import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { BoundedEventStore } from '../../src/transports/http/event-store.js';

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
