/**
 * The server side of stdio: our own `Transport` over the process's stdin/stdout with the same
 * linear framing as upstream children (issue 6 §3). The SDK's `StdioServerTransport` refuses
 * messages over 10 MiB and grows its buffer quadratically; this one is linear and bounded by
 * `maxMessageBytes`. A line that is not JSON gets a JSON-RPC parse error (-32700), and serving goes on;
 * a request over the limit gets -32600 naming the limit (with its id when its ends show it).
 * A UTF-8 BOM before the first line is dropped (`LineFramer`).
 *
 * - **stdin EOF** is not the end of serving: the requests already received are answered first
 *   (a one-shot pipe gets every answer); an open modern `subscriptions/listen` is a stream and is
 *   not waited for. After `drainTimeoutMs`, `onDrainTimeout` cancels what
 *   is still running (its answers are still written); a request still unanswered then gets a
 *   -32603 error. The transport closes once stdout took every answer (bounded by the same
 *   timeout again), and only then reports `onclose`. Our requests to the client (a ping, an
 *   elicitation) fail at once from EOF on: nothing can answer them.
 * - **Backpressure**: while more than `maxPendingOutputBytes` are written and not yet taken by
 *   the client, stdin is not read (no new requests) and {@link OutputPressure} is set (stdio
 *   upstreams' answers are not read either), so memory stays bounded when the client stops
 *   reading; both resume once stdout drains.
 */
import type { Readable, Writable } from 'node:stream';
import type { Transport, JSONRPCMessage } from '@modelcontextprotocol/server';
import { DEFAULT_DRAIN_TIMEOUT_MS, DEFAULT_MAX_PENDING_OUTPUT_BYTES } from '../config/schema.js';
import { CALL_TIMING, markCall } from '../shared/call-timing.js';
import { LineFramer, oversizeError, writeMessage, DEFAULT_MAX_MESSAGE_BYTES } from '../wire/framing.js';
import { stdoutPressure, type OutputPressure } from '../wire/output-pressure.js';

export interface StdioServerOptions {
  /** After stdin EOF, how long the requests received may take to be answered, in ms; default {@link DEFAULT_DRAIN_TIMEOUT_MS}. */
  drainTimeoutMs?: number;
  /** Bytes written to stdout and not yet taken past which reading stops; default {@link DEFAULT_MAX_PENDING_OUTPUT_BYTES}. */
  maxPendingOutputBytes?: number;
  /** Called once when `drainTimeoutMs` passes with requests unanswered; resolves once what it cancelled is answered. */
  onDrainTimeout?: () => Promise<void>;
  /** Where congestion is reported; default the process-wide {@link stdoutPressure}. */
  pressure?: OutputPressure;
}

