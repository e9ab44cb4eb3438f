/**
 * Following the records file as it grows (`mcp-broker calls --follow`): every complete line
 * appended after `offset` is handed on, in order. The file is read through a descriptor held
 * open, so a rotation (the path now names another file) first reads the old file to its end,
 * then goes on at the new file's beginning; a truncation (same file, smaller) starts again at
 * its beginning. A torn last line waits, as bytes, until its newline arrives (a character split
 * across two writes is decoded whole); a line that is not JSON is skipped, as `readRecords` does.
 */
import { closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs';

/** How often the file is looked at, in ms. */
export const FOLLOW_POLL_MS = 200;

export interface FollowOptions {
  /** Where to start, in bytes; default the file's size now (only what is appended). */
  offset?: number;
  /** Ends the follow; the returned promise then resolves. */
  signal: AbortSignal;
  pollMs?: number;
}

const NEWLINE = 0x0a;

/** The file being read: its descriptor, what it is, how far it has been read, its torn tail. */
interface Reading {
  fd: number;
  dev: number;
  ino: number;
  offset: number;
  pending: Buffer;
}

/** Calls `onRecord` for each record appended to `path` until `signal` aborts. */
export async function followRecords<T>(path: string, onRecord: (record: T) => void, options: FollowOptions): Promise<void> {
  const follower = new RecordsFollower<T>(path, options.offset);
  try {
    while (!options.signal.aborted) {
      follower.poll(onRecord);
      await pause(options.pollMs ?? FOLLOW_POLL_MS, options.signal);
    }
  } finally {
    follower.close();
  }
}

/** One look at a time at the records file (what {@link followRecords} does every `pollMs`). */
export class RecordsFollower<T> {
  private reading?: Reading;

  /** @param offset where to start in the file at `path` now, in bytes; default its size (only what is appended). */
  constructor(
    private readonly path: string,
    offset?: number,
  ) {
    this.reading = openAt(path, (size) => offset ?? size);
  }

  /** Hands on every complete line appended since the last look, following a rotation. */
  poll(onRecord: (record: T) => void): void {
    const now = identity(this.path);
    if (this.reading && now && (now.ino !== this.reading.ino || now.dev !== this.reading.dev)) {
      // Rotated or replaced: what was appended to the old file before it moved is read first.
      readNew(this.reading, onRecord);
      this.close();
    }
    this.reading ??= openAt(this.path, () => 0);
    if (this.reading) readNew(this.reading, onRecord);
  }

  close(): void {
    if (this.reading) closeSync(this.reading.fd);
    this.reading = undefined;
  }
}

/** Opens the file at `path` (undefined when there is none, or it is not a regular file), read from `start(size)`. */
function openAt(path: string, start: (size: number) => number): Reading | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return undefined;
  }
  const st = fstatSync(fd);
  if (!st.isFile()) {
    closeSync(fd);
    return undefined;
  }
  return { fd, dev: st.dev, ino: st.ino, offset: start(st.size), pending: Buffer.alloc(0) };
}

/** Hands on every complete line appended since the last read. */
function readNew<T>(reading: Reading, onRecord: (record: T) => void): void {
  const size = fstatSync(reading.fd).size;
  if (size < reading.offset) {
    // Truncated in place (copytruncate): the file from its start.
    reading.offset = 0;
    reading.pending = Buffer.alloc(0);
  }
  if (size === reading.offset) return;
  const chunk = Buffer.alloc(size - reading.offset);
  const n = readSync(reading.fd, chunk, 0, chunk.length, reading.offset);
  reading.offset += n;
  let bytes = reading.pending.length ? Buffer.concat([reading.pending, chunk.subarray(0, n)]) : chunk.subarray(0, n);
  for (let end = bytes.indexOf(NEWLINE); end >= 0; end = bytes.indexOf(NEWLINE)) {
    const line = bytes.toString('utf8', 0, end);
    bytes = bytes.subarray(end + 1);
    if (!line.trim()) continue;
    let record: T;
    try {
      record = JSON.parse(line) as T;
    } catch {
      continue;
    }
    onRecord(record);
  }
  reading.pending = Buffer.from(bytes);
}

function identity(path: string): { dev: number; ino: number } | undefined {
  try {
    const st = statSync(path);
    return st.isFile() ? { dev: st.dev, ino: st.ino } : undefined;
  } catch {
    return undefined;
  }
}

/** Waits `ms`, or until `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', stop);
      resolve();
    }, ms);
    signal.addEventListener('abort', stop, { once: true });
  });
}
