/**
 * The `cursor` argument of a paged built-in list tool (`broker__approvals_list`,
 * `estate__list_proposals`): a `nextCursor` the tool answered before (store/list-cursor.ts).
 * Any other text fails the tool's schema, so the call is refused `invalid_arguments` (the
 * contract's invalid params) and the handler does not run.
 */
import { z } from 'zod';
import { decodeListCursor } from '../store/list-cursor.js';

export const cursorParameter = z
  .string()
  .refine((cursor) => decodeListCursor(cursor) !== undefined, { message: 'not a cursor this list gave (pass back a nextCursor as it came)' })
  .optional()
  .describe('The nextCursor of the page before; absent: the first page (the newest)');
