/**
 * The default {@link Store}: one SQLite file, `<broker.dataDir>/broker.sqlite` (schema default
 * `./data`), through `better-sqlite3`. WAL mode so the CLI (`mcp-broker approve`) can write while
 * a broker serves; a busy timeout instead of `SQLITE_BUSY` errors; every statement prepared once.
 * better-sqlite3 is synchronous; the async methods keep the interface open to PostgreSQL.
 */
import { accessSync, closeSync, constants, openSync, readSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { BrokerError, messageOf } from '../shared/errors.js';
import { makeFolderSync, probeFolderSync } from '../shared/make-folder.js';
import {
  EVERY_PRINCIPAL,
  SURFACES_KEPT,
  type Approval,
  type BrokerInstance,
  type TaskChange,
  type TaskRow,
  type TaskStatus,
  type EraVerdict,
  type ObservedTool,
  type PinState,
  type Proposal,
  type SeenTool,
  type Store,
  type ToolPin,
} from './store.js';
import type { ListKey } from './list-cursor.js';

/** File name of the store inside `broker.dataDir`. */
export const STORE_FILE = 'broker.sqlite';
/** How long a write waits for another process's lock, in ms. */
const BUSY_TIMEOUT_MS = 5_000;
/** Tables added since (instances, tasks, era_verdicts) are created when missing and need no migration: still 2. */
const SCHEMA_VERSION = 2;
/**
 * Rows after the key `@afterCreatedAt`, `@afterId` in `ORDER BY created_at DESC, id DESC` (the
 * next page of a newest-first list; list-cursor.ts): older, or as old with a smaller id.
 */
const AFTER_KEY = '(created_at < @afterCreatedAt OR (created_at = @afterCreatedAt AND id < @afterId))';

const SCHEMA = `
-- One pin per tool and principal; principal '${EVERY_PRINCIPAL}' is the default pin. definition is the
-- pinned definition as JSON (NULL only for a pin carried over from schema 1).
CREATE TABLE IF NOT EXISTS tool_pins (
  tool       TEXT NOT NULL,
  principal  TEXT NOT NULL,
  hash       TEXT NOT NULL,
  definition TEXT,
  pinned_at  TEXT NOT NULL,
  PRIMARY KEY (tool, principal)
);
-- The latest definition seen of each tool (what \`mcp-broker approve\` pins).
CREATE TABLE IF NOT EXISTS tool_seen (
  tool       TEXT PRIMARY KEY,
  hash       TEXT NOT NULL,
  definition TEXT NOT NULL,
  seen_at    TEXT NOT NULL
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
-- Broker processes and their heartbeats (a task's owner).
CREATE TABLE IF NOT EXISTS instances (
  id           TEXT PRIMARY KEY,
  host         TEXT NOT NULL,
  pid          INTEGER NOT NULL,
  started_at   TEXT NOT NULL,
  heartbeat_at TEXT NOT NULL
);
-- Calls run as durable tasks (src/tasks/). args and result are JSON, scrubbed. expires_at is
-- created_at + ttl_ms in ms since the epoch.
CREATE TABLE IF NOT EXISTS tasks (
  id            TEXT PRIMARY KEY,
  status        TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'parked', 'killed')),
  stopped_by    TEXT,
  owner         TEXT NOT NULL,
  principal     TEXT NOT NULL,
  unit          TEXT NOT NULL,
  session_id    TEXT NOT NULL,
  subject       TEXT NOT NULL,
  name          TEXT NOT NULL,
  args          TEXT NOT NULL,
  args_redacted INTEGER NOT NULL,
  result        TEXT,
  reason        TEXT,
  call_id       TEXT NOT NULL,
  approved_by   TEXT,
  record_owed   INTEGER NOT NULL DEFAULT 0,
  attempts      INTEGER NOT NULL DEFAULT 0,
  created_at    TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  ttl_ms        INTEGER NOT NULL,
  expires_at    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_by_principal ON tasks (principal, created_at);
CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (owner, status);
CREATE INDEX IF NOT EXISTS tasks_by_expiry ON tasks (expires_at);
CREATE INDEX IF NOT EXISTS tasks_by_status ON tasks (status, created_at);
-- The era each upstream was found to speak, per definition (upstream/era-memory.ts). Added
-- without a schema version bump: a build that does not know it never reads it.
CREATE TABLE IF NOT EXISTS era_verdicts (
  upstream        TEXT PRIMARY KEY,
  definition_hash TEXT NOT NULL,
  era             TEXT NOT NULL CHECK (era IN ('modern', 'legacy')),
  discover        TEXT,
  at              TEXT NOT NULL
);
-- The upstreams' server/discover surface per set of upstream definitions (upstream/surface.ts).
-- Added without a schema version bump, as era_verdicts.
CREATE TABLE IF NOT EXISTS surfaces (
  key     TEXT PRIMARY KEY,
  surface TEXT NOT NULL,
  at      TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS first_uses (
  tool      TEXT NOT NULL,
  principal TEXT NOT NULL,
  at        TEXT NOT NULL,
  PRIMARY KEY (tool, principal)
);
-- Secrets the broker makes for itself (the key that seals approval states) and the one-time ids
-- spent (approval states' nonces, kept until they expire). Added without a schema version bump:
-- a build that does not know them never reads them.
CREATE TABLE IF NOT EXISTS secrets (
  name       TEXT PRIMARY KEY,
  value      BLOB NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS spent_once (
  id         TEXT PRIMARY KEY,
  expires_at TEXT NOT NULL
);
`;

/**
 * Schema 1 → 2: a schema-1 pin (one per tool, a digest of fewer fields, no definition) becomes
 * the default pin, without a definition; its pending hash is dropped (nothing to list or pin).
 */
const MIGRATE_1_TO_2 = `
INSERT INTO tool_pins (tool, principal, hash, definition, pinned_at) SELECT tool, '${EVERY_PRINCIPAL}', hash, NULL, pinned_at FROM pins;
DROP TABLE pins;
`;

/** SQLite's messages for a file it cannot open, one that is not a database, and one it may not write. */
const SQLITE_CANTOPEN = 'unable to open database file';
const SQLITE_NOTADB = 'file is not a database';
const SQLITE_READONLY = 'attempt to write a readonly database';
/** The start of every SQLite database file, the size of its header, and where `user_version` is in it (4 bytes, big-endian). */
const SQLITE_MAGIC = Buffer.from('SQLite format 3\0', 'latin1');
const SQLITE_HEADER_BYTES = 100;
const USER_VERSION_OFFSET = 60;

/** Throws when a store's `user_version` is newer than {@link SCHEMA_VERSION}. */
function checkSchemaVersion(version: number): void {
  if (version > SCHEMA_VERSION) throw new Error(`store schema version ${version} is newer than this build understands (${SCHEMA_VERSION})`);
}

/**
 * The file-backed stores open in this process, closed by one `exit` listener when the process
 * exits without closing them (a refused start's `process.exit(2)`, a signal during start, an
 * uncaught exception): SQLite then checkpoints and removes the `-wal` and `-shm` files, as a
 * clean stop does, instead of leaving them beside the store.
 */
const openStores = new Set<Database.Database>();
let exitHookInstalled = false;

function closeAtExit(db: Database.Database): void {
  openStores.add(db);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const open of openStores) closeQuietly(open);
    openStores.clear();
  });
}

