/**
 * Guards one downstream transport against malformed requests: every request whose `id` can be
 * read gets a JSON-RPC error instead of silence, and serving goes on. The SDK `Protocol` drops a
 * message that is not a well-formed request (params that are not an object, a non-integer id)
 * without an answer, and answers wrong-typed params of a known method with -32603; neither is
 * what the client needs.
 *
 * - `-32600` (invalid request): not a request shape: `jsonrpc` is not `"2.0"`, `method` is not a
 *   string, the id is not a string or an integer, a member other than `jsonrpc`, `id`, `method`
 *   and `params`, or a message with an id has neither `method` nor `result`/`error`. With the
 *   id when it is a string or number, else `null`.
 * - `-32602` (invalid params): `params` present and not an object; a `_meta` that is not an
 *   object, or whose `progressToken` is not a string or an integer, or whose
 *   `io.modelcontextprotocol/related-task` is not `{taskId: string}` (in any request, of either
 *   era: the SDK's JSON-RPC request schema holds these, and drops what fails it); or the params of a known
 *   client request (`ClientRequestSchema` of the SDK: `initialize`, `tools/call`, `resources/read`, …)
 *   fail its schema. The message names the method and the first bad field, never a value. A
 *   modern request (the 2026-07-28 `_meta` envelope claim, `era.ts`) has its params checked by
 *   the SDK's modern entry instead, against its own era, but for the methods whose params the
 *   two eras share (`resources/read`, `prompts/get`, `completion/complete`, the lists), which
 *   that entry answers -32603 with its schema's raw issues, and a `tools/call`'s `name` and
 *   `arguments` (the SDK answers those -32602 in-band, HTTP 200, with its schema's raw issues).
 *
 * Notifications are never answered (they have no id; the SDK drops a malformed one). A response
 * (the client's answer to a request the broker relayed) that is no well-formed one, with both
 * `result` and `error` or neither, reaches the SDK as an error response for its id, so the
 * request it answers fails at once (`answerMalformedResponses`, wire/message-shape.ts); other
 * responses pass unchanged.
 */
import { ClientRequestSchema } from '@modelcontextprotocol/core';
import { RELATED_TASK_META_KEY } from '@modelcontextprotocol/server';
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/server';
import { isProgressToken } from '../shared/progress-token.js';
import { answerMalformedResponses, asWellFormedResponse } from '../wire/message-shape.js';
import { hasModernClaim } from './era.js';

type RequestId = string | number;

/**
 * Requests of the 2026-07-28 (modern) era only. The broker serves the legacy era, so they are
 * unknown methods here and go on to the SDK (-32601), as before SDK v2 listed them: a
 * negotiating client's `server/discover` probe must meet -32601 to fall back to `initialize`.
 */
const MODERN_ONLY = new Set(['server/discover', 'subscriptions/listen']);

/**
 * The SDK's schema of each known client request of the legacy era, by method. (SDK v2 lists no
 * `tasks/*` requests; those, like any method the broker does not serve, go on to the SDK.)
 */
const KNOWN_REQUESTS = new Map<string, (typeof ClientRequestSchema.options)[number]>(
  ClientRequestSchema.options.filter((schema) => !MODERN_ONLY.has(schema.shape.method.value)).map((schema) => [schema.shape.method.value, schema]),
);

/** Requests whose params a 2026-07-28 request shares with 2025-11-25 (so the legacy schema judges both). */
const SAME_PARAMS_IN_BOTH_ERAS = new Set(['resources/read', 'prompts/get', 'completion/complete', 'tools/list', 'prompts/list', 'resources/list', 'resources/templates/list']);

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The JSON-RPC error answering `message` when it is a malformed request (see the module doc),
 * or `undefined` when it goes on to the SDK (a well-formed request, a notification, a response).
 */
export function malformedRequestError(message: unknown): JSONRPCMessage | undefined {
  if (!isObject(message)) return invalid(null, -32600, 'Invalid Request: not a JSON-RPC message object');
  const hasId = 'id' in message && message.id !== undefined;
  const id = message.id;
  const readable: RequestId | null = typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : null;
  if (!('method' in message)) {
    if ('result' in message || 'error' in message) return undefined; // a response: the SDK matches it
    return invalid(readable, -32600, 'Invalid Request: a message needs "method", or "result" or "error"');
  }
  if (!hasId) return undefined; // a notification: nobody to answer
  if (readable === null || (typeof id === 'number' && !Number.isSafeInteger(id))) {
    return invalid(readable, -32600, 'Invalid Request: "id" must be a string or an integer');
  }
  if (message.jsonrpc !== '2.0') return invalid(readable, -32600, 'Invalid Request: "jsonrpc" must be "2.0"');
  if (typeof message.method !== 'string') return invalid(readable, -32600, 'Invalid Request: "method" must be a string');
  for (const key in message) {
    if (key !== 'jsonrpc' && key !== 'id' && key !== 'method' && key !== 'params') return invalid(readable, -32600, 'Invalid Request: a request has no members but "jsonrpc", "id", "method" and "params"');
  }
  const params = message.params;
  if (params !== undefined && !isObject(params)) return invalid(readable, -32602, 'Invalid params: "params" must be an object');
  const badMeta = params === undefined ? undefined : reservedMetaError(params._meta);
  // The method is named only when it is one the broker knows: never a caller's text back.
  if (badMeta) return invalid(readable, -32602, `Invalid params${KNOWN_REQUESTS.has(message.method) || MODERN_ONLY.has(message.method) ? ` for ${message.method}` : ''}: ${badMeta}`);
  // A modern request's params are the SDK's to check, against its era (a removed method is -32601
  // there), but for the methods whose params are the same in both eras: the SDK's modern entry
  // answers their wrong types -32603 with its schema's issues as the message.
  if (hasModernClaim(message) && !SAME_PARAMS_IN_BOTH_ERAS.has(message.method)) {
    const field = message.method === 'tools/call' ? badModernToolsCallField(params) : undefined;
    return field === undefined ? undefined : invalid(readable, -32602, `Invalid params for tools/call: ${field} is missing or of the wrong type`);
  }
  // Every tool call passes here: the common shape is checked by hand, zod runs only for the rest.
  if (message.method === 'tools/call' && isPlainToolsCall(params)) return undefined;
  const schema = KNOWN_REQUESTS.get(message.method);
  if (!schema) return undefined; // an unknown method: the SDK answers -32601
  const parsed = schema.safeParse({ method: message.method, ...(params !== undefined && { params }) });
  if (parsed.success) return undefined;
  const issue = parsed.error.issues[0];
  const field = ['params', ...(issue?.path ?? []).slice(1)].map(String).join('.');
  return invalid(readable, -32602, `Invalid params for ${message.method}: ${field} is ${issue?.code === 'invalid_type' ? 'missing or of the wrong type' : 'invalid'}`);
}

