/**
 * The legacy call lane (src/transports/http/legacy-call-lane.ts) reads the SDK transport's own
 * state by the names SDK 2.4.0 gives it, and stands aside for a transport of another shape. The
 * end-to-end test (test/e2e/legacy-http-lane.test.ts) compares the lane's bytes with the SDK's,
 * which an SDK that moved its state would still pass (both answers would come from the SDK);
 * this is where such an upgrade shows.
 */
import { describe, expect, it } from 'vitest';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';
import { laneFits } from '../../src/transports/http/legacy-call-lane.js';

describe('legacy call lane: the SDK transport it reads', () => {
  it('the installed SDK transport, made as the broker makes a session, has the shape the lane knows', () => {
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: () => 'session-1', keepAliveMs: 0 });
    expect(laneFits(transport)).toBe(true);
  });

  it('a transport of another shape is never served by the lane', () => {
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: () => 'session-2' });
    // As if an SDK release had renamed the stream maps.
    Object.defineProperty(transport, '_streamMapping', { value: undefined });
    expect(laneFits(transport)).toBe(false);
  });
});
