/**
 * The durable store: everything the broker must remember across restarts sits behind this one
 * interface (DESIGN.md "Scale"): tool pins, approvals (with the approval-state key and spent
 * one-time ids), proposals, tasks and upstream era verdicts now; budgets later.
 * The default is SQLite in `broker.dataDir` ({@link SqliteStore}); a PostgreSQL store can
 * replace it for several instances, so every method is async and each is one small atomic step.
 *
 * Keys are advertised tool names (what `mcp-broker approve <tool>` takes) and principal names
 * (`local` for the stdio client; {@link EVERY_PRINCIPAL} for a decision that covers everyone).
 * Times are ISO-8601 strings.
 */
import type { ListKey } from './list-cursor.js';

/** The principal name of a decision that covers every principal. */
export const EVERY_PRINCIPAL = '*';

/**
 * A tool definition as the broker saw it: its digest and the definition itself, as listed to
 * downstream clients (JSON-serialisable). Pins store both, so a changed tool can be listed as
 * it was approved.
 */
export interface ObservedTool {
  /** sha256 of every model-visible field, canonicalised (`toolHash` in `upstream/roster.ts`). */
  readonly hash: string;
  /** The definition as advertised (name replaced by the advertised name). */
  readonly definition: object;
  /**
   * The digest a store of schema 1 kept (name, description, schemas, annotations only;
   * `legacyToolHash`). When given and equal to a schema-1 pin, that pin is upgraded in place to
   * {@link hash} and {@link definition}: the fields it covered are unchanged, and the fields it
   * did not cover are pinned as first seen.
   */
  readonly legacyHash?: string;
}

/**
 * The pinned definition of one tool for one principal (rug-pull protection). The pin for
 * {@link EVERY_PRINCIPAL} is the default pin: the first definition the broker saw, or the one
 * `mcp-broker approve <tool>` (without `--principal`) last accepted. A principal's own pin
 * (`approve --principal`) overrides it for that principal only.
 */
export interface ToolPin {
  /** Advertised tool name. */
  readonly tool: string;
  /** A principal name, or {@link EVERY_PRINCIPAL} for the default pin. */
  readonly principal: string;
  /** Digest of the pinned definition ({@link ObservedTool.hash}). */
  readonly hash: string;
  /** The pinned definition; absent for a pin stored by schema 1 that was not upgraded yet. */
  readonly definition?: object;
  readonly pinnedAt: string;
}

/** The latest definition of a tool the broker saw (what `mcp-broker approve` pins). */
export interface SeenTool {
  readonly tool: string;
  readonly hash: string;
  readonly definition: object;
  readonly seenAt: string;
}

/**
 * How a definition compares with the pin that applies to a principal: first sight (now the
 * default pin), the same, or changed (refused and listed as pinned until approved).
 */
export type PinState = 'new' | 'same' | 'changed';

/** A standing decision about one tool, by an operator (`mcp-broker approve|revoke`). */
export interface Approval {
  readonly tool: string;
  /** A principal name, or {@link EVERY_PRINCIPAL}. */
  readonly principal: string;
  /** `approved`: `ask` is satisfied; `revoked`: the tool needs approval again before it runs. */
  readonly decision: 'approved' | 'revoked';
  readonly at: string;
  /** Who decided: `cli`, or another surface later (the approval inbox). */
  readonly by: string;
}

/**
 * The durable store. Implementations: {@link SqliteStore}.
 *
 * The reads the judge makes on every call ({@link Store.observePin}, {@link Store.getApproval},
 * {@link Store.hasUsed}) may answer at once instead of with a promise; SQLite does. Then the
 * call path reaches its upstream without giving up its turn (issue 6: over HTTP, a turn given up
 * there is spent on the SDK's response setup while the upstream waits).
 */
