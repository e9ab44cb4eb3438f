/**
 * The records sink: one ndjson line per judged call, appended before the call is answered
 * (DESIGN.md "Contract"; seed 002 step 9). `append` resolves only once the line is handed to
 * the kernel at the configured path; it rejects when it cannot be, and the broker then answers
 * `guard_error` (fail closed).
 *
 * Group commit: the lines appended in one turn of the event loop go out in one synchronous
 * `write` on an `O_APPEND` descriptor at the next turn (`setImmediate`), so a burst of calls
 * costs one system call, and no write is ever in flight while the file is checked or rotated.
 *
 * Guarantees, checked before every batch:
 * - **The path, not an old inode.** The descriptor is compared (device and inode) with what the
 *   path names now. A deleted path is created again; a file put in its place is opened and
 *   appended to; a folder or anything unopenable refuses the batch, and the next batch tries
 *   again, so recording recovers once the path is writable.
 * - **No torn lines.** A write that fails part way (disk full) is cut back to the size before the
 *   batch. When even that fails (an append-only file, an I/O error), or a file is opened whose
 *   last byte is not a newline (a crash mid-write), the next write starts with a newline, so the
 *   fragment stays a line of its own that readers skip, and no record is ever glued onto it.
 *   The lines of such a batch that reached the file whole (and, with `fsync: "batch"`, were
 *   flushed) stay records, and their calls are answered; the rest are refused.
 * - **Never blocked.** The path is opened `O_NONBLOCK`: a FIFO without a reader refuses the
 *   batch instead of hanging the process in `open`; anything but a regular file is refused.
 * - **One broker per file.** The sink holds `<path>.lock` (./records-lock.ts) from construction
 *   until `close()`; a second sink on the same file is refused at construction. Each time the
 *   file is opened (first batch, rotation, a deleted or replaced file) the lock is checked: one
 *   deleted with its folder is taken again, and while another broker holds it, batches are
 *   refused.
 *
 * Durability: with `fsync: "batch"` each batch is also flushed to the disk (`fdatasync`) before
 * its calls are answered; a failed flush refuses the batch like a failed write, and the batch is
 * cut back out of the file as a failed write is. Default `"never"`.
 *
 * Rotation: when a batch would take the file past `maxBytes` it becomes `<path>.1` (older ones
 * shift up to `.maxFiles`, the oldest dropped).
 */
