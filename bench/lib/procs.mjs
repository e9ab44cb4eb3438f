/**
 * Process plumbing for the benchmark: free ports, HTTP servers started as child processes in
 * their own process group (so a proxy's own children go with it), resident memory from /proc.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';

/** A free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Resident memory of a process in MiB (VmRSS of /proc/<pid>/status), or undefined. */
export function rssMiB(pid) {
  if (!pid) return undefined;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1]);
    return Number.isFinite(kb) ? kb / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** CPU time (user + system) a process has used so far, in ms (from /proc/<pid>/stat, 10 ms ticks). */
export function cpuMs(pid) {
  if (!pid) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of stat (utime, stime) are the 12th and 13th after the command name.
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

/** Read and write system calls a process has made so far (syscr + syscw of /proc/<pid>/io), or undefined. */
export function syscalls(pid) {
  if (!pid) return undefined;
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    const count = (name) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(io)?.[1]);
    const total = count('syscr') + count('syscw');
    return Number.isFinite(total) ? total : undefined;
  } catch {
    return undefined;
  }
}

/** The pids of a process's direct children (from /proc/<pid>/task/<tid>/children), or []. */
export function childPids(pid) {
  if (!pid) return [];
  try {
    const out = [];
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      for (const child of readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/)) if (child) out.push(Number(child));
    }
    return out;
  } catch {
    return [];
  }
}

/** The last `max` characters a stream wrote, kept for error messages; drains the stream. */
export function tail(stream, max = 4000) {
  const box = { text: '' };
  stream?.setEncoding?.('utf8');
  stream?.on('data', (chunk) => {
    box.text = (box.text + chunk).slice(-max);
  });
  return box;
}

/**
 * Spawns `process.execPath args` in its own process group and waits until `port` accepts TCP
 * connections. Rejects (with the stderr tail) if the process exits first or `timeoutMs` passes.
 * The child's stdin stays open: servers that stop on stdin EOF live as long as we hold it.
 */
export async function spawnListening(args, { port, env, timeoutMs = 30_000 }) {
  const started = performance.now();
  const child = spawn(process.execPath, args, {
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
    env: { ...process.env, ...env },
  });
  const out = tail(child.stdout);
  const err = tail(child.stderr);
  let exit;
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve((exit = { code, signal }))));
  child.once('error', () => undefined);
  const deadline = started + timeoutMs;
  for (;;) {
    if (exit) {
      const why = (err.text || out.text).trim().split('\n').slice(-3).join(' | ');
      throw Object.assign(new Error(`exited with ${exit.code ?? exit.signal} before listening${why ? `: ${why}` : ''}`), { exit, stderr: err.text });
    }
    if (performance.now() > deadline) {
      killGroup(child.pid, 'SIGKILL');
      throw new Error(`not listening on port ${port} after ${timeoutMs} ms`);
    }
    if (await canConnect(port)) break;
    await new Promise((r) => setTimeout(r, 2));
  }
  return {
    pid: child.pid,
    child,
    stderr: err,
    /** SIGTERM to the group, SIGKILL after 3 s; resolves when the process is gone. */
    async stop() {
      if (exit) return;
      child.stdin.end();
      killGroup(child.pid, 'SIGTERM');
      const timer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), 3000);
      await exited;
      clearTimeout(timer);
      killGroup(child.pid, 'SIGKILL');
    },
  };
}

function canConnect(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export function killGroup(pid, signal) {
  if (!pid) return;
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      /* gone */
    }
  }
}