export interface Store {
  /** The pin of `tool` that applies to `principal`: its own, else the default pin; undefined when none. */
  getPin(tool: string, principal: string): Promise<ToolPin | undefined>;
  /**
   * Compares `seen` with the pin of `tool` that applies to `principal`. No pin at all: stores
   * `seen` as the default pin (`new`). Else answers `same` or `changed`, and remembers `seen` as
   * the tool's latest definition ({@link getSeen}). Never moves a pin (but see
   * {@link ObservedTool.legacyHash}).
   */
  observePin(tool: string, principal: string, seen: ObservedTool, at: string): PinState | Promise<PinState>;
  /** The latest definition of `tool` the broker saw, if any. */
  getSeen(tool: string): Promise<SeenTool | undefined>;
  /**
   * Moves the pin of `tool` for `principal` to `to` (default: the latest definition seen).
   * For {@link EVERY_PRINCIPAL} it moves the default pin and drops every principal's own pin;
   * for a principal it moves only that principal's. Returns the pin that now applies, or
   * undefined when nothing moved (nothing seen, or the pin already is that definition).
   */
  repin(tool: string, principal: string, at: string, to?: ObservedTool): Promise<ToolPin | undefined>;
  /** Every pin, default and per principal, by tool then principal. */
  listPins(): Promise<ToolPin[]>;

  /** The decision that applies to `principal` for `tool`: its own, else the one for everyone. */
  getApproval(tool: string, principal: string): Approval | undefined | Promise<Approval | undefined>;
  /**
   * Stores a decision. One for {@link EVERY_PRINCIPAL} replaces every decision about the tool;
   * one for a principal replaces only that principal's.
   */
  setApproval(approval: Approval): Promise<void>;
  listApprovals(): Promise<Approval[]>;

  /**
   * The secret named `name`, created from `init` at `at` when the store has none yet. The first writer
   * wins: every broker sharing the store (and every later start) gets the same bytes. Holds the
   * key that seals approval states (broker/approval-state.ts), so the store file is as sensitive
   * as the approvals in it.
   */
  secret(name: string, init: Uint8Array, at: string): Promise<Uint8Array>;
  /**
   * Spends the one-time id `id` (an approval state's nonce): true the first time, false when it
   * was spent before. Each id is remembered until `expiresAt` (ISO-8601; the state it came with
   * is refused as expired from then on anyway); ids whose `expiresAt` is before `at` are forgotten.
   */
  spendOnce(id: string, expiresAt: string, at: string): Promise<boolean>;

  /** Whether `principal` has made its first (approved) call of `tool` (`policy.firstUse`). */
  hasUsed(tool: string, principal: string): boolean | Promise<boolean>;
  markUsed(tool: string, principal: string, at: string): Promise<void>;
  /** Forgets first uses of `tool` by `principal`, or by everyone with {@link EVERY_PRINCIPAL}. Returns how many. */
  clearUses(tool: string, principal: string): Promise<number>;

  /** Stores a new estate proposal (`estate__propose_change`; issue 4). */
  addProposal(proposal: Proposal): Promise<void>;
  getProposal(id: string): Promise<Proposal | undefined>;
  /**
   * Newest first (`createdAt`, then `id`, both descending), at most `limit`, optionally only those
   * with `status`, only those `principal` proposed and only those after `after` in that order
   * (the next page; store/list-cursor.ts).
   */
  listProposals(options: { status?: Proposal['status']; principal?: string; after?: ListKey; limit: number }): Promise<Proposal[]>;
  /** Marks a pending proposal applied; false when it was not pending (applied by someone else first). */
  markProposalApplied(id: string, at: string, by: string): Promise<boolean>;

  /**
   * Registers a broker process (its instance id, host, pid) with a first heartbeat at `at`, or
   * refreshes the heartbeat of one already registered.
   */
  heartbeat(instance: BrokerInstance): Promise<void>;
  /** Every registered instance, oldest first. */
  listInstances(): Promise<BrokerInstance[]>;
  /**
   * Forgets instance `id` and marks every `running` task it owned `killed` by `system` at `at`
   * (it ended without finishing them). Returns how many tasks were killed.
   */
  reapInstance(id: string, at: string): Promise<number>;