import {
  accessSync,
  closeSync,
  constants,
  fstatSync,
  fdatasyncSync,
  ftruncateSync,
  openSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { basename, dirname } from 'node:path';
import { CALL_TIMING, markCall } from '../shared/call-timing.js';
import { BrokerError } from '../shared/errors.js';
import { makeFolderSync, probeFolderSync } from '../shared/make-folder.js';
import type { Logger } from '../shared/logger.js';
import { acquireRecordsLock, lockFailed, type RecordsLock, type RecordsLockDeps } from './records-lock.js';

/** Where records go. */
export interface RecordSink {
  /** Appends one record; resolves when it is written to the file, rejects when it is not. */
  append(record: object): Promise<void>;
  close(): Promise<void>;
}

/** The file-system calls through which a batch reaches the file; tests replace them to inject faults. */
export interface RecordsFs {
  /** Writes up to `length` bytes of `buffer` from `offset` at the end of the file; returns the bytes written. */
  writeSync(fd: number, buffer: Buffer, offset: number, length: number): number;
  /** Cuts the file to `length` bytes. */
  ftruncateSync(fd: number, length: number): void;
  /** Flushes the file's data to the disk (with `fsync: "batch"`). */
  fdatasyncSync(fd: number): void;
}

export interface NdjsonSinkOptions {
  path: string;
  /** Rotate past this size, in bytes; the schema's `broker.records.maxBytes` (default 64 MiB). */
  maxBytes?: number;
  /** Rotated files kept; the schema's `broker.records.maxFiles` (default 5). */
  maxFiles?: number;
  /** `"batch"`: `fdatasync` each batch before its calls are answered; the schema's `broker.records.fsync` (default `"never"`). */
  fsync?: 'never' | 'batch';
  /** Makes records safe to write: the scrubber's `value`. */
  scrub?: <T>(value: T) => T;
  /** Default `node:fs`. */
  fs?: Partial<RecordsFs>;
  /** How the lock file judges its owner (./records-lock.ts). */
  lock?: RecordsLockDeps;
  /** Told (warn) when the file at the path was deleted or replaced and is opened again; default none. */
  logger?: Pick<Logger, 'warn'>;
}

interface Waiter {
  line: string;
  resolve: () => void;
  reject: (err: Error) => void;
}

const NEWLINE = 0x0a;
const MAX_EXACT = BigInt(Number.MAX_SAFE_INTEGER);

export class NdjsonRecordSink implements RecordSink {
  private queue: Waiter[] = [];
  private scheduled = false;
  private fd?: number;
  /** Device and inode of `fd` when it was opened; `exact` when both fit a number exactly. */
  private opened?: { dev: bigint; ino: bigint; devNumber: number; inoNumber: number; exact: boolean };
  /** Bytes in the file before the next batch (from `fstat`, so an outside truncation is seen). */
  private size = 0;
  /** The file may end in a fragment: the next write starts with a newline. */
  private torn = false;
  private closed = false;
  private readonly path: string;
  private readonly maxBytes: number;
  private readonly maxFiles: number;
  private readonly fs: RecordsFs;
  private lock: RecordsLock;

  /**
   * Takes the records lock; the file itself is opened (created) by the first batch. Throws a
   * `BrokerError` `records_locked` when another broker holds the lock.
   */
  constructor(private readonly options: NdjsonSinkOptions) {
    this.path = options.path;
    this.maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
    this.maxFiles = options.maxFiles ?? 5;
    this.fs = { writeSync, ftruncateSync, fdatasyncSync, ...options.fs };
    makeFolderSync(dirname(this.path));
    this.lock = acquireRecordsLock(this.path, options.lock);
  }

  append(record: object): Promise<void> {
    if (this.closed) return Promise.reject(new BrokerError('records_closed', 'records sink is closed'));
    let line: string;
    try {
      line = JSON.stringify(this.options.scrub ? this.options.scrub(record) : record) + '\n';
    } catch (err) {
      return Promise.reject(err as Error);
    }
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ line, resolve, reject });
      if (!this.scheduled) {
        // Flush once the current turn's work is done, so its records share one write.
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Writes what is queued, closes the file and releases the lock. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.flush();
    this.closeFile();
    this.lock.release();
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    if (!batch.length) return;
    const bytes = Buffer.from(batch.length === 1 ? batch[0]!.line : batch.map((w) => w.line).join(''), 'utf8');
    try {
      this.ensureOpen();
      if (this.size > 0 && this.size + bytes.length > this.maxBytes) {
        this.rotate();
        this.ensureOpen();
      }
      this.write(bytes);
      if (CALL_TIMING) markCall('records write');
    } catch (err) {
      const refusal = unwritable(err);
      // Lines that reached the file whole and could not be cut back out are records of their
      // calls: those calls are answered, so no record says `ok` of a call that was refused.
      let landed = err instanceof PartlyWritten ? err.landed : 0;
      for (const w of batch) {
        const length = Buffer.byteLength(w.line);
        if (length <= landed) {
          landed -= length;
          w.resolve();
        } else {
          landed = 0;
          w.reject(refusal);
        }
      }
      return;
    }
    for (const w of batch) w.resolve();
  }

  /** Makes `fd` the file the path names now, reopening when it was deleted or replaced. */
  private ensureOpen(): void {
    if (this.fd !== undefined) {
      const size = this.sizeIfStillAtPath();
      if (size !== undefined) {
        this.size = size;
        return;
      }
      this.closeFile();
      this.options.logger?.warn('records file at broker.records.path was deleted or replaced; opening the path again');
    }
    this.open();
  }

  /**
   * The file's size when the open descriptor still is the file at the path; undefined when it is
   * not. One `stat` of the path, compared with the device and inode the descriptor had when it was
   * opened (as numbers while they are exact, else as bigints).
   */
  private sizeIfStillAtPath(): number | undefined {
    const opened = this.opened!;
    try {
      if (opened.exact) {
        const now = statSync(this.path, { throwIfNoEntry: false });
        return now !== undefined && now.ino === opened.inoNumber && now.dev === opened.devNumber ? now.size : undefined;
      }
      const now = statSync(this.path, { bigint: true, throwIfNoEntry: false });
      return now !== undefined && now.ino === opened.ino && now.dev === opened.dev ? Number(now.size) : undefined;
    } catch {
      return undefined;
    }
  }

  private open(): void {
    let fd: number;
    let readable = true;
    try {
      fd = openSync(this.path, APPEND_READ);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') {
        // The folder itself went away: make it again, as at start.
        makeFolderSync(dirname(this.path));
        fd = openSync(this.path, APPEND_READ);
      } else if (code === 'EACCES') {
        // A file we may append to but not read: its last byte is unknown, so count it torn.
        fd = openSync(this.path, APPEND_ONLY);
        readable = false;
      } else {
        throw err;
      }
    }
    try {
      const stat = fstatSync(fd, { bigint: true });
      if (!stat.isFile()) throw new BrokerError('records_unwritable', 'the records path is not a regular file');
      // The folder may have gone, and the lock file with it: hold the lock again before writing.
      this.lock = this.lock.renew();
      const size = Number(stat.size);
      this.size = size;
      this.torn = size > 0 && (!readable || lastByte(fd, size) !== NEWLINE);
      this.opened = { dev: stat.dev, ino: stat.ino, devNumber: Number(stat.dev), inoNumber: Number(stat.ino), exact: stat.dev <= MAX_EXACT && stat.ino <= MAX_EXACT };
    } catch (err) {
      closeSync(fd);
      throw err;
    }
    this.fd = fd;
  }

  /** Appends `bytes` whole (flushed to the disk with `fsync: "batch"`), or leaves the file as it was (or its fragment isolated). */
  private write(bytes: Buffer): void {
    const fd = this.fd!;
    const before = this.size;
    const out = this.torn ? Buffer.concat([Buffer.of(NEWLINE), bytes]) : bytes;
    let written = 0;
    try {
      while (written < out.length) {
        const n = this.fs.writeSync(fd, out, written, out.length - written);
        if (!(n > 0)) throw new BrokerError('records_unwritable', 'the records file accepted no bytes');
        written += n;
      }
      if (this.options.fsync === 'batch') this.fs.fdatasyncSync(fd);
    } catch (err) {
      if (written > 0) {
        try {
          this.fs.ftruncateSync(fd, before);
        } catch {
          this.torn = true;
          // The bytes stay (an append-only file, an I/O error): say how much of the batch is in
          // the file when the write itself failed part way, and those bytes are as durable as the
          // setting asks. (A failed flush after a whole write counts nothing as landed: refused.)
          const landed = written < out.length ? written - (out.length - bytes.length) : 0;
          if (landed > 0 && this.flushedAnyway(fd)) throw new PartlyWritten(err, landed);
        }
      }
      throw err;
    }
    this.size = before + out.length;
    this.torn = false;
  }

  /** With `fsync: "batch"`, whether what a failed write left in the file could be flushed to the disk; true without it. */
  private flushedAnyway(fd: number): boolean {
    if (this.options.fsync !== 'batch') return true;
    try {
      this.fs.fdatasyncSync(fd);
      return true;
    } catch {
      return false;
    }
  }

  private closeFile(): void {
    const fd = this.fd;
    this.fd = undefined;
    if (fd === undefined) return;
    try {
      closeSync(fd);
    } catch {
      // Nothing is pending on it: every write is synchronous.
    }
  }

  private rotate(): void {
    this.closeFile();
    const base = this.path;
    rmSync(`${base}.${this.maxFiles}`, { force: true });
    for (let i = this.maxFiles - 1; i >= 1; i--) renameQuietly(`${base}.${i}`, `${base}.${i + 1}`);
    renameQuietly(base, `${base}.1`);
  }
}

