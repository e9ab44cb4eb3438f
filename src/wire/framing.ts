/**
 * Newline-delimited JSON framing for stdio, linear in message size (issue 6 §3, cases F05, F06).
 *
 * Chunks are kept as Buffers and split on the byte 0x0A, which never occurs inside a multi-byte
 * UTF-8 sequence, so a character split across chunks is decoded whole. A line is concatenated
 * once, when its newline arrives: no re-scanning, no quadratic growth. A UTF-8 byte order mark
 * (EF BB BF) at the very start of the stream is dropped, even when its bytes arrive in separate
 * chunks; anywhere else it is part of the line.
 */
import type { Writable } from 'node:stream';
import type { JSONRPCMessage } from '@modelcontextprotocol/server';
import { encodeMessage, messageIdFromEnds, parseResponseLine, RAW_MIN_BYTES, type MessageEnds } from './raw-json.js';

/** Default upper bound of one message, in bytes: 64 MiB. */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

const NEWLINE = 0x0a;
/** The UTF-8 encoding of U+FEFF, which some writers put before their first line. */
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

export interface FramerEvents {
  /**
   * A complete line parsed as JSON: an object, or each element of a batch (an array), or an empty
   * batch as itself. Its validity as JSON-RPC is the receiver's business: it may be `null`, a
   * number, a string or an array, and the receiver must not read members off it unchecked.
   */
  message(message: JSONRPCMessage): void;
  /** A line that is not JSON (a stray log line): never fatal. */
  noise(line: string): void;
  /**
   * A line longer than the limit: dropped, its length reported, the stream goes on. `ends` has
   * the message's id (and whether it is a request or a response) when its first or last bytes
   * show it, so the request it is or answers can get an error instead of waiting forever.
   */
  oversize(bytes: number, ends?: MessageEnds): void;
}

/** Bytes kept from each end of an oversize line, to find its id. */
const ENDS_BYTES = 512;

/** Splits a byte stream into JSON messages. */
export class LineFramer {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private skipping = false;
  /** While skipping: the first and the last bytes of the line. */
  private head?: Buffer;
  private tail?: Buffer;
  /** Until the stream's first bytes show whether it starts with a BOM: what has arrived of them. */
  private bomProbe: Buffer | undefined = Buffer.alloc(0);

  constructor(
    private readonly events: FramerEvents,
    private readonly maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES,
  ) {}

  /** Feeds one chunk from the stream. */
  push(chunk: Buffer): void {
    if (this.bomProbe) {
      const held = this.bomProbe.length ? Buffer.concat([this.bomProbe, chunk]) : chunk;
      const n = Math.min(held.length, BOM.length);
      if (held.subarray(0, n).equals(BOM.subarray(0, n))) {
        if (held.length < BOM.length) {
          this.bomProbe = held;
          return;
        }
        chunk = held.subarray(BOM.length);
      } else {
        chunk = held;
      }
      this.bomProbe = undefined;
    }
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(NEWLINE, start);
      if (nl === -1) break;
      this.take(chunk.subarray(start, nl));
      this.finishLine();
      start = nl + 1;
    }
    if (start < chunk.length) this.take(chunk.subarray(start));
  }

  /**
   * The stream ended: a last line without its newline is taken as a line (a one-shot pipe such
   * as `printf '…'` may not end with one).
   */
  end(): void {
    if (this.buffered > 0) this.finishLine();
    this.bomProbe = undefined;
  }

  /** Drops any partial line. */
  reset(): void {
    this.chunks = [];
    this.buffered = 0;
    this.skipping = false;
    this.head = this.tail = undefined;
  }

  private take(part: Buffer): void {
    if (part.length === 0) return;
    this.buffered += part.length;
    if (this.skipping) {
      this.keepTail(part);
      return;
    }
    if (this.buffered > this.maxMessageBytes) {
      this.skipping = true;
      this.chunks.push(part);
      const first: Buffer[] = [];
      let kept = 0;
      for (const c of this.chunks) {
        if (kept >= ENDS_BYTES) break;
        first.push(c.subarray(0, ENDS_BYTES - kept));
        kept += first[first.length - 1]!.length;
      }
      this.head = Buffer.concat(first);
      for (const c of this.chunks) this.keepTail(c);
      this.chunks = [];
      return;
    }
    this.chunks.push(part);
  }

  private keepTail(part: Buffer): void {
    const joined = this.tail ? Buffer.concat([this.tail, part.subarray(-ENDS_BYTES)]) : part;
    this.tail = Buffer.from(joined.subarray(-ENDS_BYTES));
  }

  private finishLine(): void {
    const bytes = this.buffered;
    const skipped = this.skipping;
    const line = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, bytes);
    const { head, tail } = this;
    this.reset();
    if (skipped) return this.events.oversize(bytes, head && tail ? messageIdFromEnds(head, tail) : undefined);
    if (!line || line.length === 0) return;
    if (bytes >= RAW_MIN_BYTES) {
      // A large response: parse only its result, and remember its bytes for pass-through.
      const response = parseResponseLine(line);
      if (response) return this.events.message(response);
    }
    const text = line.toString('utf8');
    const first = firstNonSpace(text);
    if (first === '') return; // a blank line (spaces, a lone \r of CRLF) is not a message, nor noise
    if (first !== '{' && first !== '[') return this.events.noise(text.trimEnd());
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return this.events.noise(text.trimEnd());
    }
    if (Array.isArray(parsed) && parsed.length > 0) {
      // Each element as it came, objects or not: the receiver answers or skips what is not a message.
      for (const m of parsed) this.events.message(m as JSONRPCMessage);
    } else {
      // An empty batch too, as the one value it is: JSON-RPC answers it with a single -32600.
      this.events.message(parsed as JSONRPCMessage);
    }
  }
}

