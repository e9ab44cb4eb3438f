/**
 * The invoke stage: one attempt at the call through the router (`dispatch`), with the call's
 * signal (deadline and downstream cancel). Reads the outcome off the answer:
 * a result → `ok`, or `tool_error` when the handler reported its own failure (seed 000);
 * a throw → `invalid_arguments` (-32602 from the upstream), `guard_error` (a scope escape),
 * or `upstream_error` (transport fault, protocol error, 429/5xx), marked retryable where a
 * read-only tool may try again. An upstream that no longer knew the session (HTTP 404,
 * `session_lost`) is `upstream_error` marked `sessionLost` and retryable at once: the request was
 * not processed and a new session is open. The inner-most stage: it calls no `next()`.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { BrokerError, messageOf } from '../shared/errors.js';
import { handlerFailure } from './handler-failure.js';
import type { Stage } from './runner.js';
import { refuse, type BrokerCall } from './types.js';

/** Runs one attempt of a call; owned by the router. */
export interface Dispatcher {
  dispatch(call: BrokerCall): Promise<CallToolResult>;
}

/** BrokerError codes that are guard refusals, not upstream faults. */
const GUARD_CODES = new Set(['rest_host_escape', 'estate_scope_escape', 'guard_error']);
/**
 * BrokerError codes of an upstream that no longer knew the session (upstream/connection.ts): the
 * request was not processed, so a read-only tool may try again on the new session.
 */
const SESSION_LOST_CODES = new Set(['session_lost', 'upstream_session_lost']);

export function invokeStage(deps: { router: Dispatcher }): Stage {
  return {
    name: 'invoke',
    async run(call) {
      call.attempts++;
      call.retryable = false;
      call.retryAfterMs = undefined;
      call.sessionLost = undefined;
      call.outcome = undefined;
      call.reason = undefined;
      let result: CallToolResult;
      try {
        result = await deps.router.dispatch(call);
      } catch (err) {
        classifyFailure(call, err);
        return;
      }
      call.result = result;
      const failure = handlerFailure(result);
      call.outcome = failure === null ? 'ok' : 'tool_error';
      if (failure !== null) call.reason = oneLine(failure);
    },
  };
}

function classifyFailure(call: BrokerCall, err: unknown): void {
  if (err instanceof BrokerError) {
    if (GUARD_CODES.has(err.code)) return refuse(call, 'guard_error', err.code === 'guard_error' ? messageOf(err) : `${err.code}: ${messageOf(err)}`);
    if (err.code === 'invalid_arguments') return refuse(call, 'invalid_arguments', messageOf(err));
    if (err.code === 'denied') return refuse(call, 'denied', messageOf(err));
    // The router's own refusals (issue 4): an approval not given, a caller gone after approving.
    if (err.code === 'approval_required') return refuse(call, 'approval_required', messageOf(err));
    if (err.code === 'cancelled') return refuse(call, 'cancelled', messageOf(err));
    const data = err.data as { httpStatus?: number; retryAfterMs?: number } | undefined;
    refuse(call, 'upstream_error', messageOf(err));
    call.retryable = err.code === 'upstream_unavailable' || isRetryableStatus(data?.httpStatus) || err.code === 'transport_error' || SESSION_LOST_CODES.has(err.code);
    call.retryAfterMs = data?.retryAfterMs;
    if (err.code === 'session_lost') {
      call.sessionLost = true;
      call.retryAfterMs = 0; // the new session is open already
    }
    return;
  }
  if (err instanceof McpError) {
    if (err.code === -32602) return refuse(call, 'invalid_arguments', oneLine(err.message));
    refuse(call, 'upstream_error', oneLine(err.message));
    // -32000 connection closed, -32001 request timeout from the transport: transport faults.
    call.retryable = err.code === -32000 || err.code === -32001;
    return;
  }
  // The SDK's HTTP transports throw errors whose numeric `code` is the HTTP status (-1: not HTTP).
  const code = (err as { code?: unknown })?.code;
  const httpStatus = typeof code === 'number' && code >= 100 && code < 600 ? code : undefined;
  refuse(call, 'upstream_error', httpStatus ? `HTTP ${httpStatus} from the upstream: ${messageOf(err)}` : messageOf(err));
  call.retryable = typeof code === 'number' ? isRetryableStatus(httpStatus) : true;
}

function isRetryableStatus(status: number | undefined): boolean {
  return status === 429 || (status !== undefined && status >= 500 && status < 600);
}

function oneLine(text: string): string {
  const line = text.replace(/\s*\n\s*/g, ' ').trim();
  return line.length > 300 ? `${line.slice(0, 297)}...` : line;
}
