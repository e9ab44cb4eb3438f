/**
 * The records sink: one ndjson line per judged call, appended before the call is answered
 * (DESIGN.md "Contract"; seed 002 step 9). `append` resolves only once the line is written;
 * it rejects when it cannot be, and the broker then answers `guard_error` (fail closed).
 *
 * Group commit: lines that arrive while a write is in flight are written together by the next
 * one, so one slow write never serialises every call behind it. Rotation: when the file passes
 * `maxBytes` it becomes `<path>.1` (older ones shift up to `.maxFiles`, the oldest dropped).
 */
import { mkdirSync, statSync } from 'node:fs';
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
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
  private handle?: FileHandle;
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
      if (!this.writing) void this.flush();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    while (this.writing) await new Promise((r) => setImmediate(r));
    await this.handle?.close().catch(() => undefined);
    this.handle = undefined;
  }

  private async flush(): Promise<void> {
    this.writing = true;
    while (this.queue.length) {
      const batch = this.queue;
      this.queue = [];
      const text = batch.map((w) => w.line).join('');
      try {
        if (this.size > 0 && this.size + Buffer.byteLength(text) > this.maxBytes) await this.rotate();
        const handle = await this.file();
        await handle.appendFile(text, 'utf8');
        this.size += Buffer.byteLength(text);
        for (const w of batch) w.resolve();
      } catch (err) {
        await this.handle?.close().catch(() => undefined);
        this.handle = undefined;
        for (const w of batch) w.reject(err as Error);
      }
    }
    this.writing = false;
  }

  private async file(): Promise<FileHandle> {
    if (!this.handle) this.handle = await open(this.options.path, 'a');
    return this.handle;
  }

  private async rotate(): Promise<void> {
    await this.handle?.close().catch(() => undefined);
    this.handle = undefined;
    const base = this.options.path;
    await rm(`${base}.${this.maxFiles}`, { force: true });
    for (let i = this.maxFiles - 1; i >= 1; i--) {
      await rename(`${base}.${i}`, `${base}.${i + 1}`).catch(() => undefined);
    }
    await rename(base, `${base}.1`).catch(() => undefined);
    this.size = 0;
  }
}
