/**
 * What a config reload changes (issue 18 §5): which servers were added, removed or changed,
 * whether the policy or principals changed, and which changed settings only a restart applies.
 * Pure: compares two loaded configs.
 */
import { isDeepStrictEqual } from 'node:util';
import type { LoadedConfig } from './load.js';

/** Top-level sections a reload applies live; any other change is reported in `needsRestart`. */
export const LIVE_SECTIONS = ['mcpServers', 'policy', 'principals', '$schema'] as const;

export interface ConfigDiff {
  /** Server keys new in the next config, in its order. */
  readonly added: readonly string[];
  readonly removed: readonly string[];
  /** Servers whose definition changed (they are re-dialled). */
  readonly changed: readonly string[];
  readonly policyChanged: boolean;
  /** Principals removed, or whose token, role or budget changed (their sessions end). */
  readonly principalsChanged: readonly string[];
  /** Principals new in the next config. */
  readonly principalsAdded: readonly string[];
  /** Changed top-level sections that apply only at the next start (`broker`, `http`, …). */
  readonly needsRestart: readonly string[];
}

export function diffConfig(prev: LoadedConfig, next: LoadedConfig): ConfigDiff {
  const before = prev.mcpServers;
  const after = next.mcpServers;
  const added = Object.keys(after).filter((k) => !(k in before));
  const removed = Object.keys(before).filter((k) => !(k in after));
  const changed = Object.keys(after).filter((k) => k in before && !isDeepStrictEqual(before[k], after[k]));
  const principalsChanged = Object.keys(prev.principals).filter((k) => !isDeepStrictEqual(prev.principals[k], next.principals[k]));
  const principalsAdded = Object.keys(next.principals).filter((k) => !(k in prev.principals));
  const sections = new Set([...Object.keys(prev), ...Object.keys(next)]);
  const ignored = new Set<string>([...LIVE_SECTIONS, 'file', 'baseDir', 'secrets']);
  const needsRestart = [...sections].filter(
    (k) => !ignored.has(k) && !isDeepStrictEqual((prev as unknown as Record<string, unknown>)[k], (next as unknown as Record<string, unknown>)[k]),
  );
  return { added, removed, changed, policyChanged: !isDeepStrictEqual(prev.policy, next.policy), principalsChanged, principalsAdded, needsRestart };
}
