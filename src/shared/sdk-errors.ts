/**
 * The SDK's local errors, read in one place. The v2 SDK splits what v1 threw as `McpError`:
 * a JSON-RPC error from the peer is a `ProtocolError` (numeric `code`); a failure of the SDK
 * itself (timeout, closed connection, HTTP refusal) is an `SdkError` with a string `code`
 * (`SdkErrorCode`), and a Streamable HTTP refusal an `SdkHttpError` with its status in
 * `status`. The legacy SSE client transport still throws `SseError` with the HTTP status as
 * its numeric `code`. The classes brand-match across the client and server packages.
 */
import { SdkError, SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';

/** The HTTP status of an HTTP upstream's refusal (Streamable HTTP or SSE); undefined for anything else. */
export function httpStatusOf(err: unknown): number | undefined {
  if (SdkHttpError.isInstance(err)) return err.status;
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'number' && code >= 100 && code < 600 ? code : undefined;
}

/** Whether the SDK's request timed out (`SdkErrorCode.RequestTimeout`), or a peer answered -32001. */
export function isRequestTimeout(err: unknown): boolean {
  return SdkError.isInstance(err) ? err.code === SdkErrorCode.RequestTimeout : (err as { code?: unknown } | undefined)?.code === -32001;
}

/**
 * The JSON-RPC code SDK v1 gave the SDK's own failure of a request (its `McpError`: -32001 request
 * timeout, -32000 connection closed), so a downstream client is told of it what it was told
 * before; undefined for any other error.
 */
export function legacyCodeOf(err: unknown): number | undefined {
  if (!SdkError.isInstance(err)) return undefined;
  if (err.code === SdkErrorCode.RequestTimeout) return -32001;
  if (err.code === SdkErrorCode.ConnectionClosed) return -32000;
  return undefined;
}

/** Whether the request failed on the way (timed out or the connection closed), not by the peer's answer. */
export function isTransportFault(err: unknown): boolean {
  if (SdkError.isInstance(err)) return err.code === SdkErrorCode.RequestTimeout || err.code === SdkErrorCode.ConnectionClosed;
  const code = (err as { code?: unknown } | undefined)?.code;
  return code === -32000 || code === -32001;
}
