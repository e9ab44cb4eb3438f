/**
 * What a failed attempt was, read once off what the dispatcher threw (seed
 * 002_7bce204a86c1c7ba.txt steps 5-7): its outcome, its one-line reason, whether the request was
 * sent to the upstream, and whether a read-only tool may try it again.
 *
 * Sent or not decides three things: `attempts` counts only attempts that were sent, budget is
 * spent only by a call with one, and only the upstream's own faults (a sent request that failed
 * upstream, a transport fault, 429/5xx, a timeout) count against the tool's breaker. A request
 * refused here before anything went out (arguments the broker or the router found wrong, a
 * guard, a denial, an upstream that is not connected, a message that cannot be serialised) is
 * never the upstream's fault.
 */
import { ProtocolError, SdkError } from '@modelcontextprotocol/client';
import { BrokerError, joinLines, messageOf } from '../shared/errors.js';
import { httpStatusOf, isTransportFault } from '../shared/sdk-errors.js';
import type { Outcome } from './outcomes.js';
import type { WireError } from './types.js';

/** JSON-RPC code of the 2025-11-25 URL elicitation required error (`client/elicitation`). */
export const URL_ELICITATION_REQUIRED = -32042;

/** A failed attempt, classified. */
export interface AttemptFailure {
  readonly outcome: Exclude<Outcome, 'ok' | 'tool_error'>;
  /** One line that names a JSON-RPC code at most once; cut at {@link MAX_REASON_CHARS} once scrubbed ({@link cutReason}). */
  readonly reason: string;
  /**
   * Whether the request went out to the upstream (or may have: a transport fault mid-request).
   * `false` only when it provably did not: then the attempt is not counted, spends no budget and
   * leaves the breaker as it was.
   */
  readonly sent: boolean;
  /** Whether a read-only tool may try again: a transport fault, HTTP 429 or 5xx. */
  readonly retryable: boolean;
  /** The upstream's `Retry-After`, in ms. */
  readonly retryAfterMs?: number;
  /**
   * The upstream no longer knew our session (HTTP 404, `session_lost`): the request was not
   * processed and a new session is open, so the breaker leaves it be (issue 17 §6).
   */
  readonly sessionLost?: boolean;
  /** The upstream's error, passed to the caller as it came: only for -32042 (URL elicitation required). */
  readonly wireError?: WireError;
}

/** Longest reason kept from an upstream's JSON-RPC error message (and a handler's own failure text), in characters. */
export const MAX_REASON_CHARS = 300;

/** BrokerError codes that are guard refusals (`guard_error`), not upstream faults. */
const GUARD_CODES = new Set(['rest_host_escape', 'estate_scope_escape', 'guard_error']);

/** BrokerError codes that the router or an upstream adapter use to refuse without answering a result. */
const REFUSAL_CODES: Readonly<Record<string, AttemptFailure['outcome']>> = {
  invalid_arguments: 'invalid_arguments',
  // A message that could not be serialised (wire/direct-calls.ts): the arguments, never the upstream.
  unserialisable: 'invalid_arguments',
  denied: 'denied',
  approval_required: 'approval_required',
  cancelled: 'cancelled',
};

/**
 * BrokerError codes raised before anything was sent: refusals, guards, an upstream that is not
 * connected. A `data.sent` boolean on the error wins over this (a rest redirect refused after
 * its request went out).
 */
const UNSENT_CODES = new Set([...Object.keys(REFUSAL_CODES), ...GUARD_CODES, 'upstream_unavailable', 'upstream_closed', 'unsupported']);

