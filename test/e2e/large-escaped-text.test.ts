/**
 * A large text block is told clean from its bytes and passed on as them (issue 19,
 * wire/raw-json.ts + Scrubber.leavesJsonString), and a secret behind a JSON escape an SDK server
 * never writes (`\u0041` for `A`, `\/` for `/`) is still redacted. Upstream:
 * test/fixtures/escaped-large.mjs, which writes its own JSON lines.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, readNdjson, startBroker, type StartedBroker } from './helpers.js';

const PROSE = 'The quick brown fox jumps over the lazy dog; "quotes" and a path /usr/share/doc.\n';

describe('a large text with escapes through the broker', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({ servers: { big: nodeServer(fixture('escaped-large.mjs')) } });
  }, 60_000);
  afterAll(async () => broker?.close());

  const call = async (which: string) => {
    const result = await broker.client.callTool({ name: 'big__text', arguments: { which } });
    return (result.content as Array<{ type: string; text: string }>)[0]!.text;
  };

  it('a clean one arrives whole, as the upstream wrote it', async () => {
    expect(await call('clean')).toBe(PROSE.repeat(1200) + ' all clean');
  });

  it('a key written with \\u0041 and a URL password behind \\/ are redacted, the rest kept', async () => {
    const key = await call('escaped-key');
    expect(key).not.toContain('AKIAABCDEFGHIJKLMNOP');
    expect(key.endsWith(' key [REDACTED] here')).toBe(true);
    const url = await call('escaped-url');
    expect(url).not.toContain('hunter2');
    expect(url.startsWith(PROSE.repeat(1200))).toBe(true);
    const records = readNdjson(broker.recordsPath).filter((r) => r.name === 'big__text');
    expect(records.map((r) => r.outcome)).toEqual(['ok', 'ok', 'ok']);
  });
});
