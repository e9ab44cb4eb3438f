/**
 * The estate relay (issue 4; seed 002_7bce204a86c1c7ba.txt "the reserved `estate` relay"): the
 * reserved built-in server `estate` with a fixed tool list over the folder `estate.root`. Its
 * calls pass the same broker path as any other (judge, budget, breaker, record, publish) and its
 * results are scrubbed like any other. It is served only when `estate.enabled` and `estate.root`
 * is a folder at start ({@link estateServed}).
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { STORE_FILE } from '../../store/sqlite.js';
import type { FunctionTool } from '../../router/function-tool.js';
import type { Clock } from '../../shared/clock.js';
import type { Logger } from '../../shared/logger.js';
import type { Scrubber } from '../../shared/scrub.js';
import { proposalTools, type ProposalStore } from './proposal-tools.js';
import { readTools } from './read-tools.js';
import { EstateScope, type ReservedPath } from './scope.js';

export interface EstateOptions {
  /** `estate` of servers.json (defaults in src/config/schema.ts `estateSchema`). */
  readonly config: { readonly root: string; readonly maxBytes: number; readonly maxResults: number };
  /** The broker's scrubber: what the read tools return and match is masked with it (redacted-bytes.ts). */
  readonly scrubber: Scrubber;
  /** The store that keeps proposals, opened on first use. */
  store(): ProposalStore;
  readonly clock: Clock;
  /** Whether a principal may act on every principal's proposals (`local`, role `operator`). */
  isPrivileged(principal: string): boolean;
  /** A test seam: see `ProposalToolDeps.beforeWrite`. */
  readonly beforeWrite?: () => void | Promise<void>;
  /**
   * Absolute paths of the broker's own files and folders ({@link brokerOwnPaths}): refused and
   * unlisted should the root hold them. Default none.
   */
  readonly reserved?: readonly ReservedPath[];
}

/**
 * What no estate path may name: `broker.dataDir` (the store: tasks, approvals, proposals, the
 * sealing key), the store's files in it by name (so a hard link to one is known by identity
 * however full the folder is), the records file, and every name beside it that starts with the
 * records file's name and a dot (`{ prefix: "<path>." }`): its lock `<path>.lock`, the lock's
 * temporary files (`<path>.lock.<pid>.<hex>` while it is taken, `<path>.lock.stale.<pid>.<hex>`
 * while a stale one is taken over: audit/records-lock.ts) and its rotations, `<path>.1` …
 * `<path>.maxFiles` and any left from a larger `maxFiles` (rotation drops only `<path>.maxFiles`).
 * Every principal's calls and state are in them; a root around them (`"root": "."` beside the
 * default `./data`) would otherwise hand them to any principal that may read the estate.
 */
export function brokerOwnPaths(broker: { readonly dataDir: string; readonly records: { readonly path: string; readonly maxFiles: number } }): ReservedPath[] {
  const records = broker.records.path;
  // The store's files by name as well: their identities are then known whatever else the folder
  // holds (the walk below `dataDir` in EstateScope.reservedNow stops after MAX_RESERVED_BELOW entries).
  const store = join(broker.dataDir, STORE_FILE);
  return [broker.dataDir, ...['', '-wal', '-shm', '-journal'].map((suffix) => `${store}${suffix}`), records, { prefix: `${records}.` }];
}

/**
 * Whether the `estate__*` tools are registered: `estate.enabled` (default true, `estateSchema`)
 * and `estate.root` a folder now, at start. A missing root is logged once as a warning naming it,
 * rather than advertising seven tools every call to which would fail.
 */
export function estateServed(config: { readonly enabled: boolean; readonly root: string }, logger: Logger): boolean {
  if (!config.enabled) return false;
  let isFolder: boolean;
  try {
    isFolder = statSync(config.root).isDirectory();
  } catch {
    logger.warn({ root: config.root }, `estate relay off: estate.root ${config.root} does not exist (set estate.enabled false to silence this)`);
    return false;
  }
  if (!isFolder) logger.warn({ root: config.root }, `estate relay off: estate.root ${config.root} is not a folder`);
  return isFolder;
}

/** The seven `estate__*` tools, in advertised order. */
export function estateTools(options: EstateOptions): FunctionTool[] {
  const scope = new EstateScope(options.config.root, options.reserved);
  return [
    ...readTools(scope, options.config, options.scrubber),
    ...proposalTools(scope, {
      store: options.store,
      clock: options.clock,
      scrubber: options.scrubber,
      maxResults: options.config.maxResults,
      isPrivileged: options.isPrivileged,
      beforeWrite: options.beforeWrite,
    }),
  ];
}

export { EstateScope, EstateNotFound, checkLexically, MAX_NAME_BYTES, MAX_PATH_BYTES, MAX_SYMLINK_HOPS, type ReservedPath, type ScopedPath, type WritablePath } from './scope.js';
export { applyUnifiedDiff, parseUnifiedDiff, diffLineCounts, replacementLineCounts, DiffError } from './diff.js';
export { SEARCH_MAX_FILES, utf8Boundary, type EstateLimits } from './read-tools.js';
export type { ProposalStore } from './proposal-tools.js';

/** The advertised names of the estate relay's tools (a test keeps this equal to {@link estateTools}). */
export const ESTATE_TOOL_NAMES: readonly string[] = [
  'estate__list_dir', 'estate__read_file', 'estate__search', 'estate__stat',
  'estate__propose_change', 'estate__list_proposals', 'estate__apply_proposal',
];
