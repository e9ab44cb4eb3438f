/**
 * The records sink: one ndjson line per judged call, appended before the call is answered
 * (DESIGN.md "Contract"; seed 002 step 9). `append` resolves only once the line is written;
 * it rejects when it cannot be, and the broker then answers `guard_error` (fail closed).
 *
 * Group commit: lines appended in one burst of work (before `process.nextTick`) go out in one
 * write, and lines that arrive while a write is in flight are written together by the next one,
 * so one slow write never serialises every call behind it. Rotation: when the file passes
 * `maxBytes` it becomes `<path>.1` (older ones shift up to `.maxFiles`, the oldest dropped).
 *
 * Writes go straight to the file descriptor with `fs.write` (the thread pool, never the event
 * loop): a `FileHandle.appendFile` per batch cost about twice the CPU per call (issue 6).
 */
import { close as closeFd, mkdirSync, open as openFd, statSync, write as writeFd } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

/** Where records go. */
export interface RecordSink {
  /** Appends one record; resolves when it is durable in the file, rejects when it is not. */
  append(record: object): Promise<void>;
  close(): Promise<void>;
}

export interface NdjsonSinkOptions {
  path: string;
  /** Rotate past this size, in bytes; default 64 MiB (the schema's `broker.records.maxBytes`). */
  maxBytes?: number;
  /** Rotated files kept; default 5. */
  maxFiles?: number;
  /** Makes records safe to write: the scrubber's `value`. */
  scrub?: <T>(value: T) => T;
}

interface Waiter {
  line: string;
  resolve: () => void;
  reject: (err: Error) => void;
}

export class NdjsonRecordSink implements RecordSink {
  private queue: Waiter[] = [];
  private writing = false;
  private fd?: number;
  private size = 0;
  private closed = false;
  private readonly maxBytes: number;
  private readonly maxFiles: number;

  constructor(private readonly options: NdjsonSinkOptions) {
    this.maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
    this.maxFiles = options.maxFiles ?? 5;
    mkdirSync(dirname(options.path), { recursive: true });
    try {
      this.size = statSync(options.path).size;
    } catch {
      this.size = 0;
    }
  }

  append(record: object): Promise<void> {
    if (this.closed) return Promise.reject(new Error('records sink is closed'));
    let line: string;
    try {
      line = JSON.stringify(this.options.scrub ? this.options.scrub(record) : record) + '\n';
    } catch (err) {
      return Promise.reject(err as Error);
    }
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ line, resolve, reject });
      if (!this.writing) {
        // Flush once the current burst of work is done, so its records share one write.
        this.writing = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    while (this.writing) await new Promise((r) => setImmediate(r));
    await this.closeFile();
  }

  private async flush(): Promise<void> {
    this.writing = true;
    while (this.queue.length) {
      const batch = this.queue;
      this.queue = [];
      const bytes = Buffer.from(batch.length === 1 ? batch[0]!.line : batch.map((w) => w.line).join(''), 'utf8');
      try {
        if (this.size > 0 && this.size + bytes.length > this.maxBytes) await this.rotate();
        this.fd ??= await openAppend(this.options.path);
        await writeAll(this.fd, bytes);
        this.size += bytes.length;
        for (const w of batch) w.resolve();
      } catch (err) {
        await this.closeFile();
        for (const w of batch) w.reject(err as Error);
      }
    }
    this.writing = false;
  }

  private closeFile(): Promise<void> {
    const fd = this.fd;
    this.fd = undefined;
    if (fd === undefined) return Promise.resolve();
    return new Promise((resolve) => closeFd(fd, () => resolve()));
  }

  private async rotate(): Promise<void> {
    await this.closeFile();
    const base = this.options.path;
    await rm(`${base}.${this.maxFiles}`, { force: true });
    for (let i = this.maxFiles - 1; i >= 1; i--) {
      await rename(`${base}.${i}`, `${base}.${i + 1}`).catch(() => undefined);
    }
    await rename(base, `${base}.1`).catch(() => undefined);
    this.size = 0;
  }
}

function openAppend(path: string): Promise<number> {
  return new Promise((resolve, reject) => openFd(path, 'a', (err, fd) => (err ? reject(err) : resolve(fd))));
}

/** Writes all of `bytes` at the end of the file (`O_APPEND`), looping over short writes. */
function writeAll(fd: number, bytes: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const from = (offset: number) =>
      writeFd(fd, bytes, offset, bytes.length - offset, null, (err, written) => {
        if (err) reject(err);
        else if (offset + written < bytes.length) from(offset + written);
        else resolve();
      });
    from(0);
  });
}
