/**
 * The invoke stage: one attempt at the call through the router (`dispatch`), with the call's
 * signal (deadline and downstream cancel). The inner-most stage: it calls no `next()`.
 *
 * Before anything is sent: arguments that cannot be sent ({@link argumentsProblem}: deeper than
 * `MAX_ARGUMENT_DEPTH`, a cycle, a BigInt) are `invalid_arguments`, and a call whose signal has
 * already aborted is not dispatched (the deadline stage names it `timeout` or `cancelled`).
 * Neither is an attempt.
 *
 * Reads the outcome off the answer: a result → `ok`, or `tool_error` when the handler reported
 * its own failure ({@link handlerFailure}, seed 000; text blocks only where `verdictFromText`
 * says so); a throw → what {@link classifyFailure} makes of it. `call.attempts` counts only
 * attempts that were sent, so budget and breaker, which read it, count only calls the upstream
 * saw.
 *
 * An upstream that no longer knew the session (HTTP 404, `session_lost`) is `upstream_error`
 * marked `sessionLost` and retryable at once: the request was not processed and a new session
 * is open (upstream/connection.ts).
 */
import type { CallToolResult } from '@modelcontextprotocol/client';
import { argumentsProblem } from './arguments.js';
import { classifyFailure, oneLine } from './failure.js';
import { handlerFailure } from './handler-failure.js';
import { SETTLED, splitStage, type Stage } from './runner.js';
import type { Dispatcher } from '../router/router.js';
import { refuse, type BrokerCall } from './types.js';

export interface InvokeDeps {
  router: Dispatcher<BrokerCall>;
  /**
   * Whether the handler's verdict is also read from a JSON text block of the result (the tool's,
   * else the server's `verdictFromText`); default never: a text block is data (a file, a fetched
   * body), and the verdict is `isError` or `structuredContent.success`.
   */
  verdictFromText?: (call: BrokerCall) => boolean;
}

export function invokeStage(deps: InvokeDeps): Stage {
  // The inner-most stage: it settles every call it sees (no inner stages, no way out).
  return splitStage('invoke', attempt);

  async function attempt(call: BrokerCall): Promise<typeof SETTLED> {
    call.retryable = false;
    call.retryAfterMs = undefined;
    call.sessionLost = undefined;
    call.wireError = undefined;
    call.outcome = undefined;
    call.reason = undefined;
    const problem = call.request.invalidArguments ?? argumentsProblem(call.request.args);
    if (problem !== undefined) {
      refuse(call, 'invalid_arguments', `the arguments of "${call.target?.name ?? call.request.name}" ${problem}; nothing was sent`);
      return SETTLED;
    }
    if (call.signal.aborted) {
      refuse(call, 'cancelled', 'the call ended before it was sent');
      return SETTLED;
    }
    call.attempts++;
    let result: CallToolResult;
    try {
      result = await deps.router.dispatch(call);
    } catch (err) {
      const failure = classifyFailure(err);
      if (!failure.sent) call.attempts--;
      refuse(call, failure.outcome, failure.reason);
      call.retryable = failure.retryable;
      call.retryAfterMs = failure.retryAfterMs;
      call.sessionLost = failure.sessionLost;
      call.wireError = failure.wireError;
      return SETTLED;
    }
    const malformed = resultProblem(result);
    if (malformed !== undefined) {
      // Passed on, a client's SDK refuses it (a modern caller hears -32602, as if it had erred) while the record said ok.
      refuse(call, 'upstream_error', `the upstream's result ${malformed}; it is not passed on`);
      return SETTLED;
    }
    call.result = result;
    const failure = handlerFailure(result, { fromText: deps.verdictFromText?.(call) === true });
    call.outcome = failure === null ? 'ok' : 'tool_error';
    if (failure !== null) call.reason = oneLine(failure);
    return SETTLED;
  }
}

/**
 * Why `result` is no `CallToolResult` a client would take (a cheap look at its shape, not the
 * SDK's whole schema: this is every call's path), or undefined. Other kinds of answer
 * (`resultType` other than `complete`: an input request, a task) are judged elsewhere.
 */
function resultProblem(result: unknown): string | undefined {
  if (typeof result !== 'object' || result === null || Array.isArray(result)) return 'is no object';
  const r = result as { resultType?: unknown; content?: unknown; structuredContent?: unknown; isError?: unknown };
  if (typeof r.resultType === 'string' && r.resultType !== 'complete') return undefined;
  if (r.content !== undefined) {
    if (!Array.isArray(r.content)) return 'has a "content" that is no array';
    for (const block of r.content) {
      if (typeof block !== 'object' || block === null || typeof (block as { type?: unknown }).type !== 'string') return 'has a content block that is no object with a "type"';
    }
  }
  if (r.structuredContent !== undefined && (typeof r.structuredContent !== 'object' || r.structuredContent === null || Array.isArray(r.structuredContent))) {
    return 'has a "structuredContent" that is no object';
  }
  if (r.isError !== undefined && typeof r.isError !== 'boolean') return 'has an "isError" that is no boolean';
  return undefined;
}
