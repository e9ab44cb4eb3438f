/**
 * The client side of a stdio upstream: spawns the child in its own process group and speaks
 * newline-delimited JSON-RPC over its stdin/stdout with linear framing (cases F05, F06, F07,
 * F09, F10). Implements the SDK's `Transport`.
 *
 * - stdout and stderr are drained concurrently; stderr lines go to our log (debug), never our
 *   stdout. The line that says why the child failed ({@link ChildProcessTransport.stderrLine}) and
 *   how it ended ({@link ChildProcessTransport.exitDescription}) are kept for the upstream's status,
 *   which logs them (once per distinct reason; connection.ts).
 * - a non-JSON stdout line is logged and skipped (F07); an oversize line is logged and dropped,
 *   and when it was a response, its request fails at once with an error naming the limit.
 * - `send` honours backpressure: it resolves once the pipe took the bytes. The other way, the
 *   child's stdout is not read while our own stdout is congested (`wire/output-pressure.ts`).
 * - a UTF-8 BOM before the child's first line is dropped (`LineFramer`).
 * - `close()` ends stdin, waits `closeGraceMs`, then SIGTERMs and finally SIGKILLs the whole
 *   process group, so `sh -c` wrappers and grandchildren go too (F09). Whenever the child exits
 *   (closed or crashed), what is left of its process group is ended too.
 * - a spawn failure (ENOENT, EACCES, EAGAIN) rejects `start()` with a clear error and never
 *   throws out of an event handler (F10).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Transport, JSONRPCMessage } from '@modelcontextprotocol/client';
import { BrokerError } from '../shared/errors.js';
import { cut } from '../shared/cut.js';
import { CALL_TIMING, markCall } from '../shared/call-timing.js';
import { LineFramer, oversizeError, writeMessage, DEFAULT_MAX_MESSAGE_BYTES } from '../wire/framing.js';
import type { Logger } from '../shared/logger.js';
import { stdoutPressure, type OutputPressure } from '../wire/output-pressure.js';
import { isErrorLine, meaningfulStderrLine } from './stderr-line.js';

export interface ChildTransportOptions {
  command: string;
  args: readonly string[];
  cwd?: string;
  env: Record<string, string>;
  logger: Logger;
  /** Upper bound of one message, in bytes; default {@link DEFAULT_MAX_MESSAGE_BYTES}. */
  maxMessageBytes?: number;
  /** Time between stdin EOF and SIGTERM, then SIGTERM and SIGKILL, in ms; default 2000. */
  closeGraceMs?: number;
  /** While congested, the child's stdout is not read (its answers wait in its pipe); default the process's {@link stdoutPressure}. */
  outputPressure?: OutputPressure;
  /**
   * Scrubs a stray stdout line or a stderr line whole before anything cuts it: the log line
   * ({@link LOGGED_LINE_CHARS}), the stderr tail and error line kept for the status (the
   * gateway's scrubber). The logger and the status scrub again, but a cut through a secret
   * leaves a part they no longer recognise; absent, lines are kept as they came.
   */
  scrub?: (text: string) => string;
}

/** Longest stray stdout or stderr line logged, in characters (scrubbed first, then cut). */
export const LOGGED_LINE_CHARS = 2000;
/** How much of the child's last stderr lines is kept for its status and errors, in characters. */
const STDERR_TAIL_CHARS = 2048;
/** How much of a stderr line not yet ended is kept (its last characters). */
const STDERR_PARTIAL_CHARS = 8192;
/**
 * Of a stderr line whose start was dropped ({@link STDERR_PARTIAL_CHARS}), the first characters the
 * scrub leaves as they were, up to this many, are dropped too: the last characters of a secret the
 * drop ran through stand there, unrecognised by the scrub. A secret up to this long is covered.
 */
const STDERR_DROP_MARGIN = 1024;

/**
 * What this module keeps for the whole process, shared by every copy of it the process loads: the
 * CLI's early start runs from a small bundle of its own before the program's bundle loads
 * (cli-bundle.cts), and both must see the same children, exit hook and held signals.
 */
interface ProcessChildren {
  /** Every live child's pid, so a last-resort exit hook can end their process groups. */
  readonly liveGroups: Set<number>;
  exitHookInstalled: boolean;
  /** Children started ahead of their first dial, by spawn spec, oldest first. */
  readonly parked: Map<string, ParkedChild[]>;
  /** The signals still held by {@link prespawnChild}'s handler. */
  readonly held: Set<NodeJS.Signals>;
  /** That handler (one function, so any copy can remove it). */
  readonly exitNow: () => void;
}