/** Closes `db` when it is open; a close that fails (the process is refusing the store anyway) is ignored. */
function closeQuietly(db: Database.Database | undefined): void {
  try {
    if (db?.open) db.close();
  } catch {
    // Nothing more can be done for a store being refused.
  }
}

function canAccess(path: string, mode: number): boolean {
  try {
    accessSync(path, mode);
    return true;
  } catch {
    return false;
  }
}

/** The first {@link SQLITE_HEADER_BYTES} of the regular file `file` (fewer when it is shorter); throws {@link SQLITE_CANTOPEN} when it cannot be read. */
function readHeader(file: string): Buffer {
  const header = Buffer.alloc(SQLITE_HEADER_BYTES);
  let read = 0;
  let fd: number | undefined;
  try {
    fd = openSync(file, constants.O_RDONLY);
    for (;;) {
      const n = readSync(fd, header, read, header.length - read, read);
      read += n;
      if (n === 0 || read === header.length) break;
    }
  } catch (err) {
    throw new Error(SQLITE_CANTOPEN, { cause: err });
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  return header.subarray(0, read);
}

interface PinRow {
  tool: string;
  principal: string;
  hash: string;
  definition: string | null;
  pinned_at: string;
}

interface SeenRow {
  tool: string;
  hash: string;
  definition: string;
  seen_at: string;
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
    /** The pin that applies to a tool for a principal (undefined: none). */
    pins: new PairCache<PinRow | undefined>(),
    seen: new Map<string, SeenRow | undefined>(),
    approvals: new PairCache<Approval | undefined>(),
    uses: new PairCache<boolean>(),
  };

  /**
   * Opens (creating when needed) the store in `dataDir`, or an in-memory one for `:memory:`.
   * Throws {@link BrokerError} `store_unavailable` when the file cannot be opened, is not a
   * database, or is of a newer schema; a store refused is closed again and left as it was (its
   * schema version is read before anything is written, WAL mode only once it is judged),
   * with no `-wal`, `-shm` or `-journal` file beside it.
   */
  static open(dataDir: string): SqliteStore {
    const file = dataDir === ':memory:' ? ':memory:' : join(dataDir, STORE_FILE);
    return SqliteStore.connect(file, () => {
      if (file !== ':memory:') makeFolderSync(dirname(file));
      return new Database(file, { timeout: BUSY_TIMEOUT_MS });
    });
  }

  /**
   * Opens the store in `dataDir` as {@link open} does (its schema version judged before anything
   * is written, the same `store_unavailable` refusals) when its file exists; undefined when it
   * does not, with nothing created: no folder, no file. For commands that only read or refuse
   * (`mcp-broker approvals list`, `approve` of an unknown tool), which must leave no state behind.
   * A `:memory:` store is always opened.
   */
  static openIfPresent(dataDir: string): SqliteStore | undefined {
    if (dataDir === ':memory:') return SqliteStore.open(dataDir);
    const file = join(dataDir, STORE_FILE);
    if (!SqliteStore.present(file)) return undefined;
    try {
      // Opened without creating: a file removed since the look is not made again.
      return SqliteStore.connect(file, () => new Database(file, { timeout: BUSY_TIMEOUT_MS, fileMustExist: true }));
    } catch (err) {
      if (!SqliteStore.present(file)) return undefined;
      throw err;
    }
  }

  /** Whether `file` exists; a path that cannot be looked at (a file where a folder should be, no permission) is `store_unavailable`. */
  private static present(file: string): boolean {
    try {
      statSync(file);
      return true;
    } catch (err) {
      // Only a missing entry is "not there": ENOTDIR is a file where a folder should be (Node 24's
      // `throwIfNoEntry: false` answers undefined for it too, Node 20's throws; judged alike here).
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw new BrokerError('store_unavailable', `cannot open the store ${file}: ${messageOf(err)}`, { cause: err });
    }
  }

  /** The store over the connection `connect` makes; a store refused is closed again and reported as `store_unavailable`. */
  private static connect(file: string, connect: () => Database.Database): SqliteStore {
    let db: Database.Database | undefined;
    try {
      db = connect();
      const store = new SqliteStore(db);
      if (file !== ':memory:') closeAtExit(db);
      return store;
    } catch (err) {
      closeQuietly(db);
      throw new BrokerError('store_unavailable', `cannot open the store ${file}: ${messageOf(err)}`, { cause: err });
    }
  }

  /**
   * What {@link open} would refuse for `dataDir`, found without opening the store or leaving
   * anything behind (`mcp-broker check`; even a read-only open leaves `-wal` and `-shm` files
   * beside a store no broker has open). Throws the `store_unavailable` error `open` throws, with
   * the message SQLite gives there, for: a folder that cannot be made (made and removed again when
   * missing: the `mkdir` error); a folder this user cannot write, or a store file it cannot read
   * (`unable to open database file`) or write (`attempt to write a readonly database`); a file
   * whose header is not SQLite's (`file is not a database`); a newer schema (the header's
   * `user_version`). Damage past the 100-byte header is not looked for.
   */
  static probe(dataDir: string): void {
    if (dataDir === ':memory:') return;
    const file = join(dataDir, STORE_FILE);
    try {
      // A folder made (and removed) just now would hold a new store.
      if (!probeFolderSync(dirname(file))) return;
      const folderWritable = canAccess(dirname(file), constants.W_OK | constants.X_OK);
      const stat = statSync(file, { throwIfNoEntry: false });
      if (!stat) {
        if (!folderWritable) throw new Error(SQLITE_CANTOPEN);
        return;
      }
      // Not opened: opening a FIFO or a device has effects of its own.
      if (!stat.isFile()) throw new Error(SQLITE_CANTOPEN);
      const header = readHeader(file);
      // An empty file is an empty database.
      if (header.length > 0 && (header.length < SQLITE_HEADER_BYTES || !header.subarray(0, SQLITE_MAGIC.length).equals(SQLITE_MAGIC))) {
        throw new Error(SQLITE_NOTADB);
      }
      // The journal files are made beside the store.
      if (!folderWritable || !canAccess(file, constants.W_OK)) throw new Error(SQLITE_READONLY);
      checkSchemaVersion(header.length > 0 ? header.readUInt32BE(USER_VERSION_OFFSET) : 0);
    } catch (err) {
      throw new BrokerError('store_unavailable', `cannot open the store ${file}: ${messageOf(err)}`, { cause: err });
    }
  }

  private constructor(db: Database.Database) {
    this.db = db;
    // Read and judged before anything is written: a store of a newer schema (or not a database at
    // all) is refused as it was found. The two settings below belong to this connection only.
    checkSchemaVersion(db.pragma('user_version', { simple: true }) as number);
    // Then WAL mode (written into the file's header), before the schema's transaction: a store
    // created here must not run its first transaction in rollback-journal mode, where a second
    // connection opened meanwhile can keep the switch from happening at all (the pragma then
    // answers the old mode, and every later write waits on readers; an upstream's restart in
    // test/e2e/lifecycle.test.ts F08 missed its list_changed so).
    if (db.name !== ':memory:') db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
    db.transaction(() => {
      // Read again under the write lock: another process may have migrated meanwhile.
      const from = db.pragma('user_version', { simple: true }) as number;
      db.exec(SCHEMA);
      // Columns added since the table was made: added when missing (a build that does not know them never reads them).
      const columns = db.prepare<[], { name: string }>('PRAGMA table_info(tasks)').all().map((c) => c.name);
      if (!columns.includes('record_owed')) db.exec('ALTER TABLE tasks ADD COLUMN record_owed INTEGER NOT NULL DEFAULT 0');
      if (!columns.includes('attempts')) db.exec('ALTER TABLE tasks ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0');
      db.exec('CREATE INDEX IF NOT EXISTS tasks_owing_records ON tasks (created_at) WHERE record_owed = 1');
      const legacy = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pins'").get();
      if (from < 2 && legacy) db.exec(MIGRATE_1_TO_2);
      db.pragma(`user_version = ${SCHEMA_VERSION}`);
    }).immediate();
    this.stmt = {
      dataVersion: db.prepare<[], number>('PRAGMA data_version').pluck(),
      getPin: db.prepare<[string, string, string], PinRow>(
        // The principal's own pin first, then the default one.
        `SELECT * FROM tool_pins WHERE tool = ? AND principal IN (?, '${EVERY_PRINCIPAL}') ORDER BY principal = ? DESC LIMIT 1`,
      ),
      insertDefaultPin: db.prepare<[string, string, string, string, string]>(
        `INSERT INTO tool_pins (tool, principal, hash, definition, pinned_at) SELECT ?, '${EVERY_PRINCIPAL}', ?, ?, ?
         WHERE NOT EXISTS (SELECT 1 FROM tool_pins WHERE tool = ?)`,
      ),
      putPin: db.prepare<[string, string, string, string, string]>(
        `INSERT INTO tool_pins (tool, principal, hash, definition, pinned_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (tool, principal) DO UPDATE SET hash = excluded.hash, definition = excluded.definition, pinned_at = excluded.pinned_at`,
      ),
      upgradePin: db.prepare<[string, string, string, string, string]>(
        'UPDATE tool_pins SET hash = ?, definition = ? WHERE tool = ? AND principal = ? AND hash = ? AND definition IS NULL',
      ),
      dropOwnPins: db.prepare<[string]>(`DELETE FROM tool_pins WHERE tool = ? AND principal <> '${EVERY_PRINCIPAL}'`),
      listPins: db.prepare<[], PinRow>('SELECT * FROM tool_pins ORDER BY tool, principal'),
      getSeen: db.prepare<[string], SeenRow>('SELECT * FROM tool_seen WHERE tool = ?'),
      putSeen: db.prepare<[string, string, string, string]>(
        `INSERT INTO tool_seen (tool, hash, definition, seen_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (tool) DO UPDATE SET hash = excluded.hash, definition = excluded.definition, seen_at = excluded.seen_at`,
      ),
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
      getSecret: db.prepare<[string], Buffer>('SELECT value FROM secrets WHERE name = ?').pluck(),
      addSecret: db.prepare<[string, Buffer, string]>('INSERT INTO secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING'),
      forgetSpent: db.prepare<[string]>('DELETE FROM spent_once WHERE expires_at < ?'),
      spend: db.prepare<[string, string]>('INSERT INTO spent_once (id, expires_at) VALUES (?, ?) ON CONFLICT DO NOTHING'),
      addProposal: db.prepare<[string, string, string, string, string, string | null, string, string, string]>(
        `INSERT INTO proposals (id, path, kind, body, rationale, base_sha256, status, principal, session_id, created_at)
         VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)`,
      ),
      getProposal: db.prepare<[string], ProposalRow>('SELECT * FROM proposals WHERE id = ?'),
      getEra: db.prepare<[string], EraRow>('SELECT * FROM era_verdicts WHERE upstream = ?'),
      putEra: db.prepare<[string, string, string, string | null, string]>(
        `INSERT INTO era_verdicts (upstream, definition_hash, era, discover, at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (upstream) DO UPDATE SET definition_hash = excluded.definition_hash, era = excluded.era, discover = excluded.discover, at = excluded.at`,
      ),
      forgetEra: db.prepare<[string]>('DELETE FROM era_verdicts WHERE upstream = ?'),
      getSurface: db.prepare<[string], { surface: string }>('SELECT surface FROM surfaces WHERE key = ?'),
      putSurface: db.prepare<[string, string, string]>(
        'INSERT INTO surfaces (key, surface, at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET surface = excluded.surface, at = excluded.at',
      ),
      trimSurfaces: db.prepare<[number]>('DELETE FROM surfaces WHERE key NOT IN (SELECT key FROM surfaces ORDER BY at DESC, key LIMIT ?)'),
      applyProposal: db.prepare<[string, string, string]>(
        "UPDATE proposals SET status = 'applied', applied_at = ?, applied_by = ? WHERE id = ? AND status = 'pending'",
      ),
      heartbeat: db.prepare<[string, string, number, string, string]>(
        `INSERT INTO instances (id, host, pid, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`,
      ),
      listInstances: db.prepare<[], InstanceRow>('SELECT * FROM instances ORDER BY started_at, id'),
      deleteInstance: db.prepare<[string]>('DELETE FROM instances WHERE id = ?'),
      killTasksOf: db.prepare<[string, string, string]>(
        "UPDATE tasks SET status = 'killed', stopped_by = 'system', reason = ?, updated_at = ? WHERE owner = ? AND status = 'running'",
      ),
      addTask: db.prepare<[TaskInsert]>(
        `INSERT INTO tasks (id, status, stopped_by, owner, principal, unit, session_id, subject, name, args, args_redacted, result, reason, call_id, approved_by,
           record_owed, attempts, created_at, updated_at, ttl_ms, expires_at)
         VALUES (@id, @status, @stoppedBy, @owner, @principal, @unit, @sessionId, @subject, @name, @args, @argsRedacted, @result, @reason, @callId, @approvedBy,
           @recordOwed, @attempts, @createdAt, @updatedAt, @ttlMs, @expiresAt)`,
      ),
      getTask: db.prepare<[string, number], TaskSqlRow>('SELECT * FROM tasks WHERE id = ? AND expires_at > ?'),
      deleteExpiredTasks: db.prepare<[number]>('DELETE FROM tasks WHERE expires_at <= ? AND record_owed = 0'),
      listOwedRecords: db.prepare<[number, number], TaskSqlRow>(
        "SELECT * FROM tasks WHERE record_owed = 1 AND (status IN ('failed', 'killed') OR (expires_at <= ? AND status != 'running')) ORDER BY created_at, rowid LIMIT ?",
      ),
      oweRecord: db.prepare<[string]>('UPDATE tasks SET record_owed = 1 WHERE id = ?'),
      claimRecord: db.prepare<[string]>('UPDATE tasks SET record_owed = 0 WHERE id = ? AND record_owed = 1'),
    };
  }

  async heartbeat(i: BrokerInstance): Promise<void> {
    this.stmt.heartbeat.run(i.id, i.host, i.pid, i.startedAt, i.heartbeatAt);
  }

  async listInstances(): Promise<BrokerInstance[]> {
    return this.stmt.listInstances.all().map((r) => ({ id: r.id, host: r.host, pid: r.pid, startedAt: r.started_at, heartbeatAt: r.heartbeat_at }));
  }

  async reapInstance(id: string, at: string): Promise<number> {
    return this.db
      .transaction(() => {
        const killed = this.stmt.killTasksOf.run('the broker instance running it ended before it finished', at, id).changes;
        this.stmt.deleteInstance.run(id);
        return killed;
      })
      .immediate();
  }

  async addTask(t: TaskRow): Promise<void> {
    this.stmt.addTask.run({
      ...t,
      args: JSON.stringify(t.args ?? null),
      argsRedacted: t.argsRedacted ? 1 : 0,
      recordOwed: t.recordOwed ? 1 : 0,
      attempts: t.attempts ?? 0,
      result: t.result === null || t.result === undefined ? null : JSON.stringify(t.result),
      expiresAt: Date.parse(t.createdAt) + t.ttlMs,
    });
  }

  async getTask(id: string, now: number): Promise<TaskRow | undefined> {
    const row = this.stmt.getTask.get(id, now);
    return row ? toTask(row) : undefined;
  }

  async updateTask(id: string, from: readonly TaskStatus[], change: TaskChange): Promise<boolean> {
    if (!from.length) return false;
    const sets = ['status = @status', 'updated_at = @updatedAt'];
    if (change.stoppedBy !== undefined) sets.push('stopped_by = @stoppedBy');
    if (change.result !== undefined) sets.push('result = @result');
    if (change.reason !== undefined) sets.push('reason = @reason');
    if (change.owner !== undefined) sets.push('owner = @owner');
    if (change.approvedBy !== undefined) sets.push('approved_by = @approvedBy');
    if (change.callId !== undefined) sets.push('call_id = @callId');
    if (change.recordOwed !== undefined) sets.push('record_owed = @recordOwed');
    if (change.attempts !== undefined) sets.push('attempts = @attempts');
    const statuses = from.map((_, i) => `@from${i}`).join(', ');
    const params: Record<string, unknown> = {
      id,
      status: change.status,
      updatedAt: change.updatedAt,
      stoppedBy: change.stoppedBy ?? null,
      result: change.result === undefined || change.result === null ? null : JSON.stringify(change.result),
      reason: change.reason ?? null,
      owner: change.owner ?? null,
      approvedBy: change.approvedBy ?? null,
      callId: change.callId ?? null,
      recordOwed: change.recordOwed ? 1 : 0,
      attempts: change.attempts ?? 0,
    };
    from.forEach((s, i) => (params[`from${i}`] = s));
    // A handful of shapes; prepared per call (better-sqlite3 keeps no statement cache of its own, but these are rare writes).
    return this.db.prepare(`UPDATE tasks SET ${sets.join(', ')} WHERE id = @id AND status IN (${statuses})`).run(params).changes === 1;
  }

  async listTasks(options: { principal?: string; status?: TaskStatus; approved?: boolean; after?: ListKey; now: number; limit: number }): Promise<TaskRow[]> {
    const { principal, status, approved, after, now, limit } = options;
    // Every filter in the query, before its LIMIT: filtered after it, any `limit` newer rows (one
    // principal's tasks, of any status) hid the rest, parked calls waiting for approval among them.
    const where = ['expires_at > @now'];
    if (principal !== undefined) where.push('principal = @principal');
    if (status !== undefined) where.push('status = @status');
    if (approved !== undefined) where.push(approved ? 'approved_by IS NOT NULL' : 'approved_by IS NULL');
    if (after !== undefined) where.push(AFTER_KEY);
    const sql = `SELECT * FROM tasks WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT @limit`;
    let query = this.taskLists.get(sql);
    if (!query) this.taskLists.set(sql, (query = this.db.prepare<[Record<string, unknown>], TaskSqlRow>(sql)));
    return query
      .all({
        now,
        limit,
        ...(principal !== undefined ? { principal } : {}),
        ...(status !== undefined ? { status } : {}),
        ...(after !== undefined ? { afterCreatedAt: after.createdAt, afterId: after.id } : {}),
      })
      .map(toTask);
  }
  /** The prepared statements of {@link listTasks}, one per shape of filter (at most thirty-two). */
  private readonly taskLists = new Map<string, Database.Statement<[Record<string, unknown>], TaskSqlRow>>();

  async deleteExpiredTasks(now: number): Promise<number> {
    return this.stmt.deleteExpiredTasks.run(now).changes;
  }

  async listOwedRecords(now: number, limit: number): Promise<TaskRow[]> {
    return this.stmt.listOwedRecords.all(now, limit).map(toTask);
  }

  async setRecordOwed(id: string, owed: boolean): Promise<boolean> {
    return (owed ? this.stmt.oweRecord : this.stmt.claimRecord).run(id).changes === 1;
  }

  async getPin(tool: string, principal: string): Promise<ToolPin | undefined> {
    const row = this.stmt.getPin.get(tool, principal, principal);
    return row ? toPin(row) : undefined;
  }

  observePin(tool: string, principal: string, seen: ObservedTool, at: string): PinState {
    // The common case, a known tool unchanged (or changed and known so), is two reads (from memory) and no write lock.
    const cache = this.fresh();
    let pin = cache.pins.get(tool, principal);
    if (pin === MISSING) cache.pins.set(tool, principal, (pin = this.stmt.getPin.get(tool, principal, principal)));
    let last = cache.seen.get(tool);
    if (last === undefined && !cache.seen.has(tool)) cache.seen.set(tool, (last = this.stmt.getSeen.get(tool)));
    if (pin && last?.hash === seen.hash) {
      if (pin.hash === seen.hash) return 'same';
      // Changed and already remembered: no write, unless a schema-1 pin may be upgraded.
      if (pin.definition !== null || seen.legacyHash !== pin.hash) return 'changed';
    }
    this.invalidate();
    return this.db
      .transaction((): PinState => {
        const json = JSON.stringify(seen.definition);
        if (this.stmt.getSeen.get(tool)?.hash !== seen.hash) this.stmt.putSeen.run(tool, seen.hash, json, at);
        if (this.stmt.insertDefaultPin.run(tool, seen.hash, json, at, tool).changes === 1) return 'new';
        const row = this.stmt.getPin.get(tool, principal, principal)!;
        if (row.hash === seen.hash) return 'same';
        if (row.definition === null && seen.legacyHash === row.hash) {
          this.stmt.upgradePin.run(seen.hash, json, tool, row.principal, row.hash);
          return 'same';
        }
        return 'changed';
      })
      .immediate();
  }

  async getSeen(tool: string): Promise<SeenTool | undefined> {
    const row = this.stmt.getSeen.get(tool);
    return row ? { tool: row.tool, hash: row.hash, definition: JSON.parse(row.definition) as object, seenAt: row.seen_at } : undefined;
  }

  async repin(tool: string, principal: string, at: string, to?: ObservedTool): Promise<ToolPin | undefined> {
    this.invalidate();
    return this.db
      .transaction((): ToolPin | undefined => {
        const target = to ? { hash: to.hash, definition: JSON.stringify(to.definition) } : this.stmt.getSeen.get(tool);
        if (!target) return undefined;
        const dropped = principal === EVERY_PRINCIPAL ? this.stmt.dropOwnPins.run(tool).changes : 0;
        const current = this.stmt.getPin.get(tool, principal, principal);
        if (!dropped && current?.hash === target.hash && current.definition !== null) return undefined;
        this.stmt.putPin.run(tool, principal, target.hash, target.definition, at);
        return toPin(this.stmt.getPin.get(tool, principal, principal)!);
      })
      .immediate();
  }

  async listPins(): Promise<ToolPin[]> {
    return this.stmt.listPins.all().map(toPin);
  }

  getApproval(tool: string, principal: string): Approval | undefined {
    const approvals = this.fresh().approvals;
    let found = approvals.get(tool, principal);
    if (found === MISSING) approvals.set(tool, principal, (found = this.stmt.getApproval.get(tool, principal, principal)));
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
    let used = uses.get(tool, principal);
    if (used === MISSING) uses.set(tool, principal, (used = this.stmt.hasUsed.get(tool, principal) !== undefined));
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

  async secret(name: string, init: Uint8Array, at: string): Promise<Uint8Array> {
    return this.db
      .transaction((): Uint8Array => {
        this.stmt.addSecret.run(name, Buffer.from(init), at);
        return new Uint8Array(this.stmt.getSecret.get(name)!);
      })
      .immediate();
  }

  async spendOnce(id: string, expiresAt: string, at: string): Promise<boolean> {
    return this.db
      .transaction((): boolean => {
        this.stmt.forgetSpent.run(at);
        return this.stmt.spend.run(id, expiresAt).changes === 1;
      })
      .immediate();
  }

  async addProposal(p: Proposal): Promise<void> {
    this.stmt.addProposal.run(p.id, p.path, p.kind, p.body, p.rationale, p.baseSha256, p.principal, p.sessionId, p.createdAt);
  }

  async getProposal(id: string): Promise<Proposal | undefined> {
    const row = this.stmt.getProposal.get(id);
    return row ? toProposal(row) : undefined;
  }

  async listProposals(options: { status?: Proposal['status']; principal?: string; after?: ListKey; limit: number }): Promise<Proposal[]> {
    const { status, principal, after, limit } = options;
    const where = ['1'];
    if (principal !== undefined) where.push('principal = @principal');
    if (status) where.push('status = @status');
    if (after !== undefined) where.push(AFTER_KEY);
    const sql = `SELECT * FROM proposals WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT @limit`;
    let query = this.proposalLists.get(sql);
    if (!query) this.proposalLists.set(sql, (query = this.db.prepare<[Record<string, unknown>], ProposalRow>(sql)));
    return query
      .all({
        limit,
        ...(principal !== undefined ? { principal } : {}),
        ...(status ? { status } : {}),
        ...(after !== undefined ? { afterCreatedAt: after.createdAt, afterId: after.id } : {}),
      })
      .map(toProposal);
  }
  /** The prepared statements of {@link listProposals}, one per shape of filter (at most eight). */
  private readonly proposalLists = new Map<string, Database.Statement<[Record<string, unknown>], ProposalRow>>();

  async markProposalApplied(id: string, at: string, by: string): Promise<boolean> {
    return this.stmt.applyProposal.run(at, by, id).changes === 1;
  }

  async getEraVerdict(upstream: string): Promise<EraVerdict | undefined> {
    const row = this.stmt.getEra.get(upstream);
    if (!row) return undefined;
    return {
      upstream: row.upstream,
      definitionHash: row.definition_hash,
      era: row.era,
      ...(row.discover !== null ? { discover: JSON.parse(row.discover) as object } : {}),
      at: row.at,
    };
  }

  async setEraVerdict(v: EraVerdict): Promise<void> {
    this.stmt.putEra.run(v.upstream, v.definitionHash, v.era, v.discover === undefined ? null : JSON.stringify(v.discover), v.at);
  }

  async forgetEraVerdict(upstream: string): Promise<boolean> {
    return this.stmt.forgetEra.run(upstream).changes === 1;
  }

  async getSurface(key: string): Promise<object | undefined> {
    const row = this.stmt.getSurface.get(key);
    return row ? (JSON.parse(row.surface) as object) : undefined;
  }

  async setSurface(key: string, surface: object, at: string): Promise<void> {
    this.db.transaction(() => {
      this.stmt.putSurface.run(key, JSON.stringify(surface), at);
      this.stmt.trimSurfaces.run(SURFACES_KEPT);
    })();
  }

  /** Closes the database (its `-wal` and `-shm` files go when it was the last connection). Idempotent; run anyway when the process exits. */
  async close(): Promise<void> {
    openStores.delete(this.db);
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
    this.cache.seen.clear();
    this.cache.approvals.clear();
    this.cache.uses.clear();
  }
}

/** What {@link PairCache.get} answers for a pair it holds no value for (`undefined` is a value: "no row"). */
const MISSING: unique symbol = Symbol('missing');

/**
 * Values by (tool, principal): a map of maps, so a lookup builds no key string (three a call in
 * the judge; issue 19). Any two strings are a pair, U+0000 in them included.
 */
class PairCache<V> {
  private readonly byTool = new Map<string, Map<string, V>>();

  get(tool: string, principal: string): V | typeof MISSING {
    const byPrincipal = this.byTool.get(tool);
    if (byPrincipal === undefined) return MISSING;
    const value = byPrincipal.get(principal);
    return value !== undefined || byPrincipal.has(principal) ? (value as V) : MISSING;
  }

  set(tool: string, principal: string, value: V): void {
    let byPrincipal = this.byTool.get(tool);
    if (byPrincipal === undefined) this.byTool.set(tool, (byPrincipal = new Map()));
    byPrincipal.set(principal, value);
  }

  clear(): void {
    this.byTool.clear();
  }
}

interface InstanceRow {
  id: string;
  host: string;
  pid: number;
  started_at: string;
  heartbeat_at: string;
}

type TaskInsert = Omit<TaskRow, 'args' | 'argsRedacted' | 'result' | 'recordOwed' | 'attempts'> & {
  args: string;
  argsRedacted: number;
  result: string | null;
  recordOwed: number;
  attempts: number;
  expiresAt: number;
};

interface TaskSqlRow {
  id: string;
  status: TaskStatus;
  stopped_by: string | null;
  owner: string;
  principal: string;
  unit: string;
  session_id: string;
  subject: string;
  name: string;
  args: string;
  args_redacted: number;
  result: string | null;
  reason: string | null;
  call_id: string;
  approved_by: string | null;
  record_owed: number;
  attempts: number;
  created_at: string;
  updated_at: string;
  ttl_ms: number;
}

function toTask(r: TaskSqlRow): TaskRow {
  return {
    id: r.id,
    status: r.status,
    // As stored: a value this build does not know reads as no attribution (seed 001's "unrecognized source").
    stoppedBy: r.stopped_by === 'user' || r.stopped_by === 'parent' || r.stopped_by === 'system' ? r.stopped_by : null,
    owner: r.owner,
    principal: r.principal,
    unit: r.unit,
    sessionId: r.session_id,
    subject: r.subject,
    name: r.name,
    args: JSON.parse(r.args) as unknown,
    argsRedacted: r.args_redacted === 1,
    result: r.result === null ? null : (JSON.parse(r.result) as unknown),
    reason: r.reason,
    callId: r.call_id,
    approvedBy: r.approved_by,
    recordOwed: r.record_owed === 1,
    attempts: r.attempts,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    ttlMs: r.ttl_ms,
  };
}

interface EraRow {
  upstream: string;
  definition_hash: string;
  era: 'modern' | 'legacy';
  discover: string | null;
  at: string;
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
  return {
    tool: row.tool,
    principal: row.principal,
    hash: row.hash,
    ...(row.definition !== null ? { definition: JSON.parse(row.definition) as object } : {}),
    pinnedAt: row.pinned_at,
  };
}
