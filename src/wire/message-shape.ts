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
 * A response's `result` and `error` as they are to be read: a `null` one beside an object of the
 * other is left out (peers that fill both members send `"error": null` with their result, and
 * were always taken at their result). `message` itself when it has no such `null`.
 */
export function responseMembers<M extends { result?: unknown; error?: unknown }>(message: M): M | { result?: unknown; error?: unknown } {
  if (message.error === null && isObject(message.result)) return { result: message.result };
  if (message.result === null && isObject(message.error)) return { error: message.error };
  return message;
}

/**
 * Why `message`, a response (an id and no `method`), is no well-formed one, as the end of a
 * sentence: `"both a result and an error"` when it carries both members, `"neither a result nor
 * an error"` when it carries no `result` object and no `error` object (`"result": null`, a
 * string, an array). Undefined when it carries exactly one of them, an object, the other absent
 * or `null` ({@link responseMembers}).
 */
export function malformedResponse(message: { result?: unknown; error?: unknown }): string | undefined {
  const { result, error } = responseMembers(message);
  if (result !== undefined && error !== undefined) return 'both a result and an error';
  if (!isObject(result ?? error)) return 'neither a result nor an error';
  return undefined;
}

/**
 * Makes a response on `transport` that is no well-formed one ({@link malformedResponse}) an error
 * response (-32603, `<peer> answered with …`) for the SDK's request of its id: the SDK would not
 * take it for a response at all, and its request would wait out its whole deadline (an
 * upstream's `prompts/get` or `resources/read`; a client's answer to a relayed `roots/list`,
 * whose upstream would wait on). Responses whose id is no string or number pass on.
 * @param peer who answers on `transport`, for the message: `"the upstream"` or `"the client"`.
 */
export function answerMalformedResponses(transport: Transport, peer: 'the upstream' | 'the client'): void {
  const sdkMessage = transport.onmessage;
  transport.onmessage = (message, extra) => sdkMessage?.(asWellFormedResponse(message, peer) as JSONRPCMessage, extra);
}

/**
 * `message` as the SDK is to take it: a response that is no well-formed one
 * ({@link malformedResponse}) as an error response for its id (-32603, `<peer> answered with …`),
 * one with a `null` member beside the other without it ({@link responseMembers}), anything else (requests, notifications, responses whose id is no string or number) as it is.
 * For transports that parse a message before the SDK's `onmessage` sees it (an HTTP body):
 * {@link answerMalformedResponses} does this for the rest.
 */
export function asWellFormedResponse(message: unknown, peer: 'the upstream' | 'the client'): unknown {
  if (!isObject(message)) return message;
  const m = message as { id?: unknown; method?: unknown; result?: unknown; error?: unknown };
  if (m.method !== undefined || (typeof m.id !== 'string' && typeof m.id !== 'number')) return message;
  const malformed = malformedResponse(m);
  if (!malformed) {
    const members = responseMembers(m);
    return members === m ? message : { jsonrpc: '2.0', id: m.id, ...members };
  }
  return { jsonrpc: '2.0', id: m.id, error: { code: ProtocolErrorCode.InternalError, message: `${peer} answered with ${malformed}` } };
}

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