/** Classifies what one attempt threw. Never throws. */
export function classifyFailure(err: unknown): AttemptFailure {
  if (err instanceof BrokerError) {
    const data = err.data as { httpStatus?: number; retryAfterMs?: number; sent?: unknown } | undefined;
    const sent = typeof data?.sent === 'boolean' ? data.sent : !UNSENT_CODES.has(err.code);
    if (GUARD_CODES.has(err.code)) {
      return { outcome: 'guard_error', reason: sayOnce(err.code === 'guard_error' ? messageOf(err) : `${err.code}: ${messageOf(err)}`), sent, retryable: false };
    }
    const refusal = REFUSAL_CODES[err.code];
    if (refusal) return { outcome: refusal, reason: sayOnce(messageOf(err)), sent, retryable: false };
    // A lost session (upstream/connection.ts): retried at once on the new one by a read-only tool.
    // Lost again before answering anything (`upstream_session_lost`): an ordinary, counted fault.
    if (err.code === 'session_lost') return { outcome: 'upstream_error', reason: sayOnce(messageOf(err)), sent, retryable: true, retryAfterMs: 0, sessionLost: true };
    // Closed under a call in flight by that renewal: a read-only tool tries again at once; a write is not retried.
    if (err.code === 'session_lost_in_flight') return { outcome: 'upstream_error', reason: sayOnce(messageOf(err)), sent, retryable: true, retryAfterMs: 0, sessionLost: true };
    if (err.code === 'upstream_session_lost') return { outcome: 'upstream_error', reason: sayOnce(messageOf(err)), sent, retryable: true };
    return {
      outcome: 'upstream_error',
      reason: sayOnce(messageOf(err)),
      sent,
      retryable: err.code === 'upstream_unavailable' || err.code === 'transport_error' || isRetryableStatus(data?.httpStatus),
      ...(data?.retryAfterMs !== undefined ? { retryAfterMs: data.retryAfterMs } : {}),
    };
  }
  const httpStatus = httpStatusOf(err);
  if (ProtocolError.isInstance(err) || (SdkError.isInstance(err) && httpStatus === undefined)) {
    // From the upstream (a JSON-RPC error, `ProtocolError`), or the SDK's own failure mid-request (`SdkError`).
    if (ProtocolError.isInstance(err) && err.code === -32602) return { outcome: 'invalid_arguments', reason: oneLine(err.message), sent: true, retryable: false };
    if (ProtocolError.isInstance(err) && err.code === URL_ELICITATION_REQUIRED) {
      const wireError: WireError = { code: err.code, message: err.message, ...(err.data !== undefined && { data: err.data }) };
      return { outcome: 'upstream_error', reason: `URL elicitation required (-32042): ${oneLine(err.message)}`, sent: true, retryable: false, wireError };
    }
    // A closed connection or a timed-out request (the SDK's, or -32000/-32001 from the peer): transport faults.
    return { outcome: 'upstream_error', reason: oneLine(err.message), sent: true, retryable: isTransportFault(err) };
  }
  // The SDK's HTTP transports report the HTTP status of a refusal (SdkHttpError, SseError).
  const code = (err as { code?: unknown } | null | undefined)?.code;
  return {
    outcome: 'upstream_error',
    reason: sayOnce(httpStatus ? `HTTP ${httpStatus} from the upstream: ${messageOf(err)}` : messageOf(err)),
    sent: true,
    retryable: httpStatus !== undefined || typeof code === 'number' ? isRetryableStatus(httpStatus) : true,
  };
}

function isRetryableStatus(status: number | undefined): boolean {
  return status === 429 || (status !== undefined && status >= 500 && status < 600);
}

/**
 * `MCP error <code>: ` repeated at the start of a message, as SDK v1 builds it each time an
 * error crosses a hop (the upstream's own `McpError`, then a v1 client's around its wire
 * message). The v2 SDK adds no prefix (`ProtocolError`'s message is the wire message), but an
 * upstream on SDK v1 (the npm reference servers) still sends it, once or more, in its message.
 */
const REPEATED_PREFIX = /^(MCP error (-?\d+): )(?:MCP error \2: )+/;

/** A one-line message with a repeated leading `MCP error <code>: ` said once. */
export function sayOnce(line: string): string {
  return line.replace(REPEATED_PREFIX, '$1');
}

/**
 * Text from an upstream as a reason: one line, a repeated `MCP error <code>: ` prefix said
 * once. Not cut: a secret the cut ran through would lose what the scrubber knows it by, so the
 * reason is cut ({@link cutReason}) only once it has been scrubbed (the scrub stage, a
 * primitive's record).
 */
export function oneLine(text: string): string {
  return sayOnce(joinLines(text).trim());
}

/** A scrubbed reason cut at {@link MAX_REASON_CHARS} (`...` at the end when cut). */
export function cutReason(text: string): string {
  return text.length > MAX_REASON_CHARS ? `${text.slice(0, MAX_REASON_CHARS - 3)}...` : text;
}
