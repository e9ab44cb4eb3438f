/**
 * One broker per records file: an exclusive lock file `<path>.lock` beside the records file,
 * holding the pid of the broker that owns it. Two brokers appending to and rotating one file
 * without coordination would lose and tear records, so the second one is refused.
 *
 * The lock file appears atomically with its whole content (written to a private temporary file,
 * then hard-linked into place, which fails when the lock exists). A lock whose pid is not alive
 * is stale and taken over; so is one naming this very pid that this process does not hold (a pid
 * reused after a restart, as in a container where the broker is always pid 1). An empty or
 * unreadable lock file (a power loss before its data reached the disk) is stale too.
 *
 * A lock is released when its sink closes, and in any case when this process exits (`exit`: a
 * refused start's `process.exit(2)`, an uncaught exception, a signal that ends the process
 * through `process.exit`): a lock left naming a dead pid would refuse the next broker once that
 * pid is reused by another process. Only `SIGKILL` and a crash of Node itself leave one behind.
 */
import { randomUUID } from 'node:crypto';
import { linkSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { BrokerError } from '../shared/errors.js';

/** A held records lock. */
export interface RecordsLock {
  /** Removes the lock file if it is still ours. Idempotent; run anyway when the process exits. */
  release(): void;
  /**
   * This lock when its file still holds our content; else (the lock file was deleted, say with
   * its folder) the lock taken again, as {@link acquireRecordsLock} takes it: it throws
   * `records_locked` when another live broker holds it by now.
   */
  renew(): RecordsLock;
}

export interface RecordsLockDeps {
  /** This process's pid; default `process.pid`. */
  pid?: number;
  /** Whether a pid is a live process; default signal 0 (`EPERM` counts as alive). */
  isAlive?: (pid: number) => boolean;
}

/**
 * Lock files held by this process, each with its release (a second sink here on one file is
 * refused like another broker); all released when the process exits ({@link releaseAtExit}).
 */
const held = new Map<string, () => void>();
let exitHookInstalled = false;

/** Releases every lock still held when the process exits, however it exits (`exit` listeners run synchronously). */
function releaseAtExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const release of [...held.values()]) {
      try {
        release();
      } catch {
        // The process is ending: a lock that cannot be removed now is taken over as stale later.
      }
    }
  });
}

/**
 * Takes the lock of the records file `path` (the file `<path>.lock`). Throws a
 * {@link BrokerError} with code `records_locked` when a live broker holds it, and
 * `records_lock_failed` when the lock file cannot be created (its one-line message names the
 * lock file by its base name and the error code, never an absolute path).
 */
export function acquireRecordsLock(path: string, deps: RecordsLockDeps = {}): RecordsLock {
  const pid = deps.pid ?? process.pid;
  const isAlive = deps.isAlive ?? pidIsAlive;
  const lockPath = `${path}.lock`;
  const name = basename(lockPath);
  const content = `${pid} ${randomUUID()}\n`;
  for (let attempt = 0; attempt < 5; attempt++) {
    if (tryCreate(lockPath, content, name)) {
      releaseAtExit();
      let released = false;
      const releaseNow = () => lock.release();
      const lock: RecordsLock = {
        release() {
          if (released) return;
          released = true;
          if (held.get(lockPath) === releaseNow) held.delete(lockPath);
          if (readText(lockPath) === content) rmSync(lockPath, { force: true });
        },
        renew() {
          if (readText(lockPath) === content) return lock;
          lock.release();
          return acquireRecordsLock(path, deps);
        },
      };
      held.set(lockPath, releaseNow);
      return lock;
    }
    const seen = readText(lockPath);
    if (seen === undefined) continue; // removed meanwhile: try again
    const owner = Number(/^(\d+) /.exec(seen)?.[1]);
    const stale = !(owner > 0) || (owner === pid ? !held.has(lockPath) : !isAlive(owner));
    if (!stale) {
      throw new BrokerError(
        'records_locked',
        `broker.records.path is in use by another mcp-broker (pid ${owner}, lock file ${name}); give each broker its own records file`,
      );
    }
    takeOverStale(lockPath, seen);
  }
  throw new BrokerError('records_locked', `broker.records.path: the lock file ${name} keeps changing; another mcp-broker is starting on the same records file`);
}

/** Creates the lock file with its content in one step; false when it exists. */
function tryCreate(lockPath: string, content: string, name: string): boolean {
  const temporary = `${lockPath}.${process.pid}.${randomUUID().slice(0, 8)}`;
  try {
    writeFileSync(temporary, content, { flag: 'wx' });
    linkSync(temporary, lockPath);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    throw lockFailed(name, code, err);
  } finally {
    rmSync(temporary, { force: true });
  }
}

/**
 * The error of a lock file that cannot be created: `records_lock_failed`, naming the lock file by
 * its base name `name` and the error `code` (`EACCES`, `EROFS`, …), never an absolute path.
 */
export function lockFailed(name: string, code: string | undefined, cause?: unknown): BrokerError {
  return new BrokerError('records_lock_failed', `broker.records.path: the lock file ${name} could not be created (${code ?? 'error'})`, { cause });
}

/**
 * Removes a stale lock only if it is still the one judged stale: moved aside atomically, then
 * put back when another broker replaced it in the meantime (that one is then seen alive).
 */
function takeOverStale(lockPath: string, seen: string): void {
  const aside = `${lockPath}.stale.${process.pid}.${randomUUID().slice(0, 8)}`;
  try {
    renameSync(lockPath, aside);
  } catch {
    return; // gone already: the next attempt creates it
  }
  if (readText(aside) !== seen) {
    try {
      linkSync(aside, lockPath);
    } catch {
      // Someone created a lock meanwhile: theirs stands, and the next attempt sees it.
    }
  }
  rmSync(aside, { force: true });
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** Whether `pid` is a live process (signal 0; a process of another user answers `EPERM`). */
export function pidIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