  /** Stores a new task row (its `id` is new). */
  addTask(row: TaskRow): Promise<void>;
  /** The task `id`, if it exists and has not expired by `now` (ms since the epoch). */
  getTask(id: string, now: number): Promise<TaskRow | undefined>;
  /**
   * Moves task `id` to `change` (status, stoppedBy, result, updatedAt; owner when given), only
   * when its status is one of `from`. False when it was not (settled by someone else first, or gone).
   */
  updateTask(id: string, from: readonly TaskStatus[], change: TaskChange): Promise<boolean>;
  /**
   * Tasks not expired by `now`, newest first (`createdAt`, then `id`, both descending), at most
   * `limit` of those that pass every filter given: only `principal`'s, only those with `status`,
   * only those an approval was given for (`approved: true`, {@link TaskRow.approvedBy} set) or
   * not (`false`), only those after `after` in that order (the next page; store/list-cursor.ts).
   */
  listTasks(options: { principal?: string; status?: TaskStatus; approved?: boolean; after?: ListKey; now: number; limit: number }): Promise<TaskRow[]>;
  /**
   * Deletes every task (row and result) whose TTL ran out by `now` (ms since the epoch), except
   * those whose call record is still owed ({@link TaskRow.recordOwed}: written first, then
   * deleted); returns how many.
   */
  deleteExpiredTasks(now: number): Promise<number>;
  /**
   * Rows whose call record is owed and due: settled (`failed`, `killed`), or expired by `now`
   * (ms since the epoch) and not `running` (a running row's call writes its own, or its
   * broker dies and the row is killed), oldest first, at most `limit`.
   */
  listOwedRecords(now: number, limit: number): Promise<TaskRow[]>;
  /**
   * Marks task `id`'s call record owed (`owed` true) or claims it (`owed` false: only when it
   * was owed). True when the row changed: for a claim, the caller writes the record (and
   * marks it owed again if it cannot).
   */
  setRecordOwed(id: string, owed: boolean): Promise<boolean>;

  /** The era verdict last stored for upstream `upstream` (a server key), if any. */
  getEraVerdict(upstream: string): Promise<EraVerdict | undefined>;
  /** Stores the verdict of a probe, replacing the upstream's previous one. */
  setEraVerdict(verdict: EraVerdict): Promise<void>;
  /** Forgets the verdict of `upstream`; true when there was one. */
  forgetEraVerdict(upstream: string): Promise<boolean>;

  /**
   * The upstreams' `server/discover` surface (JSON: `extensions`, `instructions`) last stored
   * under `key` (a hash of the upstream definitions it was found for, upstream/surface.ts).
   */
  getSurface(key: string): Promise<object | undefined>;
  /** Stores `surface` under `key` at `at` (ISO-8601); only the {@link SURFACES_KEPT} most recent keys are kept. */
  setSurface(key: string, surface: object, at: string): Promise<void>;

  /** Closes the store; later calls reject. */
  close(): Promise<void>;
}

/** A broker process as the store knows it (DESIGN.md "Scale": instance heartbeats). */
export interface BrokerInstance {
  /** Random per process start (`shared/ids.ts`). */
  readonly id: string;
  /** `os.hostname()` of the process. */
  readonly host: string;
  readonly pid: number;
  readonly startedAt: string;
  /** Last heartbeat. */
  readonly heartbeatAt: string;
}

/**
 * A durable task row's status (seed 001_0e634786582ab9c8.txt). `parked` waits on an approval
 * decision; `killed` was stopped before it finished (see {@link TaskRow.stoppedBy}).
 */
export type TaskStatus = 'running' | 'completed' | 'failed' | 'parked' | 'killed';
/** Who stopped a `killed` task: its caller (`user`), a parent task, or the broker (`system`). */
export type TaskStoppedBy = 'user' | 'parent' | 'system';

/**
 * One call run as a durable task (issue 15 §3). `args` and `result` are stored scrubbed, as in
 * the records file; `argsRedacted` says the scrub changed `args`, so the stored copy cannot
 * replay the call.
 */
