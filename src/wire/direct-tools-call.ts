/**
 * `tools/call` from a downstream client without the SDK `Protocol` on the hot path (issue 6):
 * every tool call passes here, and the SDK's per-message schema checks, handler wrapping and
 * promise chain cost more than the broker path itself. A well-formed `tools/call` request is
 * taken off the transport and handed to the session's handler; everything else, and any
 * `tools/call` the light check does not accept (odd params, tasks), goes to the SDK `Server`
 * unchanged, which answers it as before.
 *
 * Matches the SDK's request handling: the handler gets `signal`, `requestId`, `_meta`,
 * `sendNotification` and `sendRequest` (both tied to the request, so they ride its stream over
 * HTTP), and `abort`, so the broker aborts this one signal at the deadline instead of making
 * another; `notifications/cancelled` aborts it and no answer is sent; a thrown error is answered
 * with its numeric `code` (else -32603), `message` and `data`; closing the transport aborts
 * every call in flight.
 */
import { ProtocolErrorCode, RELATED_TASK_META_KEY, SdkError, SdkErrorCode } from '@modelcontextprotocol/server';
import type { JSONRPCMessage, Server, Transport } from '@modelcontextprotocol/server';
import { InflightTable } from '../shared/inflight.js';
import { Cancellation, type CancelSignal } from '../shared/cancel.js';
import { isProgressToken } from '../shared/progress-token.js';

/** The `tools/call` params the direct lane accepts (what the session's zod schema accepts, minus tasks). */
export interface DirectCallParams {
  name: string;
  arguments?: Record<string, unknown>;
  _meta?: { progressToken?: string | number; [key: string]: unknown };
  [key: string]: unknown;
}

/** What a tools/call handler uses of a request's context (the SDK's `ctx.mcpReq`, flat: `signal`, `id`, `_meta`, `notify`, `send`). */
export interface DirectCallExtra {
  /** Aborted on `notifications/cancelled` and when the transport closes (a {@link Cancellation} on the lanes; the SDK's `AbortSignal` otherwise). */
  signal: CancelSignal;
  /** Aborts `signal` (the broker's deadline and shutdown use it); the answer is still sent. */
  abort: (reason: unknown) => void;
  requestId: string | number;
  _meta?: DirectCallParams['_meta'];
  sendNotification: Server['notification'];
  sendRequest: Server['request'];
}

export type DirectCallHandler = (params: DirectCallParams, extra: DirectCallExtra) => Promise<unknown>;

/**
 * Wraps `transport.onmessage` (as the SDK `Server` set it in `connect`) so well-formed
 * `tools/call` requests go to `handler` directly. Call right after `server.connect(transport)`.
 */