export class StdioServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private readonly framer: LineFramer;
  private closed = false;
  private ended = false;
  private congested = false;
  /** Requests received and not yet answered, by id (a `Map` keeps `1` and `"1"` apart), with how many are open under that id. */
  private readonly pending = new Map<string | number, { id: string | number; open: number }>();
  /** Our requests to the client not yet answered, by id: after stdin EOF they never will be. */
  private readonly asked = new Map<string | number, string | number>();
  /** Settles when `pending` empties; set while stdin EOF waits for it. */
  private onIdle?: () => void;
  private readonly onData = (chunk: Buffer) => {
    if (CALL_TIMING) markCall('stdin read');
    this.framer.push(chunk);
  };
  private readonly onEnd = () => void this.drainAndClose();
  private readonly onDrain = () => this.relieve();
  private readonly drainTimeoutMs: number;
  private readonly maxPendingOutputBytes: number;
  private readonly pressure: OutputPressure;

  constructor(
    private readonly stdin: Readable = process.stdin,
    private readonly stdout: Writable = process.stdout,
    maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES,
    private readonly options: StdioServerOptions = {},
  ) {
    this.drainTimeoutMs = options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS;
    this.maxPendingOutputBytes = options.maxPendingOutputBytes ?? DEFAULT_MAX_PENDING_OUTPUT_BYTES;
    this.pressure = options.pressure ?? stdoutPressure;
    this.framer = new LineFramer(
      {
        message: (m) => this.receive(m),
        noise: () => void this.writeError(-32700, 'Parse error: a line on stdin is not JSON'),
        oversize: (bytes, ends) => {
          // A client's answer to one of our requests that is too large fails that request at once.
          if (ends?.kind === 'response') return this.onmessage?.(oversizeError(ends, bytes, maxMessageBytes, 'the client'));
          // Counted as received, so its error settles it and no other request under its id.
          if (ends?.id !== undefined && ends.id !== null) this.count(ends.id);
          void this.writeError(-32600, `Request too large: ${bytes} bytes exceeds maxMessageBytes ${maxMessageBytes}`, ends?.id ?? null);
        },
      },
      maxMessageBytes,
    );
  }

  async start(): Promise<void> {
    this.stdin.on('data', this.onData);
    // A stream paused by whoever read it before (held-stdin.ts, while the broker started) flows again.
    this.stdin.resume();
    this.stdin.on('end', this.onEnd);
    this.stdin.on('error', (err) => this.onerror?.(err));
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return Promise.resolve();
    const m = message as { id?: unknown; method?: unknown };
    if (typeof m.id === 'string' || typeof m.id === 'number') {
      if (m.method === undefined) this.settle(m.id);
      else if (this.ended) return this.unanswerable(m.id);
      else this.asked.set(m.id, m.id);
    }
    // A write error (the client went away) is the stream's 'error' event; the send itself settles.
    // With other requests still to answer, the client is not waiting on this message alone: it joins the turn's one write.
    const written = writeMessage(this.stdout, message, this.pending.size > 0).catch(() => undefined);
    if (CALL_TIMING && m.method === undefined) markCall('stdout write', 'end');
    if (!this.congested && this.stdout.writableLength > this.maxPendingOutputBytes) this.congest();
    return written;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stdin.off('data', this.onData);
    this.stdin.off('end', this.onEnd);
    this.stdout.off('drain', this.onDrain);
    this.stdin.pause();
    if (this.congested) this.pressure.set(false);
    this.onclose?.();
  }

  private receive(message: JSONRPCMessage): void {
    // Not an object (a batch's `null`, a number, an empty batch): no request to count; the shape guard answers it.
    if (typeof message !== 'object' || message === null || Array.isArray(message)) return this.onmessage?.(message);
    const m = message as { id?: unknown; method?: unknown; params?: { requestId?: unknown } };
    const readableId = typeof m.id === 'string' || typeof m.id === 'number';
    if (m.method === undefined && readableId && ('result' in m || 'error' in m)) {
      this.asked.delete(m.id as string | number);
    } else if (m.method === 'subscriptions/listen') {
      // A modern listen is a stream, not a request awaiting its answer: stdin EOF does not wait for it.
    } else if (readableId) {
      // A request, or a message with an id that is neither request nor response (answered -32600
      // by the shape guard): every answer written under an id settles one message counted here.
      if (CALL_TIMING) markCall('parse', 'begin');
      this.count(m.id as string | number);
    } else if (m.method === 'notifications/cancelled') {
      // A request the client cancelled gets no answer: it is no longer waited for.
      const id = m.params?.requestId;
      if (typeof id === 'string' || typeof id === 'number') {
        if (CALL_TIMING && this.pending.has(id)) markCall('cancelled', 'end');
        this.settle(id, true);
      }
    }
    this.onmessage?.(message);
  }

  private count(id: string | number): void {
    const open = this.pending.get(id);
    if (open) open.open++;
    else this.pending.set(id, { id, open: 1 });
  }

  private settle(id: string | number, all = false): void {
    const open = this.pending.get(id);
    if (!open) return;
    if (all || --open.open <= 0) this.pending.delete(id);
    if (this.pending.size === 0) this.onIdle?.();
  }

  /** stdin EOF: answer what was received, within `drainTimeoutMs`, then close. */
  private async drainAndClose(): Promise<void> {
    if (this.ended || this.closed) return;
    this.ended = true;
    this.stdin.off('data', this.onData);
    this.framer.end();
    // The client can answer nothing now: our requests to it fail at once (an approval's liveness ping among them).
    for (const id of this.asked.values()) void this.unanswerable(id);
    this.asked.clear();
    if (!(await this.idle(this.drainTimeoutMs))) {
      await this.options.onDrainTimeout?.().catch(() => undefined);
      for (const { id, open } of [...this.pending.values()]) {
        for (let i = 0; i < open; i++) {
          void this.writeError(-32603, `the broker stopped before answering: stdin closed and drainTimeoutMs (${this.drainTimeoutMs} ms) passed`, id);
        }
      }
    }
    await this.flushed(this.drainTimeoutMs);
    await this.close();
  }

  /** Fails our request `id` to the client, which closed stdin: an error response in its place, as if it came. */
  private unanswerable(id: string | number): Promise<void> {
    const error = { jsonrpc: '2.0', id, error: { code: -32000, message: 'the client closed stdin; it cannot answer' } };
    setImmediate(() => this.onmessage?.(error as unknown as JSONRPCMessage));
    return Promise.resolve();
  }

  /** Resolves true once every request received is answered, false after `timeoutMs`. */
  private idle(timeoutMs: number): Promise<boolean> {
    if (this.pending.size === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(false), timeoutMs);
      const done = (idle: boolean) => {
        clearTimeout(timer);
        this.onIdle = undefined;
        resolve(idle);
      };
      this.onIdle = () => done(true);
    });
  }

  /** Resolves once stdout took every byte written, or after `timeoutMs`. */
  private flushed(timeoutMs: number): Promise<void> {
    if (this.stdout.writableLength === 0 || this.stdout.destroyed) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      // Writes complete in order: an empty one's callback runs once everything before it is taken.
      this.stdout.write('', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Too much written and not taken: stop reading requests (and, through the pressure flag, upstream answers). */
  private congest(): void {
    this.congested = true;
    this.stdin.pause();
    this.pressure.set(true);
    this.stdout.once('drain', this.onDrain);
  }

  private relieve(): void {
    if (this.closed) return;
    if (this.stdout.writableLength > this.maxPendingOutputBytes) {
      this.stdout.once('drain', this.onDrain);
      return;
    }
    this.congested = false;
    this.pressure.set(false);
    if (!this.ended) this.stdin.resume();
  }

  private writeError(code: number, message: string, id: string | number | null = null): Promise<void> {
    return this.send({ jsonrpc: '2.0', id, error: { code, message } } as unknown as JSONRPCMessage);
  }
}

