/** DirectCalls over a fake transport: a request its transport cannot serialise (issue 17 §5). */
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { classifyFailure } from '../../src/broker/failure.js';
import { BrokerError } from '../../src/shared/errors.js';
import { DirectCalls } from '../../src/wire/direct-calls.js';

/** A transport whose `send` serialises synchronously, as the stdio framing does, and keeps what it wrote. */
function serialisingTransport(): Transport & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    start: async () => undefined,
    close: async () => undefined,
    send(message: JSONRPCMessage) {
      lines.push(JSON.stringify(message));
      return Promise.resolve();
    },
  };
}

describe('DirectCalls', () => {
  it('a request whose send throws while serialising rejects as unserialisable and unsent, leaves nothing pending, and sends no cancel', async () => {
    const transport = serialisingTransport();
    const direct = new DirectCalls(transport);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const err = await direct.request('tools/call', { name: 'x', arguments: cyclic }, { timeoutMs: 20 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BrokerError);
    expect(err).toMatchObject({ code: 'unserialisable', data: { sent: false } });
    expect((err as Error).message).toBe('the tools/call request cannot be serialised as JSON; nothing was sent');
    expect(classifyFailure(err)).toMatchObject({ outcome: 'invalid_arguments', sent: false });
    expect(direct.size).toBe(0);
    await new Promise((r) => setTimeout(r, 40)); // past the request's timeout: no cancel for a request never sent
    expect(transport.lines).toEqual([]);
  });
});