const PROCESS_CHILDREN = Symbol.for('mcp-broker/child-transport');
const shared = ((globalThis as Record<symbol, ProcessChildren | undefined>)[PROCESS_CHILDREN] ??= {
  liveGroups: new Set(),
  exitHookInstalled: false,
  parked: new Map(),
  held: new Set(),
  exitNow: () => process.exit(0),
});
const { liveGroups, parked, held } = shared;

function installExitHook(): void {
  if (shared.exitHookInstalled) return;
  shared.exitHookInstalled = true;
  process.on('exit', () => {
    for (const pid of liveGroups) killGroup(pid, 'SIGKILL');
  });
}

/** Whether any process of the group `pgid` is still alive (POSIX). */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Ends what is left of a process group after its leader exited: grandchildren of a `sh -c` or
 * `npx` wrapper survive their parent (F09). SIGTERM, then SIGKILL after `graceMs`. Signals only
 * the group, never the bare pid, which may already belong to another process.
 */
async function reapGroup(pgid: number, graceMs: number): Promise<void> {
  if (process.platform === 'win32' || !groupAlive(pgid)) return;
  try {
    process.kill(-pgid, 'SIGTERM');
  } catch {
    return;
  }
  const until = Date.now() + graceMs;
  while (Date.now() < until) {
    await new Promise((r) => setTimeout(r, 50).unref());
    if (!groupAlive(pgid)) return;
  }
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    /* gone meanwhile */
  }
}

/** What a stdio upstream is started with. */
export type ChildSpawnSpec = Pick<ChildTransportOptions, 'command' | 'args' | 'cwd' | 'env'>;

function spawnChild(spec: ChildSpawnSpec): ChildProcess {
  return spawn(spec.command, [...spec.args], {
    cwd: spec.cwd,
    env: spec.env,
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: process.platform !== 'win32',
    windowsHide: true,
  });
}

interface ParkedChild {
  readonly child: ChildProcess;
  spawned: boolean;
  failed: boolean;
  /** Taken by a transport, which then owns its end. */
  adopted: boolean;
}

/** The signals the CLI shuts down on; until its handlers are in, they end the process at once. */
const SHUTDOWN_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/**
 * Until the CLI installs its shutdown: a shutdown signal ends the process through `exit` (code 0),
 * whose hooks end the parked children (Node's default action would leave them running, in their
 * own process groups) and release the records lock (audit/records-lock.ts). Held by
 * {@link prespawnChild}, and by the CLI's `serve` before it builds the gateway (a broker without
 * stdio upstreams prespawns nothing); handed over by {@link handOverSignals}. Idempotent.
 */
export function holdSignals(): void {
  if (held.size > 0) return;
  for (const signal of SHUTDOWN_SIGNALS) {
    held.add(signal);
    process.on(signal, shared.exitNow);
  }
}

/** Removes what {@link prespawnChild} did for `signals` (default: all three); see {@link handOverSignals}. */
export function releaseSignals(signals: readonly NodeJS.Signals[] = SHUTDOWN_SIGNALS): void {
  for (const signal of signals) if (held.delete(signal)) process.off(signal, shared.exitNow);
}

/**
 * Hands `signals` from {@link prespawnChild}'s handler to the CLI's: `install` adds the CLI's
 * listeners, and only then is the early one removed. A signal the process has taken in but not
 * yet dispatched (it waits for the next turn of the event loop) goes to the listeners of Node's
 * signal handle at that turn; removing the last listener first closes the handle and loses the
 * signal: a SIGTERM in the turn the CLI swapped its handlers was dropped, and the broker went on
 * serving (test/e2e/signal-handover.test.ts).
 */
export function handOverSignals(signals: readonly NodeJS.Signals[], install: () => void): void {
  install();
  releaseSignals(signals);
}

const specKey = (spec: ChildSpawnSpec) => JSON.stringify([spec.command, spec.args, spec.cwd ?? null, spec.env]);

/**
 * Starts a stdio upstream's process now, before its first dial, so it loads while the broker
 * does (cold start, issue 6); the first {@link ChildProcessTransport} with the same spec adopts
 * it and only then speaks to it (its `initialize` still waits for the downstream client). A child
 * that failed to start or exited meanwhile is dropped, and the transport spawns afresh (the
 * error is then reported as usual). Never throws; ended with the process like any child.
 */