export interface TaskRow {
  readonly id: string;
  readonly status: TaskStatus;
  /** Set on `killed` rows; null otherwise (and on rows killed with no attribution). */
  readonly stoppedBy: TaskStoppedBy | null;
  /** Instance id of the broker process that runs (or last ran) it. */
  readonly owner: string;
  readonly principal: string;
  /** Budget unit of the call (its session id over MCP). */
  readonly unit: string;
  /** The downstream session that created it. */
  readonly sessionId: string;
  /** `server/tool`, as in call records. */
  readonly subject: string;
  /** Advertised tool name. */
  readonly name: string;
  readonly args: unknown;
  readonly argsRedacted: boolean;
  /** The `CallToolResult` once settled (the refusal's result for a refused call); null before. */
  readonly result: unknown;
  /** One line: why it failed, was killed or is parked. */
  readonly reason: string | null;
  /** The call record's `callId`. */
  readonly callId: string;
  /**
   * Set on a `parked` row an operator approved (who: `cli`, a principal name), until an instance
   * takes it up and runs the rest of the path; null otherwise.
   */
  readonly approvedBy: string | null;
  /**
   * The call's one record is not written yet and the row settles it: set when the row is
   * created (running or parked), cleared when a call writes its record (the task's run, the
   * waiting call, or the run that takes an approved row up). A row settled (rejected,
   * cancelled, killed by a broker that ended) or expired while owed, with no call running or
   * waiting on it, gets its record from the task engine. Absent: false.
   */
  readonly recordOwed?: boolean;
  /**
   * Upstream invocations the row's call sent (`BrokerAnswer.attempts`), stored with its answer:
   * the attempts of the record the row owes when that call could not write it. Absent: 0 (no
   * call of this row settled here: a parked row rejected, expired or not run, a row killed by an
   * instance that ended).
   */
  readonly attempts?: number;
  readonly createdAt: string;
  readonly updatedAt: string;
  /** Kept this long after `createdAt`, in ms; then the row and its result are deleted. */
  readonly ttlMs: number;
}

/** What {@link Store.updateTask} changes. */
export interface TaskChange {
  readonly status: TaskStatus;
  readonly stoppedBy?: TaskStoppedBy | null;
  readonly result?: unknown;
  readonly reason?: string | null;
  readonly owner?: string;
  readonly approvedBy?: string | null;
  readonly callId?: string;
  readonly recordOwed?: boolean;
  /** See {@link TaskRow.attempts}. */
  readonly attempts?: number;
  readonly updatedAt: string;
}

/**
 * A change to the estate proposed through `estate__propose_change` (issue 4). Storing it writes
 * nothing to the estate; `estate__apply_proposal` does, after policy (ask by default).
 */
export interface Proposal {
  readonly id: string;
  /** Path relative to `estate.root`, `/`-separated. */
  readonly path: string;
  /** `content`: `body` is the whole new file; `diff`: `body` is a unified diff against the file. */
  readonly kind: 'content' | 'diff';
  readonly body: string;
  readonly rationale: string;
  /** sha256 (hex) of the file when proposed; null when it did not exist. Applying checks it. */
  readonly baseSha256: string | null;
  readonly status: 'pending' | 'applied';
  /** Who proposed it: it is theirs alone to list and apply (and any privileged principal's). */
  readonly principal: string;
  /** The legacy session that proposed it; for a modern (sessionless) request, its unit. */
  readonly sessionId: string;
  readonly createdAt: string;
  readonly appliedAt?: string;
  /** Principal that applied it. */
  readonly appliedBy?: string;
}

/** How many remembered `server/discover` surfaces (one per set of upstream definitions) the store keeps. */
export const SURFACES_KEPT = 16;

/**
 * What probing an upstream found (`server/discover`, then `initialize` on a legacy answer), so a
 * restart connects without probing again (upstream/era-memory.ts). Bound to the definition it was
 * found for: a verdict whose {@link definitionHash} differs from the upstream's current one is
 * not used.
 */
export interface EraVerdict {
  /** The server key in `servers.json`. */
  readonly upstream: string;
  /** sha256 of the connection-relevant fields of the upstream's config (`upstreamDefinitionHash`). */
  readonly definitionHash: string;
  /** `modern`: 2026-07-28 or later, spoken without `initialize`; `legacy`: 2025-11-25 and older. */
  readonly era: 'modern' | 'legacy';
  /** The upstream's `server/discover` result (JSON) for a modern verdict; absent for legacy. */
  readonly discover?: object;
  /** When the probe ran (ISO-8601); a legacy verdict is trusted only for `broker.legacyVerdictMaxAgeMs` after it. */
  readonly at: string;
}
