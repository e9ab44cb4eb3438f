/**
 * Messages a peer sends that the SDK `Protocol` drops without a word: its JSON-RPC schemas are
 * strict, and a message matching none of them is reported to `onerror` as an unknown message
 * type, so whoever waits on it waits for good. Each wrapper here turns such a message into an
 * answer instead. Attach after the SDK has connected to the transport.
 */
import { ProtocolErrorCode } from '@modelcontextprotocol/client';
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/client';

const isObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Answers an upstream's request whose `params` is present and no object (a number, a string, an
 * array: `roots/list` with `"params": 5`) with -32602 (invalid params) on `transport`, at once:
 * the SDK `Client` would drop it, and the upstream would wait for an answer that never comes.
 * Requests whose id is no string or integer, and notifications, have nobody to answer and pass on.
 */
export function answerMalformedRequests(transport: Transport): void {
  const sdkMessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const m = message as { id?: unknown; method?: unknown; params?: unknown };
    const id = m.id;
    if (typeof m.method === 'string' && (typeof id === 'string' || Number.isSafeInteger(id)) && m.params !== undefined && !isObject(m.params)) {
      const error = { code: ProtocolErrorCode.InvalidParams, message: 'Invalid params: "params" must be an object' };
      return void transport.send({ jsonrpc: '2.0', id, error } as JSONRPCMessage).catch(() => undefined);
    }
    sdkMessage?.(message, extra);
  };
}