export function prespawnChild(spec: ChildSpawnSpec): void {
  installExitHook();
  holdSignals();
  let child: ChildProcess;
  try {
    child = spawnChild(spec);
  } catch {
    return;
  }
  const entry: ParkedChild = { child, spawned: false, failed: false, adopted: false };
  child.once('error', () => (entry.failed = true));
  child.once('exit', () => (entry.failed = true));
  child.once('spawn', () => {
    entry.spawned = true;
    if (child.pid) liveGroups.add(child.pid);
  });
  child.once('close', () => {
    // Never adopted (ended by settleParked, or died on its own): forget its group once it is
    // gone, so the exit hook never signals a pid that may have been reused by then.
    const pid = child.pid;
    if (!entry.adopted && pid) void reapGroup(pid, 2000).finally(() => liveGroups.delete(pid));
  });
  const key = specKey(spec);
  parked.set(key, [...(parked.get(key) ?? []), entry]);
}

const alive = (entry: ParkedChild) => !entry.failed && entry.child.exitCode === null && entry.child.signalCode === null;

/**
 * Makes the parked children what `specs` asks for, one per entry (two servers with the same
 * spec get two children): starts the missing ones ({@link prespawnChild}) and ends any other
 * parked child. Called once the config is validated, so a child started earlier from the raw
 * file (`early-spawn.ts`) is kept only when the validated config starts the very same process.
 */
export function settleParked(specs: readonly ChildSpawnSpec[]): void {
  const wanted = new Map<string, ChildSpawnSpec[]>();
  for (const spec of specs) wanted.set(specKey(spec), [...(wanted.get(specKey(spec)) ?? []), spec]);
  for (const [key, list] of parked) {
    const keep = wanted.get(key)?.length ?? 0;
    const live = list.filter(alive);
    // Only live ones are signalled (a child not yet reaped still owns its pid), and by group.
    for (const entry of live.slice(keep)) signalGroup(entry.child.pid, 'SIGKILL');
    if (keep === 0 || live.length === 0) parked.delete(key);
    else parked.set(key, live.slice(0, keep));
  }
  for (const [key, list] of wanted) {
    const have = parked.get(key)?.length ?? 0;
    for (const spec of list.slice(have)) prespawnChild(spec);
  }
}

/** The parked children's process ids by spawn spec (diagnostics and tests). */
export function parkedChildren(): Array<{ spec: string; pids: number[] }> {
  return [...parked].map(([spec, list]) => ({ spec, pids: list.filter(alive).map((e: ParkedChild) => e.child.pid!).filter(Boolean) }));
}

/** A parked child for `spec` that is still alive, if any. */
function adoptParked(spec: ChildSpawnSpec): ParkedChild | undefined {
  const key = specKey(spec);
  const list = parked.get(key);
  while (list?.length) {
    const entry = list.shift()!;
    if (alive(entry)) {
      entry.adopted = true;
      return entry;
    }
  }
  parked.delete(key);
  return undefined;
}

/** Signals the process group `pgid` only, never a bare pid (it may be another process's by now). */
function signalGroup(pgid: number | undefined, signal: NodeJS.Signals): boolean {
  if (!pgid) return false;
  try {
    process.kill(process.platform === 'win32' ? pgid : -pgid, signal);
    return true;
  } catch {
    return false; // gone meanwhile
  }
}

/** Signals the group of a live child, else the child alone (a child not in a group of its own). */
function killGroup(pid: number, signal: NodeJS.Signals): void {
  if (signalGroup(pid, signal)) return;
  try {
    process.kill(pid, signal);
  } catch {
    /* already gone */
  }
}

