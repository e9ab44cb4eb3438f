/**
 * The invoke stage: one attempt at the call through the router (`dispatch`), with the call's
 * signal (deadline and downstream cancel). Reads the outcome off the answer:
 * a result → `ok`, or `tool_error` when the handler reported its own failure (seed 000);
 * a throw → `invalid_arguments` (-32602 from the upstream), `guard_error` (a scope escape),
 * or `upstream_error` (transport fault, protocol error, 429/5xx), marked retryable where a
 * read-only tool may try again. The inner-most stage: it calls no `next()`.
 */
import { ProtocolError, SdkError } from '@modelcontextprotocol/client';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { BrokerError, messageOf } from '../shared/errors.js';
import { httpStatusOf, isTransportFault } from '../shared/sdk-errors.js';
import { handlerFailure } from './handler-failure.js';
import type { Stage } from './runner.js';
import { refuse, type BrokerCall } from './types.js';

/** Runs one attempt of a call; owned by the router. */
export interface Dispatcher {
  dispatch(call: BrokerCall): Promise<CallToolResult>;
}

/** BrokerError codes that are guard refusals, not upstream faults. */
const GUARD_CODES = new Set(['rest_host_escape', 'estate_scope_escape', 'guard_error']);

export function invokeStage(deps: { router: Dispatcher }): Stage {
  return {
    name: 'invoke',
    async run(call) {
      call.attempts++;
      call.retryable = false;
      call.retryAfterMs = undefined;
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
    call.retryable = err.code === 'upstream_unavailable' || isRetryableStatus(data?.httpStatus) || err.code === 'transport_error';
    call.retryAfterMs = data?.retryAfterMs;
    return;
  }
  const httpStatus = httpStatusOf(err);
  if (ProtocolError.isInstance(err) || (SdkError.isInstance(err) && httpStatus === undefined)) {
    if (ProtocolError.isInstance(err) && err.code === -32602) return refuse(call, 'invalid_arguments', oneLine(err.message));
    refuse(call, 'upstream_error', oneLine(err.message));
    // A closed connection or a timed-out request (the SDK's, or -32000/-32001 from the peer): transport faults.
    call.retryable = isTransportFault(err);
    return;
  }
  // The SDK's HTTP transports report the HTTP status of a refusal (SdkHttpError, SseError).
  const code = (err as { code?: unknown })?.code;
  refuse(call, 'upstream_error', httpStatus ? `HTTP ${httpStatus} from the upstream: ${messageOf(err)}` : messageOf(err));
  call.retryable = httpStatus !== undefined || typeof code === 'number' ? isRetryableStatus(httpStatus) : true;
}

function isRetryableStatus(status: number | undefined): boolean {
  return status === 429 || (status !== undefined && status >= 500 && status < 600);
}

function oneLine(text: string): string {
  const line = text.replace(/\s*\n\s*/g, ' ').trim();
  return line.length > 300 ? `${line.slice(0, 297)}...` : line;
}
