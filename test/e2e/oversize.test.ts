import type { CallToolResult } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, startBroker, type StartedBroker } from './helpers.js';

/** broker.maxMessageBytes on the stdio sides (issue 6 §3): a larger message is a clear error, never a hang. */
describe('messages over broker.maxMessageBytes', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({
      servers: { big: nodeServer(fixture('big.mjs')) },
      extra: { broker: { maxMessageBytes: 1024 * 1024, timeoutMs: 120_000 } },
    });
  }, 30_000);
  afterAll(() => broker?.close());

  it('F06: a result over the limit fails its call at once with an error naming the limit; the connection serves on', async () => {
    const over = (await broker.client.callTool({ name: 'big__big', arguments: { mb: 2 } })) as CallToolResult;
    expect(over.isError).toBe(true);
    expect(over._meta?.['mcp-broker/outcome']).toBe('upstream_error');
    const text = (over.content[0] as { text: string }).text;
    expect(text).toContain('maxMessageBytes (1048576 bytes)');
    const under = (await broker.client.callTool({ name: 'big__big', arguments: { mb: 0.5 } })) as CallToolResult;
    expect(under.isError).toBeFalsy();
    expect((under.content[0] as { text: string }).text.endsWith('|end-of-result--')).toBe(true);
    const records = await broker.records();
    expect(records.map((r) => r.outcome)).toEqual(['upstream_error', 'ok']);
  }, 60_000);
});
