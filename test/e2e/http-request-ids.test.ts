/**
 * F04 (a): two downstream clients send requests with the same JSON-RPC ids (every SDK client
 * counts from 0) to one shared upstream at the same time; each gets its own answer, because the
 * broker numbers upstream requests itself.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer } from './helpers.js';
import { connectHttp, startHttpBroker, type HttpBroker } from '../transports/harness.js';

describe('F04: request ids across sessions', () => {
  let broker: HttpBroker;
  beforeAll(async () => {
    broker = await startHttpBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) } });
  });
  afterAll(async () => broker?.close());

  it('F04: two sessions sending the same ids to one upstream each get their own answers', async () => {
    const a = await connectHttp(broker.url, 'streamable');
    const b = await connectHttp(broker.url, 'streamable');
    try {
      for (let round = 0; round < 5; round++) {
        // Both clients are at the same request id on each round; the upstream answers B first.
        const [ra, rb] = await Promise.all([
          a.client.callTool({ name: 'echo__echo', arguments: { text: `A${round}`, delayMs: 60 } }),
          b.client.callTool({ name: 'echo__echo', arguments: { text: `B${round}` } }),
        ]);
        expect(ra.content).toEqual([{ type: 'text', text: `A${round}` }]);
        expect(rb.content).toEqual([{ type: 'text', text: `B${round}` }]);
      }
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
