/**
 * The durable store: everything the broker must remember across restarts sits behind this one
 * interface (DESIGN.md "Scale"): tool pins and approvals now; proposals, tasks and budgets later.
 * The default is SQLite in `broker.dataDir` ({@link SqliteStore}); a PostgreSQL store can
 * replace it for several instances, so every method is async and each is one small atomic step.
 *
 * Keys are advertised tool names (what `mcp-broker approve <tool>` takes) and principal names
 * (`local` for the stdio client; {@link EVERY_PRINCIPAL} for a decision that covers everyone).
 * Times are ISO-8601 strings.
 */

/** The principal name of a decision that covers every principal. */
export const EVERY_PRINCIPAL = '*';

/** The pinned definition of one tool (rug-pull protection; issue 3 §1). */
export interface ToolPin {
  /** Advertised tool name. */
  readonly tool: string;
  /** sha256 of the approved definition (`toolHash` in `upstream/roster.ts`). */
  readonly hash: string;
  readonly pinnedAt: string;
  /** A different definition seen since, waiting for `mcp-broker approve`; absent when none. */
  readonly pendingHash?: string;
  readonly pendingSince?: string;
}

/** How a definition compares with its pin: first sight (now pinned), the same, or changed. */
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
  /** The pin of `tool`, if any. */
  getPin(tool: string): Promise<ToolPin | undefined>;
  /**
   * Compares `hash` with the pin of `tool`: stores it when there is none (`new`), answers
   * `same`, or remembers it as the pending hash and answers `changed`. Never moves a pin.
   */
  observePin(tool: string, hash: string, at: string): PinState | Promise<PinState>;
  /**
   * Moves the pin of `tool` to `hash` (default: its pending hash) and clears the pending one.
   * Returns the new pin, or undefined when there is nothing to move it to.
   */
  repin(tool: string, at: string, hash?: string): Promise<ToolPin | undefined>;
  listPins(): Promise<ToolPin[]>;

  /** The decision that applies to `principal` for `tool`: its own, else the one for everyone. */
  getApproval(tool: string, principal: string): Approval | undefined | Promise<Approval | undefined>;
  /**
   * Stores a decision. One for {@link EVERY_PRINCIPAL} replaces every decision about the tool;
   * one for a principal replaces only that principal's.
   */
  setApproval(approval: Approval): Promise<void>;
  listApprovals(): Promise<Approval[]>;

  /** Whether `principal` has made its first (approved) call of `tool` (`policy.firstUse`). */
  hasUsed(tool: string, principal: string): boolean | Promise<boolean>;
  markUsed(tool: string, principal: string, at: string): Promise<void>;
  /** Forgets first uses of `tool` by `principal`, or by everyone with {@link EVERY_PRINCIPAL}. Returns how many. */
  clearUses(tool: string, principal: string): Promise<number>;

  /** Stores a new estate proposal (`estate__propose_change`; issue 4). */
  addProposal(proposal: Proposal): Promise<void>;
  getProposal(id: string): Promise<Proposal | undefined>;
  /** Newest first, at most `limit`, optionally only those with `status` and only those `principal` proposed. */
  listProposals(options: { status?: Proposal['status']; principal?: string; limit: number }): Promise<Proposal[]>;
  /** Marks a pending proposal applied; false when it was not pending (applied by someone else first). */
  markProposalApplied(id: string, at: string, by: string): Promise<boolean>;

  /** Closes the store; later calls reject. */
  close(): Promise<void>;
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
  readonly sessionId: string;
  readonly createdAt: string;
  readonly appliedAt?: string;
  /** Principal that applied it. */
  readonly appliedBy?: string;
}