export class ChildProcessTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private child?: ChildProcess;
  private closed = false;
  private exited?: Promise<void>;
  /** Settles once the child's process group is gone, leader and stragglers alike. */
  private reaped: Promise<void> = Promise.resolve();
  private readonly framer: LineFramer;
  /** The last {@link STDERR_TAIL_CHARS} of the child's ended stderr lines, each scrubbed whole. */
  private stderrTail = '';
  /** The stderr line still being written (no newline yet), as it came. */
  private stderrPartial = '';
  /** Whether {@link stderrPartial} lost its start (it grew past {@link STDERR_PARTIAL_CHARS}). */
  private stderrPartialCut = false;
  /** Ids of our requests the child has not answered (nor been told to cancel): while any are, it is busy. */
  private readonly inFlight = new Set<unknown>();
  /** The first stderr line that states an error ({@link isErrorLine}), kept even when the tail moves on. */
  private errorLine?: string;
  private exit?: { code: number | null; signal: NodeJS.Signals | null };

  constructor(private readonly options: ChildTransportOptions) {
    const log = options.logger;
    this.framer = new LineFramer(
      {
        message: (m) => {
          if (typeof m !== 'object' || m === null || Array.isArray(m)) {
            // A batch element that is no message (`[null]`, `[1]`), or an empty batch: nothing to deliver.
            log.warn({ line: this.loggedLine(JSON.stringify(m)) }, 'upstream wrote a JSON value that is not a message to stdout; skipped');
            return;
          }
          const id = (m as { id?: unknown }).id;
          if (id !== undefined && !('method' in m)) this.inFlight.delete(id);
          this.onmessage?.(m);
        },
        noise: (line) => log.warn({ line: this.loggedLine(line) }, 'upstream wrote a non-JSON line to stdout; skipped'),
        oversize: (bytes, ends) => {
          log.error({ bytes, maxMessageBytes: this.maxBytes }, 'upstream sent a message over maxMessageBytes; dropped');
          // A dropped response becomes an error response, so the request it answers fails now, not at its deadline.
          if (ends?.kind === 'response') this.onmessage?.(oversizeError(ends, bytes, this.maxBytes, 'the upstream'));
        },
      },
      this.maxBytes,
    );
  }

  private get maxBytes(): number {
    return this.options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  }

  private scrubbed(text: string): string {
    return this.options.scrub ? this.options.scrub(text) : text;
  }

  /**
   * A stderr line scrubbed whole; one whose start was dropped (`cut`) also without what the scrub
   * left as it was of its first {@link STDERR_DROP_MARGIN} characters (there stand the last
   * characters of a secret the drop ran through), marked `…`.
   */
  private scrubbedStderr(line: string, cut: boolean): string {
    const clean = this.scrubbed(line);
    if (!cut) return clean;
    let same = 0;
    while (same < STDERR_DROP_MARGIN && same < clean.length && line.charCodeAt(same) === clean.charCodeAt(same)) same++;
    return `…${clean.slice(same)}`;
  }

  /** A line as logged: scrubbed whole (stdout noise here; stderr lines come scrubbed), then cut at {@link LOGGED_LINE_CHARS}. */
  private loggedLine(line: string, clean = this.scrubbed(line)): string {
    return cut(clean, LOGGED_LINE_CHARS);
  }

  /** The child's pid once started. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The last lines the child wrote to stderr (up to 2 KB), scrubbed, for error messages. */
  get stderr(): string {
    if (!this.stderrPartial) return this.stderrTail;
    return (this.stderrTail + this.scrubbedStderr(this.stderrPartial, this.stderrPartialCut)).slice(-STDERR_TAIL_CHARS);
  }

  /**
   * The stderr line that says why the child failed: the first that states an error, else the
   * last meaningful one of the tail ({@link meaningfulStderrLine}); undefined when it wrote none.
   */
  get stderrLine(): string | undefined {
    return this.errorLine ?? meaningfulStderrLine(this.stderr);
  }

  /** How the child ended (`exited with code 1`, `killed by SIGTERM`); undefined while it runs. */
  get exitDescription(): string | undefined {
    if (!this.exit) return undefined;
    return this.exit.signal ? `killed by ${this.exit.signal}` : `exited with code ${this.exit.code}`;
  }

  start(): Promise<void> {
    if (this.child) throw new BrokerError('transport_started', 'transport already started');
    installExitHook();
    const { command } = this.options;
    return new Promise<void>((resolve, reject) => {
      const adopted = adoptParked(this.options);
      let child: ChildProcess;
      try {
        child = adopted?.child ?? spawnChild(this.options);
      } catch (err) {
        return reject(spawnError(command, err));
      }
      this.child = child;
      let started = false;
      child.once('error', (err) => {
        if (!started) return reject(spawnError(command, err));
        this.onerror?.(err);
      });
      const onSpawn = () => {
        started = true;
        if (child.pid) liveGroups.add(child.pid);
        resolve();
      };
      if (adopted?.spawned) onSpawn();
      else child.once('spawn', onSpawn);
      this.exited = new Promise<void>((done) => {
        child.once('close', (code, signal) => {
          const pid = child.pid;
          if (pid) {
            // Kept in liveGroups until the stragglers are gone, so the exit hook still ends them.
            this.reaped = reapGroup(pid, this.options.closeGraceMs ?? 2000).finally(() => liveGroups.delete(pid));
          }
          this.exit = { code, signal };
          this.inFlight.clear();
          // The upstream's status says why, logged once per distinct reason (connection.ts).
          if (!this.closed) this.options.logger.debug({ code, signal, stderr: this.stderr.slice(-500) }, 'upstream process exited');
          this.closed = true;
          this.framer.reset();
          this.onclose?.();
          done();
        });
      });
      child.stdout!.on('data', (chunk: Buffer) => {
        if (CALL_TIMING) markCall('upstream read');
        this.framer.push(chunk);
      });
      const pressure = this.options.outputPressure ?? stdoutPressure;
      const onPressure = (congested: boolean) => (congested ? child.stdout!.pause() : child.stdout!.resume());
      if (pressure.congested) child.stdout!.pause();
      pressure.on('change', onPressure);
      child.once('close', () => pressure.off('change', onPressure));
      child.stdout!.on('error', (err) => this.onerror?.(err));
      child.stdin!.on('error', (err) => {
        // EPIPE after the child died: the close handler reports it.
        if ((err as NodeJS.ErrnoException).code !== 'EPIPE') this.onerror?.(err);
      });
      child.stderr!.setEncoding('utf8');
      child.stderr!.on('data', (text: string) => {
        const lines = (this.stderrPartial + text).split('\n');
        // An unended line is kept by its last 8 KiB: far more than the tail shows of it.
        const unended = lines.pop() ?? '';
        // The first ended line is the one kept unended so far: cut when that lost its start.
        let cutFirst = this.stderrPartialCut;
        if (lines.length) this.stderrPartialCut = false;
        this.stderrPartial = unended.slice(-STDERR_PARTIAL_CHARS);
        if (unended.length > STDERR_PARTIAL_CHARS) this.stderrPartialCut = true;
        for (const line of lines) {
          // Scrubbed whole before anything cuts it (the tail, the error line, the log line).
          const clean = this.scrubbedStderr(line, cutFirst);
          cutFirst = false;
          this.stderrTail = (this.stderrTail + clean + '\n').slice(-STDERR_TAIL_CHARS);
          if (!clean.trim()) continue;
          if (this.errorLine === undefined && isErrorLine(clean)) this.errorLine = meaningfulStderrLine(clean);
          if (this.options.logger.isLevelEnabled('debug')) this.options.logger.debug({ stderr: this.loggedLine(line, clean) }, 'upstream stderr');
        }
      });
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin || this.closed || stdin.destroyed) {
      return Promise.reject(new BrokerError('upstream_closed', 'upstream process is not running'));
    }
    const m = message as { id?: unknown; method?: unknown; params?: { requestId?: unknown } };
    // With requests of ours in flight the child has work: this message joins the turn's one write.
    const written = writeMessage(stdin, message, this.inFlight.size > 0);
    // A request of ours is in flight until answered or cancelled (our answers to the child's requests have no method).
    if (m.method !== undefined && m.id !== undefined) this.inFlight.add(m.id);
    else if (m.method === 'notifications/cancelled') this.inFlight.delete(m.params?.requestId);
    if (CALL_TIMING) markCall('upstream write');
    return written;
  }

  async close(): Promise<void> {
    const child = this.child;
    const grace = this.options.closeGraceMs ?? 2000;
    if (!child || child.exitCode !== null || child.signalCode !== null) {
      this.closed = true;
      if (child) await this.waitExit(grace);
      return this.reaped;
    }
    this.closed = true;
    child.stdin?.end();
    if (!(await this.waitExit(grace))) {
      if (child.pid) killGroup(child.pid, 'SIGTERM');
      if (!(await this.waitExit(grace))) {
        if (child.pid) killGroup(child.pid, 'SIGKILL');
        await this.waitExit(grace);
      }
    }
    await this.reaped;
  }

  /**
   * Ends the child's whole process group at once (shutdown path). True when a running child was
   * signalled; false when there is none, or it has exited or been killed already (its pid may be
   * another process's by now).
   */
  kill(signal: NodeJS.Signals = 'SIGKILL'): boolean {
    this.closed = true;
    const child = this.child;
    if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return false;
    killGroup(child.pid, signal);
    return true;
  }

  private waitExit(ms: number): Promise<boolean> {
    if (!this.exited) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ms);
      timer.unref();
      void this.exited!.then(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }
}

function spawnError(command: string, err: unknown): BrokerError {
  const code = (err as NodeJS.ErrnoException)?.code;
  const what =
    code === 'ENOENT' ? 'command not found' : code === 'EACCES' ? 'permission denied' : code ? `spawn failed (${code})` : 'spawn failed';
  return new BrokerError('spawn_failed', `cannot start "${command}": ${what}`, { cause: err, data: { errno: code } });
}
