/**
 * The budget unit of a modern (2026-07-28) request, which has no session (DESIGN.md "Units
 * without sessions").
 *
 * - A caller may name its unit in the request's `_meta` under {@link UNIT_META_KEY}: a string of
 *   1 to {@link UNIT_KEY_MAX_CHARS} characters from `[A-Za-z0-9._:-]`. The unit is then
 *   `modern:<principal>/<key>`: scoped under the principal, so one principal's key can never
 *   name (spend or read) another principal's unit, whatever the key. The principal is written
 *   URI-encoded (`encodeURIComponent`), so no principal name and key can spell another's unit,
 *   nor a legacy session's (a UUID) or the admin API's (`api:<principal>`).
 * - Without a key the unit is the principal's own, `modern:<principal>`.
 * - A key of any other type or form is refused with `-32602`, naming the field, never the value.
 *
 * No session ends a unit, so its budget is per `broker.budgetWindowMs` window from its first
 * call and then renews (broker/budget.ts), as the admin API's does; a caller that wants a fresh
 * budget sooner names a fresh key (one per conversation or job, say), as a legacy client opens a
 * new session. The key is the broker's own: it is not passed on to the upstream.
 */
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';

/** The `_meta` key a modern request names its budget unit with. */
export const UNIT_META_KEY = 'mcp-broker/unit';
/** Longest unit key, in characters. */
export const UNIT_KEY_MAX_CHARS = 128;

const KEY = /^[A-Za-z0-9._:-]+$/;

/**
 * The unit of a modern request by `principal` whose `_meta` is `meta` (see the module doc).
 * Throws `ProtocolError` `-32602` for a malformed key.
 */
export function modernUnit(principal: string, meta: Record<string, unknown> | undefined): string {
  const key = meta?.[UNIT_META_KEY];
  const own = `modern:${encodeURIComponent(principal)}`;
  if (key === undefined) return own;
  if (typeof key !== 'string' || key.length === 0 || key.length > UNIT_KEY_MAX_CHARS || !KEY.test(key)) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `Invalid params: _meta["${UNIT_META_KEY}"] must be a string of 1 to ${UNIT_KEY_MAX_CHARS} characters from A-Z a-z 0-9 . _ : -`,
    );
  }
  return `${own}/${key}`;
}