/**
 * What a sink on `path` would refuse, found without writing a byte or leaving anything behind
 * (`mcp-broker check`). Throws what the sink's construction throws for a records folder that
 * cannot be made (the `mkdir` error) or a folder where the lock file cannot be created (the
 * `records_lock_failed` error, judged by write permission), and what its first batch would refuse
 * every call with: `records_unwritable` for a path that is not a regular file or a file that
 * cannot be opened for appending. A missing folder is made and removed again; an existing file is
 * opened for appending (never created) and closed unwritten; a lock held by another broker passes
 * (the file is in use, not unusable).
 */
export function probeRecordsPath(path: string): void {
  const folder = dirname(path);
  // A folder made (and removed) just now is empty and ours: the lock and the file can be created.
  if (!probeFolderSync(folder)) return;
  try {
    accessSync(folder, constants.W_OK | constants.X_OK);
  } catch (err) {
    throw lockFailed(`${basename(path)}.lock`, (err as NodeJS.ErrnoException).code, err);
  }
  const stat = statSync(path, { throwIfNoEntry: false });
  if (stat === undefined) return;
  // Not opened: opening a FIFO or a device has effects of its own (a FIFO's reader sees an end).
  if (!stat.isFile()) throw new BrokerError('records_unwritable', 'the records path is not a regular file');
  try {
    closeSync(openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_NONBLOCK));
  } catch (err) {
    throw unwritable(err);
  }
}

/**
 * Opened for appending (`O_APPEND`, created when missing) and reading (the last byte). Never
 * waits: `O_NONBLOCK` makes a FIFO at the path without a reader fail at once (`ENXIO`) instead
 * of blocking the whole process in `open` (a regular file ignores the flag); whatever opens is
 * then refused unless it is a regular file.
 */
const APPEND_READ = constants.O_RDWR | constants.O_APPEND | constants.O_CREAT | constants.O_NONBLOCK;
/** As {@link APPEND_READ}, for a file this process may append to but not read. */
const APPEND_ONLY = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NONBLOCK;

/** A write that failed after some of the batch reached the file and could not be cut back. */
class PartlyWritten extends Error {
  constructor(
    readonly error: unknown,
    /** Bytes of the batch (its lines, in order) that are in the file. */
    readonly landed: number,
  ) {
    super('the records batch was written in part');
  }
}

function lastByte(fd: number, size: number): number | undefined {
  const one = Buffer.alloc(1);
  return readSync(fd, one, 0, 1, size - 1) === 1 ? one[0] : undefined;
}

function renameQuietly(from: string, to: string): void {
  try {
    renameSync(from, to);
  } catch {
    // A missing older file is normal.
  }
}

/** One line naming the failure by its code: never the absolute path a file-system message carries. */
function unwritable(err: unknown): Error {
  if (err instanceof PartlyWritten) err = err.error;
  if (err instanceof BrokerError) return err;
  const code = (err as NodeJS.ErrnoException).code ?? 'error';
  const what = (err as NodeJS.ErrnoException).syscall === 'open' ? 'opened' : 'written';
  return new BrokerError('records_unwritable', `the records file could not be ${what} (${code})`, { cause: err });
}
