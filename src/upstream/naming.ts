/**
 * Advertised names (DESIGN.md "Contract", cases F13, F14): `<prefix>__<name>`, every name
 * matching {@link NAME_PATTERN}. Characters outside `[A-Za-z0-9_-]` become `_`; a name longer
 * than {@link MAX_NAME_LENGTH} is cut and given a stable hash suffix of the full original, so
 * it never depends on which other upstreams exist. Names of one upstream that would still meet
 * are told apart the same way ({@link advertisedNames}). Routing never parses these names: the
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
  const raw = joined(prefix, original);
  const clean = raw.replace(/[^A-Za-z0-9_-]/g, '_') || '_';
  return clean.length <= MAX_NAME_LENGTH ? clean : hashed(raw, clean);
}

/**
 * The advertised names of one upstream's tools (or prompts), in the order of `originals`: each
 * its {@link advertisedName}, except where several originals would get one name (`a.b`, `a/b`,
 * `a_b`): each of those is given the hash suffix of its full original, as an over-long name is,
 * and none keeps the shared name. So a name never moves from one original to another when the
 * upstream adds a tool (a client still calling the shared name meets an unknown tool, not
 * another tool), and the names never depend on the list's order; a name listed twice gets one name.
 */
export function advertisedNames(prefix: string, originals: readonly string[]): string[] {
  const names = originals.map((original) => advertisedName(prefix, original));
  const sharing = new Map<string, Set<string>>();
  originals.forEach((original, i) => {
    const group = sharing.get(names[i]!) ?? new Set<string>();
    sharing.set(names[i]!, group.add(original));
  });
  return originals.map((original, i) => {
    const name = names[i]!;
    return sharing.get(name)!.size === 1 ? name : hashed(joined(prefix, original), name);
  });
}

/** `<prefix>__<original>`, or `original` alone for bare names. */
function joined(prefix: string, original: string): string {
  return prefix ? `${prefix}${NAME_DELIMITER}${original}` : original;
}

/** `clean` cut to leave room for `_` and the hash of `raw`, then those. */
function hashed(raw: string, clean: string): string {
  const hash = createHash('sha256').update(raw).digest('hex').slice(0, HASH_LENGTH);
  return `${clean.slice(0, MAX_NAME_LENGTH - HASH_LENGTH - 1)}_${hash}`;
}
