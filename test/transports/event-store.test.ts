import type { JSONRPCMessage } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { REDACTED, Scrubber } from '../../src/shared/scrub.js';
import { BoundedEventStore, COMPACT_FROM_BYTES } from '../../src/transports/http/event-store.js';

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

describe('BoundedEventStore replay after a secret was added', () => {
  const LATER = 'later-2d7f90c4e1b8';
  const PNG = Buffer.from(`\x89PNG ${LATER}`, 'latin1').toString('base64');
  const result = (id: number, text: string): JSONRPCMessage =>
    ({
      jsonrpc: '2.0',
      id,
      result: {
        content: [
          { type: 'text', text },
          { type: 'image', mimeType: 'image/png', data: PNG },
          { type: 'resource', resource: { uri: 'file:///a.txt', mimeType: 'text/plain', blob: Buffer.from(`note ${text}`).toString('base64') } },
        ],
        tools: [{ name: 'login', inputSchema: { type: 'object', properties: { password: { type: 'string' } } } }],
      },
    }) as JSONRPCMessage;
  const progress = (token: string, message: string): JSONRPCMessage => ({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: 1, message } });

  it('replays an event stored before the scrubber gained a secret scrubbed with it, ids, methods, schemas, tokens and binary data intact (regression: replayed as first sent)', async () => {
    const scrubber = new Scrubber();
    const store = new BoundedEventStore(100, undefined, scrubber);
    const prime = await store.storeEvent('s', {} as JSONRPCMessage);
    await store.storeEvent('s', progress('tok-1', `at ${LATER}`));
    await store.storeEvent('s', result(7, `said ${LATER}`));
    // Large enough to be kept as its JSON text.
    await store.storeEvent('s', result(8, `${'x'.repeat(COMPACT_FROM_BYTES)} ${LATER}`));
    scrubber.addSecrets([LATER]);
    const { sent } = await replay(store, prime);
    expect(sent).toHaveLength(3);
    expect(JSON.stringify(sent)).not.toContain(LATER);
    const [p, r7, r8] = sent.map(([, m]) => m as never as { id?: number; method?: string; params?: Record<string, unknown>; result?: { content: Array<Record<string, unknown>>; tools: unknown[] } });
    expect(p).toEqual({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'tok-1', progress: 1, message: `at ${REDACTED}` } });
    for (const [r, id] of [[r7!, 7], [r8!, 8]] as const) {
      expect(r.id).toBe(id);
      expect(r.result!.content[0]!.text).toMatch(/\[REDACTED\]$/);
      // Binary image data is left as it is; a text blob is scrubbed inside.
      expect(r.result!.content[1]!.data).toBe(PNG);
      expect(Buffer.from((r.result!.content[2]!.resource as { blob: string }).blob, 'base64').toString()).toMatch(/^note .*\[REDACTED\]$/);
      expect(r.result!.tools).toEqual([{ name: 'login', inputSchema: { type: 'object', properties: { password: { type: 'string' } } } }]);
    }
  });

  it('replays text under a `blob` key or in an image-shaped object that is not base64 scrubbed as text (regression: a structuredContent `blob` of plain text was replayed with the secret)', async () => {
    const scrubber = new Scrubber();
    const store = new BoundedEventStore(100, undefined, scrubber);
    const prime = await store.storeEvent('s', {} as JSONRPCMessage);
    // A tool's structuredContent is scrubbed by value() when sent (every string as text): a `blob`
    // or an image's `data` there may be any text, not base64.
    const structured = { file: { path: 'a.txt', blob: `the key is ${LATER}` }, preview: { type: 'image', data: `alt: ${LATER}` }, bare: { blob: LATER } };
    await store.storeEvent('s', { jsonrpc: '2.0', id: 9, result: { content: [{ type: 'text', text: 'ok' }], structuredContent: structured } } as JSONRPCMessage);
    scrubber.addSecrets([LATER]);
    const { sent } = await replay(store, prime);
    expect(sent).toHaveLength(1);
    expect(JSON.stringify(sent)).not.toContain(LATER);
    const out = (sent[0]![1] as never as { id: number; result: { structuredContent: typeof structured } }).result.structuredContent;
    expect(out.file.blob).toBe(`the key is ${REDACTED}`);
    expect(out.preview.data).toBe(`alt: ${REDACTED}`);
    expect(out.bare.blob).toBe(REDACTED);
  });

  it('after a second reload, replays an event stored between the two scrubbed with the secret the second added', async () => {
    const SECOND = 'second-8e31a7c0d5f2';
    const scrubber = new Scrubber();
    const store = new BoundedEventStore(100, undefined, scrubber);
    const prime = await store.storeEvent('s', {} as JSONRPCMessage);
    await store.storeEvent('s', progress('tok-1', `at ${LATER} and ${SECOND}`));
    scrubber.addSecrets([LATER]);
    await store.storeEvent('s', progress('tok-2', `then ${SECOND}`));
    expect(JSON.stringify((await replay(store, prime)).sent)).toContain(SECOND);
    scrubber.addSecrets([SECOND]);
    const { sent } = await replay(store, prime);
    expect(sent.map(([, m]) => (m as never as { params: { message: string } }).params.message)).toEqual([`at ${REDACTED} and ${REDACTED}`, `then ${REDACTED}`]);
  });

  it('replays as stored (the same message) what was stored with the secrets of now', async () => {
    const scrubber = new Scrubber();
    const store = new BoundedEventStore(100, undefined, scrubber);
    scrubber.addSecrets([LATER]);
    const prime = await store.storeEvent('s', {} as JSONRPCMessage);
    // Text scrubbing would change (a progress token the client chose that holds the value, left
    // as it is when sent): replayed as it was sent, not walked again.
    const message = progress(`tok-${LATER}`, 'clean');
    await store.storeEvent('s', message);
    const { sent } = await replay(store, prime);
    expect(sent[0]![1]).toBe(message);
  });
});