/**
 * The answer to an HTTP body holding a malformed request, for the transports that check a body
 * before the SDK sees it (Streamable HTTP `POST /mcp`, SSE `POST /messages`), which answer it
 * with status 400; `undefined` when nothing in it is malformed (or there is no body). A batch
 * holding one is refused whole: each malformed request's error, and -32600 for each other
 * request in it (not processed).
 */
export function malformedBodyErrors(body: unknown): JSONRPCMessage | JSONRPCMessage[] | undefined {
  if (body === undefined) return undefined;
  if (!Array.isArray(body)) return malformedRequestError(body);
  const errors = body.map(malformedRequestError);
  if (errors.every((e) => e === undefined)) return undefined;
  return body.flatMap((m, i) => {
    const error = errors[i];
    if (error) return [error];
    const { id, method } = m as { id?: unknown; method?: unknown };
    if (method === undefined || (typeof id !== 'string' && typeof id !== 'number')) return [];
    return [invalid(id, -32600, 'Invalid Request: not processed, another message in the batch is malformed')];
  });
}

/**
 * What is wrong with a request's `_meta` as the SDK's request schema holds every request's
 * `_meta` (its `RequestMetaSchema`, part of the JSON-RPC request schema itself, so the SDK drops
 * a request that fails it without an answer, whatever its era): an object whose `progressToken`
 * is a string or an integer and whose `io.modelcontextprotocol/related-task` is `{taskId: string}`.
 * Undefined when it is absent or fine.
 */
function reservedMetaError(meta: unknown): string | undefined {
  if (meta === undefined) return undefined;
  if (!isObject(meta)) return 'params._meta must be an object';
  if (!isProgressToken(meta.progressToken)) return 'params._meta.progressToken must be a string or an integer';
  const task = meta[RELATED_TASK_META_KEY];
  if (task !== undefined && !(isObject(task) && typeof task.taskId === 'string')) return `params._meta.${RELATED_TASK_META_KEY} must be an object with a string taskId`;
  return undefined;
}

/**
 * The first of a 2026-07-28 `tools/call`'s `name` (a string) and `arguments` (absent or an
 * object) that does not fit, as the SDK's modern schema of it has them; undefined when both do.
 * Its other members (`inputResponses`, `requestState`, a legacy `task` hint it ignores) are left
 * to the SDK and the broker's relay stage.
 */
function badModernToolsCallField(params: Record<string, unknown> | undefined): string | undefined {
  if (typeof params?.name !== 'string') return 'params.name';
  if (params.arguments !== undefined && !isObject(params.arguments)) return 'params.arguments';
  return undefined;
}

/** A `tools/call` params the SDK schema accepts, in its common shape (no task); anything else goes to zod. */
function isPlainToolsCall(params: Record<string, unknown> | undefined): boolean {
  if (!params || typeof params.name !== 'string' || params.task !== undefined) return false;
  if (params.arguments !== undefined && !isObject(params.arguments)) return false;
  const meta = params._meta;
  if (meta === undefined) return true;
  // A related task, or anything else odd in `_meta`, is zod's to judge.
  return isObject(meta) && !(RELATED_TASK_META_KEY in meta) && isProgressToken(meta.progressToken);
}

function invalid(id: RequestId | null, code: -32600 | -32602, message: string): JSONRPCMessage {
  return { jsonrpc: '2.0', id, error: { code, message } } as unknown as JSONRPCMessage;
}

/**
 * An HTTP body (one message or a batch) as the SDK transport is to take it: each response in it
 * that is no well-formed one made an error response for its id (see the module doc), which the
 * transport's own parse would refuse whole (400), leaving the request it answers waiting. Use
 * after {@link malformedBodyErrors} found nothing to refuse.
 */
export function withWellFormedResponses(body: unknown): unknown {
  return Array.isArray(body) ? body.map((m) => asWellFormedResponse(m, 'the client')) : asWellFormedResponse(body, 'the client');
}

/**
 * Wraps `transport.onmessage` so a malformed request is answered at once ({@link malformedRequestError})
 * and never reaches the SDK or the `tools/call` fast lane, and a malformed response fails the
 * request it answers (see the module doc). Install it outermost, after every other
 * wrapper; `send` is the transport's own (unwrapped) send, so the answer frees no id that a
 * well-formed request of the same id holds in flight (`request-ids.ts`).
 */
export function guardRequestShapes(transport: Transport, send: Transport['send'] = transport.send.bind(transport)): void {
  answerMalformedResponses(transport, 'the client');
  const receive = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const error = malformedRequestError(message);
    if (!error) return receive?.(message, extra);
    void send(error).catch(() => undefined);
  };
}
