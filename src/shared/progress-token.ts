/**
 * Whether `token` is a progress token the SDK's request schema accepts (`ProgressTokenSchema`:
 * a string or an integer) or absent. An integer here is a safe integer, as zod's `int()` counts
 * one: `1.5`, `1e20` and 2^53 are refused. The hand-written request checks on the hot path
 * (transports/request-shape.ts, the wire lanes) take exactly what that schema takes.
 */
export function isProgressToken(token: unknown): boolean {
  return token === undefined || typeof token === 'string' || (typeof token === 'number' && Number.isSafeInteger(token));
}
