import type { JSONRPCMessage } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { BoundedEventStore } from '../../src/transports/http/event-store.js';

const msg = (n: number): JSONRPCMessage => ({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 't', progress: n } });

async function replay(store: BoundedEventStore, after: string) {
  const sent: [string, JSONRPCMessage][] = [];
  const stream = await store.replayEventsAfter(after, { send: async (id, m) => void sent.push([id, m]) });
  return { stream, sent };
}

describe('BoundedEventStore', () => {
  it('replays the events of one stream after the given id, in order, and names the stream', async () => {
    const store = new BoundedEventStore(100);
    const a1 = await store.storeEvent('stream-a', msg(1));
    await store.storeEvent('stream-b', msg(99));
    const a2 = await store.storeEvent('stream-a', msg(2));
    const a3 = await store.storeEvent('stream-a', msg(3));
    expect(await store.getStreamIdForEventId(a2)).toBe('stream-a');
    const { stream, sent } = await replay(store, a1);
    expect(stream).toBe('stream-a');
    expect(sent.map(([id]) => id)).toEqual([a2, a3]);
    expect(sent.map(([, m]) => (m as unknown as { params: { progress: number } }).params.progress)).toEqual([2, 3]);
  });

  it('keeps stream ids that contain the separator or underscores intact', async () => {
    const store = new BoundedEventStore(10);
    const id = await store.storeEvent('_GET_stream', msg(1));
    expect(await store.getStreamIdForEventId(id)).toBe('_GET_stream');
  });

  it('skips empty priming events on replay', async () => {
    const store = new BoundedEventStore(10);
    const prime = await store.storeEvent('s', {} as JSONRPCMessage);
    await store.storeEvent('s', msg(1));
    const { sent } = await replay(store, prime);
    expect(sent).toHaveLength(1);
  });

  it('holds at most maxEvents, dropping the oldest; a resume past the bound gets what is left', async () => {
    const store = new BoundedEventStore(3);
    const ids: string[] = [];
    for (let i = 1; i <= 6; i++) ids.push(await store.storeEvent('s', msg(i)));
    expect(store.size).toBe(3);
    const { sent, stream } = await replay(store, ids[0]!);
    expect(stream).toBe('s');
    expect(sent.map(([id]) => id)).toEqual(ids.slice(3));
  });

  it('stays bounded over many events', async () => {
    const store = new BoundedEventStore(10);
    for (let i = 0; i < 5000; i++) await store.storeEvent('s', msg(i));
    expect(store.size).toBe(10);
  });

  it('rejects an id it did not issue', async () => {
    const store = new BoundedEventStore(10);
    expect(await store.getStreamIdForEventId('garbage')).toBeUndefined();
    expect(await store.getStreamIdForEventId('s|0')).toBeUndefined();
    await expect(replay(store, 'garbage')).rejects.toThrow();
  });

  it('with maxEvents 0 still issues ids but keeps nothing', async () => {
    const store = new BoundedEventStore(0);
    const id = await store.storeEvent('s', msg(1));
    await store.storeEvent('s', msg(2));
    expect(store.size).toBe(0);
    expect((await replay(store, id)).sent).toEqual([]);
  });
});
