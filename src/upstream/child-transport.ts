/**
 * The client side of a stdio upstream: spawns the child in its own process group and speaks
 * newline-delimited JSON-RPC over its stdin/stdout with linear framing (cases F05, F06, F07,
 * F09, F10). Implements the SDK's `Transport`.
 *
 * - stdout and stderr are drained concurrently; stderr lines go to our log, never our stdout.
 * - a non-JSON stdout line is logged and skipped (F07); an oversize line is logged and dropped.
 * - `send` honours backpressure: it resolves once the pipe took the bytes.
 * - `close()` ends stdin, waits `closeGraceMs`, then SIGTERMs and finally SIGKILLs the whole
 *   process group, so `sh -c` wrappers and grandchildren go too (F09). Whenever the child exits
 *   (closed or crashed), what is left of its process group is ended too.
 * - a spawn failure (ENOENT, EACCES, EAGAIN) rejects `start()` with a clear error and never
 *   throws out of an event handler (F10).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { BrokerError } from '../shared/errors.js';
import { LineFramer, writeMessage, DEFAULT_MAX_MESSAGE_BYTES } from '../shared/framing.js';
import type { Logger } from '../shared/logger.js';

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
}

/** Every live child's pid, so a last-resort exit hook can end their process groups. */
const liveGroups = new Set<number>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
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

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(process.platform === 'win32' ? pid : -pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      /* already gone */
    }
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
  private stderrTail = '';

  constructor(private readonly options: ChildTransportOptions) {
    const log = options.logger;
    this.framer = new LineFramer(
      {
        message: (m) => this.onmessage?.(m),
        noise: (line) => log.warn({ line: line.slice(0, 2000) }, 'upstream wrote a non-JSON line to stdout; skipped'),
        oversize: (bytes) =>
          log.error({ bytes, maxMessageBytes: this.maxBytes }, 'upstream sent a message over maxMessageBytes; dropped'),
      },
      this.maxBytes,
    );
  }

  private get maxBytes(): number {
    return this.options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  }

  /** The child's pid once started. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The last lines the child wrote to stderr (up to 2 KB), for error messages. */
  get stderr(): string {
    return this.stderrTail;
  }

  start(): Promise<void> {
    if (this.child) throw new BrokerError('transport_started', 'transport already started');
    installExitHook();
    const { command, args, cwd, env } = this.options;
    return new Promise<void>((resolve, reject) => {
      let child: ChildProcess;
      try {
        child = spawn(command, [...args], {
          cwd,
          env,
          stdio: ['pipe', 'pipe', 'pipe'],
          detached: process.platform !== 'win32',
          windowsHide: true,
        });
      } catch (err) {
        return reject(spawnError(command, err));
      }
      this.child = child;
      let started = false;
      child.once('error', (err) => {
        if (!started) return reject(spawnError(command, err));
        this.onerror?.(err);
      });
      child.once('spawn', () => {
        started = true;
        if (child.pid) liveGroups.add(child.pid);
        resolve();
      });
      this.exited = new Promise<void>((done) => {
        child.once('close', (code, signal) => {
          const pid = child.pid;
          if (pid) {
            // Kept in liveGroups until the stragglers are gone, so the exit hook still ends them.
            this.reaped = reapGroup(pid, this.options.closeGraceMs ?? 2000).finally(() => liveGroups.delete(pid));
          }
          if (!this.closed) {
            this.options.logger.warn({ code, signal, stderr: this.stderrTail.slice(-500) }, 'upstream process exited');
          }
          this.closed = true;
          this.framer.reset();
          this.onclose?.();
          done();
        });
      });
      child.stdout!.on('data', (chunk: Buffer) => this.framer.push(chunk));
      child.stdout!.on('error', (err) => this.onerror?.(err));
      child.stdin!.on('error', (err) => {
        // EPIPE after the child died: the close handler reports it.
        if ((err as NodeJS.ErrnoException).code !== 'EPIPE') this.onerror?.(err);
      });
      let partial = '';
      child.stderr!.setEncoding('utf8');
      child.stderr!.on('data', (text: string) => {
        this.stderrTail = (this.stderrTail + text).slice(-2048);
        const lines = (partial + text).split('\n');
        partial = lines.pop() ?? '';
        if (partial.length > 8192) partial = '';
        for (const line of lines) if (line.trim()) this.options.logger.debug({ stderr: line.slice(0, 2000) }, 'upstream stderr');
      });
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin || this.closed || stdin.destroyed) {
      return Promise.reject(new BrokerError('upstream_closed', 'upstream process is not running'));
    }
    return writeMessage(stdin, message);
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

  /** Ends the child's whole process group at once (shutdown path). */
  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    this.closed = true;
    if (this.child?.pid && this.child.exitCode === null) killGroup(this.child.pid, signal);
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
