/**
 * Call outcomes: a closed set, each mapped once to its HTTP status (DESIGN.md "Contract").
 */
export const OUTCOMES = [
  'ok',
  'tool_error',
  'invalid_arguments',
  'denied',
  'approval_required',
  'unregistered',
  'budget_exhausted',
  'breaker_open',
  'upstream_error',
  'timeout',
  'cancelled',
  'withheld',
  'guard_error',
] as const;

export type Outcome = (typeof OUTCOMES)[number];

/** The HTTP status each outcome is answered with by the HTTP API. */
export const OUTCOME_STATUS: Readonly<Record<Outcome, number>> = {
  ok: 200,
  tool_error: 200,
  invalid_arguments: 400,
  denied: 403,
  approval_required: 403,
  unregistered: 404,
  budget_exhausted: 429,
  breaker_open: 503,
  upstream_error: 502,
  timeout: 504,
  cancelled: 499,
  withheld: 451,
  guard_error: 500,
};

/** Outcomes whose result body reaches the client. Every other outcome is a refusal. */
export function carriesResult(outcome: Outcome): boolean {
  return outcome === 'ok' || outcome === 'tool_error';
}

/** Outcomes that count as an upstream failure for the breaker, on a call with an attempt sent (`call.attempts > 0`). */
export function isUpstreamFailure(outcome: Outcome): boolean {
  return outcome === 'upstream_error' || outcome === 'timeout';
}

/** Key of the outcome in a result's `_meta`. */
export const OUTCOME_META_KEY = 'mcp-broker/outcome';
/** Key of the call id in a result's `_meta`. */
export const CALL_ID_META_KEY = 'mcp-broker/callId';

/**
 * Key of a result's rollback descriptor(s) in `_meta`: how to undo what the call did (flows read
 * it, src/flows/rollback.ts; the broker keeps it when it refuses a result that came back).
 */
export const ROLLBACK_META_KEY = 'mcp-broker/rollback';
