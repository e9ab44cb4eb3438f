/**
 * stdin of a stdio broker while it starts: function modules and OpenAPI documents load before
 * the transport reads a byte (`Gateway.prepare`, so a bad one exits 2 before serving), and a
 * client that closed stdin meanwhile went unnoticed: a load that never settles kept the broker
 * running with nobody to serve. Held here, stdin is read from the start; what arrives is kept
 * and handed to the transport ({@link HeldStdin.release}) as if it had just arrived.
 *
 * An end of stdin during the start gives the start `graceMs` (`broker.drainTimeoutMs`) to
 * settle: requests sent before the end are owed answers (as after the start, `stdio-server.ts`),
 * and a start that fails meanwhile is still reported as such (a module that does not load: exit
 * 2, as with stdin open). Only a start still running when the grace has passed is left: the
 * client is gone.
 */
import { Readable } from 'node:stream';

/** The bytes JSON allows between messages: a stdin of only these sent no request. */
const JSON_WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

export class HeldStdin {
  private readonly chunks: Buffer[] = [];
  private bytes = 0;
  /** Whether a byte other than whitespace arrived (a request that may be owed an answer). */
  private sent = false;
  private ended = false;
  private released = false;
  /**
   * Set while reading is paused at `maxBytes`: a paused stdin keeps nothing running, so a start
   * that waits on nothing else (a module awaiting a signal) would end the process (13) under a
   * client still connected. This holds it until {@link release}.
   */
  private keepAlive?: NodeJS.Timeout;
  private onEnded!: () => void;
  /** Settles when stdin ends (or fails: nothing more can be read from it) while held. */
  private readonly end = new Promise<void>((resolve) => (this.onEnded = resolve));
  private readonly onData = (chunk: Buffer) => {
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    if (!this.sent) this.sent = chunk.some((byte) => !JSON_WHITESPACE.has(byte));
    // That much sent is a client owed answers, not one gone: reading waits for the transport,
    // and the process stays for it (its end cannot be seen until reading resumes).
    if (this.bytes >= this.maxBytes && !this.keepAlive) {
      this.stdin.pause();
      this.keepAlive = setInterval(() => undefined, 1 << 30);
    }
  };
  private readonly onEnd = () => {
    this.ended = true;
    this.onEnded();
  };

  /**
   * Starts reading `stdin` (owned by the caller; never closed here), keeping at most about
   * `maxBytes` (`broker.maxMessageBytes`) before reading pauses until {@link release}; while it is
   * paused the process is kept alive, and an end of stdin is seen only once the transport reads.
   */
  constructor(
    private readonly stdin: Readable,
    private readonly maxBytes: number,
  ) {
    stdin.on('data', this.onData);
    stdin.once('end', this.onEnd);
    stdin.once('error', this.onEnd);
  }

  /** Whether a request (a byte other than JSON whitespace) arrived before stdin ended or was released. */
  get requestsSent(): boolean {
    return this.sent;
  }

  /**
   * Waits for `start` to settle (`true`; fulfilled or rejected, await it for which) unless the
   * client goes first (`false`): stdin ends and `graceMs` passes after the end before `start`
   * settles. `onGrace` is called when that grace begins (stdin ended, `start` still running).
   */
  async outlastsClient(start: Promise<unknown>, graceMs: number, onGrace?: () => void): Promise<boolean> {
    let done = false;
    const settled = start.then(
      () => (done = true),
      () => (done = true),
    );
    let timer: NodeJS.Timeout | undefined;
    const gone = this.end.then(() => {
      // The start won already (stdin ended before the transport read it): no grace to give.
      if (done) return new Promise<false>(() => undefined);
      onGrace?.();
      return new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), graceMs)));
    });
    try {
      return await Promise.race([settled, gone]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Stops holding and answers the stream for the transport to read: stdin itself, paused, with
   * what was held put back in front (the reader resumes it); once stdin has ended, a stream of
   * what was held that then ends. Once only.
   */
  release(): Readable {
    if (this.released) throw new Error('HeldStdin.release: already released');
    this.released = true;
    clearInterval(this.keepAlive);
    this.stdin.pause();
    this.stdin.off('data', this.onData);
    this.stdin.off('end', this.onEnd);
    this.stdin.off('error', this.onEnd);
    const held = Buffer.concat(this.chunks, this.bytes);
    this.chunks.length = 0;
    if (this.ended) return Readable.from(held.length > 0 ? [held] : [], { objectMode: false });
    if (held.length > 0) this.stdin.unshift(held);
    return this.stdin;
  }
}
