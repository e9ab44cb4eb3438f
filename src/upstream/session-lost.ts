/**
 * What a Streamable HTTP upstream's HTTP 404 for the session we sent means, and the error a call
 * that met it rejects with (`McpUpstream`, connection.ts). The spec (2025-11-25, "Session
 * Management"): a client that receives 404 in response to a request carrying an `Mcp-Session-Id`
 * MUST start a new session with a new `InitializeRequest`; the server refused the request for its
 * session, so it never processed it.
 */
import { ProtocolError } from '@modelcontextprotocol/client';
import { BrokerError } from '../shared/errors.js';
import { httpStatusOf } from '../shared/sdk-errors.js';
import type { UpstreamStatus } from './types.js';
import type { CancelSignal } from '../shared/cancel.js';

/**
 * Whether `err` is the SDK Streamable HTTP transport's rejection of a POST answered HTTP 404
 * (an `SdkHttpError` with `status` 404; a JSON-RPC error from the upstream is a `ProtocolError` instead).
 */
export function isSessionNotFound(err: unknown): boolean {
  return !ProtocolError.isInstance(err) && httpStatusOf(err) === 404;
}

/**
 * The error of a request the upstream refused with 404 for our session, once a new session was
 * tried: `BrokerError` `session_lost` when the lost session had answered a call (or was the
 * first of a dial), else `upstream_session_lost` (a session lost before it answered anything: the
 * upstream is failing). Both carry `data.httpStatus` 404; `status` is the upstream's after the
 * re-dial. The message names the upstream only.
 */
export function sessionLostError(upstream: string, answered: boolean, status: UpstreamStatus): BrokerError<{ httpStatus: number }> {
  const renewed = status.state === 'ready' ? 'a new session is open' : `opening a new session failed (${status.state}${status.errorCode ? `: ${status.errorCode}` : ''})`;
  const again = answered ? '' : ' again before answering any call';
  return new BrokerError(answered ? 'session_lost' : 'upstream_session_lost', `upstream "${upstream}" no longer knows our session${again} (HTTP 404); ${renewed}; the request was not processed`, {
    data: { httpStatus: 404 },
  });
}

/**
 * The error of a call that was in flight on a session another request found lost (HTTP 404)
 * and that failed as that session was closed: `BrokerError` `session_lost_in_flight`. Like a 404
 * of its own it is no fault of a live upstream, so the breaker leaves it be, and a read-only tool
 * tries again on the new session; a write is not retried (nothing proves it did not run).
 */
export function sessionLostInFlightError(upstream: string): BrokerError {
  return new BrokerError(
    'session_lost_in_flight',
    `upstream "${upstream}" lost our session (HTTP 404 on another request) while this call was in flight; a new session is open; it may or may not have run`,
  );
}

/** `promise`, or a rejection with the abort reason of `signal` once it aborts first. */
export function untilAborted<T>(promise: Promise<T>, signal: CancelSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