export function routeToolsCallDirectly(server: Server, transport: Transport, handler: DirectCallHandler): void {
  /** Calls in flight: their controller, and whether the client cancelled (then nothing is answered). */
  const inflight: LaneCalls = new InflightTable();
  const sdkMessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const m = message as { id?: unknown; method?: unknown; params?: unknown };
    // An id the client cancelled is free again at once (its answer is never sent), whether or not its call has unwound yet.
    if (m.method === 'tools/call' && (typeof m.id === 'string' || typeof m.id === 'number') && isPlainCall(m.params) && inflight.get(m.id)?.cancelled !== false) {
      return run(m.id, m.params);
    }
    cancelNamedCall(m, inflight);
    sdkMessage?.(message, extra);
  };
  abortOnClose(transport, inflight);
  const sendFailed = sendFailureReporter(server);

  function run(id: string | number, params: DirectCallParams): void {
    const controller = new Cancellation();
    const state = { controller, cancelled: false };
    inflight.set(id, state);
    const extra: DirectCallExtra = {
      signal: controller,
      abort: (reason) => controller.abort(reason),
      requestId: id,
      _meta: params._meta,
      // As the SDK's: nothing more is sent for a call the client cancelled.
      sendNotification: async (notification, options) => {
        if (!controller.aborted) await server.notification(notification, { ...options, relatedRequestId: id });
      },
      sendRequest: (async (request: never, schema: never, options?: object) => {
        if (controller.aborted) throw new SdkError(SdkErrorCode.ConnectionClosed, 'Request was cancelled');
        return server.request(request, schema, { ...options, relatedRequestId: id });
      }) as Server['request'],
    };
    settleLaneCall(
      handler(params, extra),
      (ok, value) => {
        if (state.cancelled) return;
        if (ok) return transport.send({ jsonrpc: '2.0', id, result: value } as JSONRPCMessage);
        const error = value as { code?: unknown; message?: string; data?: unknown } | undefined;
        const code = typeof error?.code === 'number' && Number.isSafeInteger(error.code) ? error.code : ProtocolErrorCode.InternalError;
        const body = { code, message: error?.message ?? 'Internal error', ...(error?.data !== undefined && { data: error.data }) };
        return transport.send({ jsonrpc: '2.0', id, error: body } as JSONRPCMessage);
      },
      () => {
        if (inflight.get(id) === state) inflight.delete(id);
      },
      sendFailed,
    );
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The light check: params the session's schema would accept, with no task augmentation. */
function isPlainCall(params: unknown): params is DirectCallParams {
  if (!isObject(params) || typeof params.name !== 'string' || params.task !== undefined) return false;
  if (params.arguments !== undefined && !isObject(params.arguments)) return false;
  const meta = params._meta;
  if (meta === undefined) return true;
  return isObject(meta) && !(RELATED_TASK_META_KEY in meta) && isProgressToken(meta.progressToken);
}

/**
 * A direct lane's calls in flight, by request id: aborting one marks it cancelled (no answer is
 * sent). An {@link InflightTable}: it keeps nothing of a finished call.
 */
export type LaneCalls = InflightTable<string | number, { controller: Cancellation; cancelled: boolean }>;

/**
 * Answers a lane's call once `outcome` (its handler's promise) settles: `answer` gets whether it
 * was fulfilled and its value or reason, and sends the answer (the transport's `send` promise) or
 * does nothing (a cancelled call) or hands the request on; then `release` frees the call's id. A
 * send that fails, or an `answer` that throws, goes to `onSendError` (the id is freed first,
 * whatever `onSendError` does). Two promises a call at most (issue 19: a
 * `.then().catch().finally()` chain made five).
 */
export function settleLaneCall(
  outcome: Promise<unknown>,
  answer: (ok: boolean, value: unknown) => Promise<void> | void,
  release: () => void,
  onSendError: (err: unknown) => void,
): void {
  const settle = (ok: boolean, value: unknown): void => {
    let sent: Promise<void> | void = undefined;
    try {
      sent = answer(ok, value);
    } catch (err) {
      sent = Promise.reject(err);
    } finally {
      release();
    }
    if (sent) sent.catch(onSendError);
  };
  outcome.then(
    (value) => settle(true, value),
    (reason: unknown) => settle(false, reason),
  );
}

/** What a lane hands {@link settleLaneCall} as `onSendError`: the failure goes to `server.onerror`, as the SDK's own does. */
export function sendFailureReporter(server: Server): (err: unknown) => void {
  return (err) => server.onerror?.(new Error(`Failed to send response: ${String(err)}`));
}

/** `notifications/cancelled` naming a call of `inflight`: aborts it with the client's reason, no answer sent. */
export function cancelNamedCall(m: { method?: unknown; params?: unknown }, inflight: LaneCalls): void {
  if (m.method !== 'notifications/cancelled') return;
  const id = (m.params as { requestId?: unknown } | undefined)?.requestId;
  const call = typeof id === 'string' || typeof id === 'number' ? inflight.get(id) : undefined;
  if (call) {
    call.cancelled = true;
    call.controller.abort((m.params as { reason?: unknown }).reason);
  }
}

/** Closing `transport` aborts every call of `inflight` (none is answered), then runs the SDK's own `onclose`. */
export function abortOnClose(transport: Transport, inflight: LaneCalls): void {
  const sdkClose = transport.onclose;
  transport.onclose = () => {
    for (const call of inflight.values()) {
      call.cancelled = true;
      call.controller.abort();
    }
    inflight.clear();
    sdkClose?.();
  };
}
