/**
 * The default {@link Store}: one SQLite file, `<broker.dataDir>/broker.sqlite` (schema default
 * `./data`), through `better-sqlite3`. WAL mode so the CLI (`mcp-broker approve`) can write while
 * a broker serves; a busy timeout instead of `SQLITE_BUSY` errors; every statement prepared once.
 * better-sqlite3 is synchronous; the async methods keep the interface open to PostgreSQL.
 */
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { BrokerError, messageOf } from '../shared/errors.js';
import { EVERY_PRINCIPAL, type Approval, type PinState, type Proposal, type Store, type ToolPin } from './store.js';

/** File name of the store inside `broker.dataDir`. */
export const STORE_FILE = 'broker.sqlite';
/** How long a write waits for another process's lock, in ms. */
const BUSY_TIMEOUT_MS = 5_000;
const SCHEMA_VERSION = 1;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS pins (
  tool          TEXT PRIMARY KEY,
  hash          TEXT NOT NULL,
  pinned_at     TEXT NOT NULL,
  pending_hash  TEXT,
  pending_since TEXT
);
CREATE TABLE IF NOT EXISTS approvals (
  tool      TEXT NOT NULL,
  principal TEXT NOT NULL,
  decision  TEXT NOT NULL CHECK (decision IN ('approved', 'revoked')),
  at        TEXT NOT NULL,
  by        TEXT NOT NULL,
  PRIMARY KEY (tool, principal)
);
-- Estate proposals (issue 4, src/builtins/estate/).
CREATE TABLE IF NOT EXISTS proposals (
  id          TEXT PRIMARY KEY,
  path        TEXT NOT NULL,
  kind        TEXT NOT NULL CHECK (kind IN ('content', 'diff')),
  body        TEXT NOT NULL,
  rationale   TEXT NOT NULL,
  base_sha256 TEXT,
  status      TEXT NOT NULL CHECK (status IN ('pending', 'applied')),
  principal   TEXT NOT NULL,
  session_id  TEXT NOT NULL,
  created_at  TEXT NOT NULL,
  applied_at  TEXT,
  applied_by  TEXT
);
-- A principal lists its own proposals (the estate relay's ownership rule).
CREATE INDEX IF NOT EXISTS proposals_by_principal ON proposals (principal, created_at);
CREATE TABLE IF NOT EXISTS first_uses (
  tool      TEXT NOT NULL,
  principal TEXT NOT NULL,
  at        TEXT NOT NULL,
  PRIMARY KEY (tool, principal)
);
`;

interface PinRow {
  tool: string;
  hash: string;
  pinned_at: string;
  pending_hash: string | null;
  pending_since: string | null;
}

export class SqliteStore implements Store {
  private readonly db: Database.Database;
  private readonly stmt;
  /**
   * The hot reads of every call (a pin, an approval, a first use), answered from memory while no
   * other connection has committed (`PRAGMA data_version`). That check is itself a read
   * transaction (file-lock syscalls, a few µs), so it runs once per event-loop turn: a commit by
   * another process (`mcp-broker approve`) is seen by every call the broker starts after it.
   * Our own writes clear the cache (they do not move our data_version). Issue 6.
   */
  private readonly cache = {
    version: -1,
    checked: false,
    pins: new Map<string, PinRow | undefined>(),
    approvals: new Map<string, Approval | undefined>(),
    uses: new Map<string, boolean>(),
  };

  /**
   * Opens (creating when needed) the store in `dataDir`, or an in-memory one for `:memory:`.
   * Throws {@link BrokerError} `store_unavailable` when the file cannot be opened.
   */
  static open(dataDir: string): SqliteStore {
    const file = dataDir === ':memory:' ? ':memory:' : join(dataDir, STORE_FILE);
    try {
      if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
      return new SqliteStore(new Database(file, { timeout: BUSY_TIMEOUT_MS }));
    } catch (err) {
      throw new BrokerError('store_unavailable', `cannot open the store ${file}: ${messageOf(err)}`, { cause: err });
    }
  }

  private constructor(db: Database.Database) {
    this.db = db;
    if (db.name !== ':memory:') db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > SCHEMA_VERSION) {
      throw new Error(`store schema version ${version} is newer than this build understands (${SCHEMA_VERSION})`);
    }
    db.exec(SCHEMA);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
    this.stmt = {
      dataVersion: db.prepare<[], number>('PRAGMA data_version').pluck(),
      getPin: db.prepare<[string], PinRow>('SELECT * FROM pins WHERE tool = ?'),
      insertPin: db.prepare<[string, string, string]>('INSERT INTO pins (tool, hash, pinned_at) VALUES (?, ?, ?) ON CONFLICT (tool) DO NOTHING'),
      setPending: db.prepare<[string, string, string, string]>(
        'UPDATE pins SET pending_hash = ?, pending_since = CASE WHEN pending_hash IS ? THEN pending_since ELSE ? END WHERE tool = ?',
      ),
      clearPending: db.prepare<[string]>('UPDATE pins SET pending_hash = NULL, pending_since = NULL WHERE tool = ?'),
      movePin: db.prepare<[string, string, string]>(
        `INSERT INTO pins (tool, hash, pinned_at) VALUES (?, ?, ?)
         ON CONFLICT (tool) DO UPDATE SET hash = excluded.hash, pinned_at = excluded.pinned_at, pending_hash = NULL, pending_since = NULL`,
      ),
      listPins: db.prepare<[], PinRow>('SELECT * FROM pins ORDER BY tool'),
      getApproval: db.prepare<[string, string, string], Approval>(
        // The principal's own decision first, then the one for everyone.
        `SELECT tool, principal, decision, at, by FROM approvals WHERE tool = ? AND principal IN (?, '${EVERY_PRINCIPAL}')
         ORDER BY principal = ? DESC LIMIT 1`,
      ),
      deleteApprovals: db.prepare<[string]>('DELETE FROM approvals WHERE tool = ?'),
      putApproval: db.prepare<[string, string, string, string, string]>(
        `INSERT INTO approvals (tool, principal, decision, at, by) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (tool, principal) DO UPDATE SET decision = excluded.decision, at = excluded.at, by = excluded.by`,
      ),
      listApprovals: db.prepare<[], Approval>('SELECT tool, principal, decision, at, by FROM approvals ORDER BY tool, principal'),
      hasUsed: db.prepare<[string, string], { one: number }>('SELECT 1 AS one FROM first_uses WHERE tool = ? AND principal = ?'),
      markUsed: db.prepare<[string, string, string]>('INSERT INTO first_uses (tool, principal, at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING'),
      clearUsesAll: db.prepare<[string]>('DELETE FROM first_uses WHERE tool = ?'),
      clearUsesOne: db.prepare<[string, string]>('DELETE FROM first_uses WHERE tool = ? AND principal = ?'),
      addProposal: db.prepare<[string, string, string, string, string, string | null, string, string, string]>(
        `INSERT INTO proposals (id, path, kind, body, rationale, base_sha256, status, principal, session_id, created_at)
         VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)`,
      ),
      getProposal: db.prepare<[string], ProposalRow>('SELECT * FROM proposals WHERE id = ?'),
      listProposals: db.prepare<[number], ProposalRow>('SELECT * FROM proposals ORDER BY created_at DESC, rowid DESC LIMIT ?'),
      listProposalsBy: db.prepare<[string, number], ProposalRow>('SELECT * FROM proposals WHERE status = ? ORDER BY created_at DESC, rowid DESC LIMIT ?'),
      listProposalsOf: db.prepare<[string, number], ProposalRow>('SELECT * FROM proposals WHERE principal = ? ORDER BY created_at DESC, rowid DESC LIMIT ?'),
      listProposalsOfBy: db.prepare<[string, string, number], ProposalRow>(
        'SELECT * FROM proposals WHERE principal = ? AND status = ? ORDER BY created_at DESC, rowid DESC LIMIT ?',
      ),
      applyProposal: db.prepare<[string, string, string]>(
        "UPDATE proposals SET status = 'applied', applied_at = ?, applied_by = ? WHERE id = ? AND status = 'pending'",
      ),
    };
  }

  async getPin(tool: string): Promise<ToolPin | undefined> {
    const row = this.stmt.getPin.get(tool);
    return row ? toPin(row) : undefined;
  }

  observePin(tool: string, hash: string, at: string): PinState {
    // The common case, a known tool unchanged, is one read (from memory) and no write lock.
    const pins = this.fresh().pins;
    let known = pins.get(tool);
    if (known === undefined && !pins.has(tool)) pins.set(tool, (known = this.stmt.getPin.get(tool)));
    if (known && known.hash === hash && known.pending_hash === null) return 'same';
    this.invalidate();
    return this.db.transaction((): PinState => {
      if (this.stmt.insertPin.run(tool, hash, at).changes === 1) return 'new';
      const row = this.stmt.getPin.get(tool)!;
      if (row.hash === hash) {
        if (row.pending_hash !== null) this.stmt.clearPending.run(tool);
        return 'same';
      }
      if (row.pending_hash !== hash) this.stmt.setPending.run(hash, hash, at, tool);
      return 'changed';
    }).immediate();
  }

  async repin(tool: string, at: string, hash?: string): Promise<ToolPin | undefined> {
    this.invalidate();
    return this.db.transaction((): ToolPin | undefined => {
      const target = hash ?? this.stmt.getPin.get(tool)?.pending_hash ?? undefined;
      if (!target) return undefined;
      this.stmt.movePin.run(tool, target, at);
      return toPin(this.stmt.getPin.get(tool)!);
    }).immediate();
  }

  async listPins(): Promise<ToolPin[]> {
    return this.stmt.listPins.all().map(toPin);
  }

  getApproval(tool: string, principal: string): Approval | undefined {
    const approvals = this.fresh().approvals;
    const key = `${tool}\u0000${principal}`;
    let found = approvals.get(key);
    if (found === undefined && !approvals.has(key)) approvals.set(key, (found = this.stmt.getApproval.get(tool, principal, principal)));
    return found;
  }

  async setApproval(a: Approval): Promise<void> {
    this.invalidate();
    this.db
      .transaction(() => {
        if (a.principal === EVERY_PRINCIPAL) this.stmt.deleteApprovals.run(a.tool);
        this.stmt.putApproval.run(a.tool, a.principal, a.decision, a.at, a.by);
      })
      .immediate();
  }

  async listApprovals(): Promise<Approval[]> {
    return this.stmt.listApprovals.all();
  }

  hasUsed(tool: string, principal: string): boolean {
    const uses = this.fresh().uses;
    const key = `${tool}\u0000${principal}`;
    let used = uses.get(key);
    if (used === undefined) uses.set(key, (used = this.stmt.hasUsed.get(tool, principal) !== undefined));
    return used;
  }

  async markUsed(tool: string, principal: string, at: string): Promise<void> {
    this.invalidate();
    this.stmt.markUsed.run(tool, principal, at);
  }

  async clearUses(tool: string, principal: string): Promise<number> {
    this.invalidate();
    const r = principal === EVERY_PRINCIPAL ? this.stmt.clearUsesAll.run(tool) : this.stmt.clearUsesOne.run(tool, principal);
    return r.changes;
  }

  async addProposal(p: Proposal): Promise<void> {
    this.stmt.addProposal.run(p.id, p.path, p.kind, p.body, p.rationale, p.baseSha256, p.principal, p.sessionId, p.createdAt);
  }

  async getProposal(id: string): Promise<Proposal | undefined> {
    const row = this.stmt.getProposal.get(id);
    return row ? toProposal(row) : undefined;
  }

  async listProposals(options: { status?: Proposal['status']; principal?: string; limit: number }): Promise<Proposal[]> {
    const { status, principal, limit } = options;
    const rows =
      principal === undefined
        ? status
          ? this.stmt.listProposalsBy.all(status, limit)
          : this.stmt.listProposals.all(limit)
        : status
          ? this.stmt.listProposalsOfBy.all(principal, status, limit)
          : this.stmt.listProposalsOf.all(principal, limit);
    return rows.map(toProposal);
  }

  async markProposalApplied(id: string, at: string, by: string): Promise<boolean> {
    return this.stmt.applyProposal.run(at, by, id).changes === 1;
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  /** The read cache, emptied first when another connection committed since the last look (once per turn). */
  private fresh(): SqliteStore['cache'] {
    const cache = this.cache;
    if (cache.checked) return cache;
    cache.checked = true;
    setImmediate(() => (cache.checked = false));
    const version = this.stmt.dataVersion.get() as number;
    if (version !== cache.version) {
      this.invalidate();
      cache.version = version;
    }
    return cache;
  }

  private invalidate(): void {
    this.cache.pins.clear();
    this.cache.approvals.clear();
    this.cache.uses.clear();
  }
}

interface ProposalRow {
  id: string;
  path: string;
  kind: Proposal['kind'];
  body: string;
  rationale: string;
  base_sha256: string | null;
  status: Proposal['status'];
  principal: string;
  session_id: string;
  created_at: string;
  applied_at: string | null;
  applied_by: string | null;
}

function toProposal(row: ProposalRow): Proposal {
  return {
    id: row.id,
    path: row.path,
    kind: row.kind,
    body: row.body,
    rationale: row.rationale,
    baseSha256: row.base_sha256,
    status: row.status,
    principal: row.principal,
    sessionId: row.session_id,
    createdAt: row.created_at,
    ...(row.applied_at ? { appliedAt: row.applied_at } : {}),
    ...(row.applied_by ? { appliedBy: row.applied_by } : {}),
  };
}

function toPin(row: PinRow): ToolPin {
  const pin: { -readonly [K in keyof ToolPin]: ToolPin[K] } = { tool: row.tool, hash: row.hash, pinnedAt: row.pinned_at };
  if (row.pending_hash !== null) {
    pin.pendingHash = row.pending_hash;
    pin.pendingSince = row.pending_since ?? undefined;
  }
  return pin;
}
