/**
 * Cursor paging of the store's newest-first lists (the approval inbox, estate proposals), as MCP
 * lists page: a page answers `nextCursor` when more rows follow it, and the next request passes
 * it back as `cursor`. The cursor is opaque to callers: base64url of the JSON `[createdAt, id]`
 * of the last row of the page, the full sort key of `ORDER BY created_at DESC, id DESC` (ids are
 * unique, so no two rows share a key and a page never repeats or skips a row, whatever is added
 * meanwhile). A cursor names a position only, never rows or a principal: the list's own filters
 * (its principal, its status) apply on every page as on the first.
 */
import { BrokerError } from '../shared/errors.js';

/** Where a page starts: rows after this one in the order (older, or as old with a smaller id). */
export interface ListKey {
  /** ISO-8601, as stored. */
  readonly createdAt: string;
  readonly id: string;
}

/** One page of a list: at most the list's page size of `items`, and `nextCursor` when more follow (absent on the last page). */
export interface ListPage<T> {
  readonly items: T[];
  readonly nextCursor?: string;
}

/** The cursor of the page that follows `key`. */
export function encodeListCursor(key: ListKey): string {
  return Buffer.from(JSON.stringify([key.createdAt, key.id])).toString('base64url');
}

/** The key a cursor from {@link encodeListCursor} names; undefined for any other text. */
export function decodeListCursor(cursor: string): ListKey | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed.length !== 2) return undefined;
  const [createdAt, id] = parsed as unknown[];
  if (typeof createdAt !== 'string' || typeof id !== 'string' || !createdAt || !id) return undefined;
  return { createdAt, id };
}

/**
 * The key `cursor` names (undefined for no cursor). Throws `BrokerError('invalid_arguments')`
 * for a cursor that {@link encodeListCursor} did not make; the message names `what` (the list).
 */
export function listKeyOf(cursor: string | undefined, what: string): ListKey | undefined {
  if (cursor === undefined) return undefined;
  const key = decodeListCursor(cursor);
  if (!key) throw new BrokerError('invalid_arguments', `${what}: the cursor is not one this list gave (pass back a nextCursor as it came)`);
  return key;
}

/**
 * A page of `limit` rows out of `rows`, read newest first with a limit of `limit + 1`: the one
 * extra row only tells that more follow, and the cursor names the page's last row.
 */
export function pageOf<T extends ListKey>(rows: T[], limit: number): ListPage<T> {
  if (rows.length <= limit) return { items: rows };
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return last ? { items, nextCursor: encodeListCursor(last) } : { items };
}
