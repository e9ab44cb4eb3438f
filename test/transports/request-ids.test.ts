import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { guardRequestIds } from '../../src/transports/request-ids.js';

/** A transport that keeps what reached the server (`received`) and what the guard answered (`sent`). */
function guarded() {
  const received: JSONRPCMessage[] = [];
  const sent: JSONRPCMessage[] = [];
  const transport = {
    start: async () => undefined,
    close: async () => undefined,
    send: async (message: JSONRPCMessage) => void sent.push(message),
    onmessage: (message: JSONRPCMessage) => void received.push(message),
  } as unknown as Transport;
  guardRequestIds(transport);
  const receive = (message: object) => transport.onmessage!(message as JSONRPCMessage);
  return { received, sent, receive, transport };
}

const call = (id: unknown) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 't' } });
const refusals = (sent: JSONRPCMessage[]) => sent.filter((m) => 'error' in m).map((m) => (m as { id: unknown }).id);

describe('guardRequestIds (F04)', () => {
  it('refuses an id already in flight; 1 and "1" are two ids; the answer frees its id', async () => {
    const { received, sent, receive, transport } = guarded();
    receive(call(1));
    receive(call('1'));
    receive(call(1));
    expect(received).toHaveLength(2);
    expect(refusals(sent)).toEqual([1]);
    await transport.send({ jsonrpc: '2.0', id: 1, result: {} } as JSONRPCMessage);
    receive(call(1));
    expect(received).toHaveLength(3);
  });

  it('a cancellation naming an id of another type never frees a string id spelled like its key', () => {
    const { received, sent, receive } = guarded();
    receive(call('boolean:true'));
    receive({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: true } });
    receive(call('boolean:true'));
    expect(received.filter((m) => 'id' in m)).toHaveLength(1);
    expect(refusals(sent)).toEqual(['boolean:true']);
    // …and a cancellation of the string id itself frees it.
    receive({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'boolean:true' } });
    receive(call('boolean:true'));
    expect(received.filter((m) => 'id' in m)).toHaveLength(2);
  });
});