function firstNonSpace(text: string): string {
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c !== ' ' && c !== '\t' && c !== '\r') return c;
  }
  return '';
}

/**
 * The error a dropped oversize message turns into: the answer to the request it was (to send
 * back), or in place of the response it was (to deliver), so no request waits for it.
 */
export function oversizeError(ends: MessageEnds, bytes: number, maxMessageBytes: number, who: string): JSONRPCMessage {
  const message = `${who} message of ${bytes} bytes is over maxMessageBytes (${maxMessageBytes} bytes); dropped`;
  return { jsonrpc: '2.0', id: ends.id, error: { code: ends.kind === 'request' ? -32600 : -32603, message } } as JSONRPCMessage;
}

/** One message as a line of JSON. */
export function serializeMessage(message: JSONRPCMessage): string {
  return JSON.stringify(message) + '\n';
}

/**
 * Writes one message as a line: a result that passes through unchanged goes out as the bytes
 * it arrived in (`raw-json.ts`). The first message of a burst of work leaves at once (a lone
 * call waits for nothing); the ones written after it in the same burst are corked until the
 * task that wrote them has settled ({@link afterTaskSettles}) and leave together in one
 * `writev`. With `busy` (the peer has other requests of ours in flight, or we have other of its
 * requests to answer: it is not waiting on this message alone), the first waits for that flush
 * too, so a stream under load takes one system call per burst instead of two (issue 19). A burst
 * is what one callback of the event loop writes: the requests one chunk from the client turns
 * into, the answers one records flush releases. (Writes of several callbacks in one poll phase,
 * such as many HTTP requests to one stdio upstream, leave in a write each: the trade for answers
 * that no longer wait for the next check phase.) Resolves once the stream took every byte
 * (backpressure); rejects on a write error.
 */
export function writeMessage(stream: NodeJS.WritableStream & Partial<Writable>, message: JSONRPCMessage, busy = false): Promise<void> {
  const encoded = encodeMessage(message);
  if (stream.cork === undefined || stream.writableCorked) return write(stream, encoded);
  const uncork = () => stream.uncork!();
  if (busy) {
    stream.cork();
    afterTaskSettles(uncork);
    return write(stream, encoded);
  }
  let written: Promise<void>;
  if (typeof encoded === 'string') written = write(stream, encoded);
  else {
    // A message in parts (a result passed through as its bytes) still leaves in one system call.
    stream.cork();
    written = write(stream, encoded);
    uncork();
  }
  stream.cork();
  afterTaskSettles(uncork);
  return written;
}

/**
 * Runs `fn` once the current task (the event loop's callback now running) has settled: after
 * every microtask queued so far and every one they queue in turn (a chain of awaits of promises
 * settled by microtasks, however deep), before the event loop runs anything else. A
 * `process.nextTick` queued from a microtask waits until V8's microtask queue is empty. Answers
 * released by a records flush (a `setImmediate`) thus leave in the same check phase, not after
 * the next poll of I/O as a `setImmediate` of their own would (issue 19; measured in
 * bench/README.md). A chain that waits on a `nextTick` (a stream's write callback, an event
 * emitted in a tick) resumes after `fn`: its writes leave in a second `writev` of the same phase.
 */
function afterTaskSettles(fn: () => void): void {
  queueMicrotask(() => process.nextTick(fn));
}

/** What {@link write} answers for a message the stream took at once: settled, so shared. */
const TAKEN: Promise<void> = Promise.resolve();

function write(stream: NodeJS.WritableStream, encoded: string | readonly (string | Uint8Array)[]): Promise<void> {
  // A write error reaches `done` from a later tick (Node never calls a write's callback in the
  // write itself), after the promise below exists; a message the stream took at once has
  // settled already, and its error is the stream's `error` event, as before (issue 19: no
  // promise of its own for the message a lone call writes).
  let fail: ((err: Error) => void) | undefined;
  let failed: Error | undefined;
  const done = (err?: Error | null) => {
    if (!err) return;
    if (fail) fail(err);
    else failed = err;
  };
  let ok: boolean;
  try {
    if (typeof encoded === 'string') {
      ok = stream.write(encoded, done);
    } else {
      ok = true;
      for (const part of encoded) ok = stream.write(part, done) && ok;
    }
  } catch (err) {
    // A stream that throws from `write` (not Node's own): a rejection, as a write error is.
    return Promise.reject(err as Error);
  }
  if (ok && failed === undefined) return TAKEN;
  return new Promise<void>((resolve, reject) => {
    if (failed !== undefined) return reject(failed);
    fail = reject;
    void nextDrain(stream).then(resolve);
  });
}

/** Each stream's one pending wait for `drain`, shared by every write that found its buffer full. */
const drains = new WeakMap<NodeJS.WritableStream, Promise<void>>();

/**
 * Resolves at the stream's next `drain`. Every message written while the buffer is over its
 * high-water mark waits on the same listener: one per stream, not one per message, so a burst
 * of concurrent answers never trips Node's listener-leak warning (which would print to stderr
 * and cost an `Error` with its stack each time).
 */
function nextDrain(stream: NodeJS.WritableStream): Promise<void> {
  let drained = drains.get(stream);
  if (drained === undefined) {
    drained = new Promise<void>((resolve) =>
      stream.once('drain', () => {
        drains.delete(stream);
        resolve();
      }),
    );
    drains.set(stream, drained);
  }
  return drained;
}
