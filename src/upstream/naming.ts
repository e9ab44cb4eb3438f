/**
 * Advertised names (DESIGN.md "Contract", cases F13, F14): `<prefix>__<name>`, every name
 * matching {@link NAME_PATTERN}. Characters outside `[A-Za-z0-9_-]` become `_`; a name longer
 * than {@link MAX_NAME_LENGTH} is cut and given a stable hash suffix of the full original, so
 * it never depends on which other upstreams exist. Routing never parses these names: the
 * roster keeps a table from advertised name to (upstream, original name).
 */
import { createHash } from 'node:crypto';

/** The strictest name rule common to MCP clients and model APIs. */
export const NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const MAX_NAME_LENGTH = 64;
/** Between prefix and name. Server keys and prefixes may not contain it. */
export const NAME_DELIMITER = '__';
const HASH_LENGTH = 8;

/** The advertised name of an upstream's tool or prompt. `prefix` '' means bare names. */
export function advertisedName(prefix: string, original: string): string {
  const raw = prefix ? `${prefix}${NAME_DELIMITER}${original}` : original;
  const clean = raw.replace(/[^A-Za-z0-9_-]/g, '_') || '_';
  if (clean.length <= MAX_NAME_LENGTH) return clean;
  const hash = createHash('sha256').update(raw).digest('hex').slice(0, HASH_LENGTH);
  return `${clean.slice(0, MAX_NAME_LENGTH - HASH_LENGTH - 1)}_${hash}`;
}
