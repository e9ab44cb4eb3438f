/**
 * A stdio broker whose client closes stdin while it starts exits as it does when the client
 * closes stdin after the start: `0`, unless the start fails within `broker.drainTimeoutMs` of the
 * close (exit 2, as with stdin open). It read nothing from stdin until its function modules had
 * loaded, so a client gone during a load that never settles went unnoticed: the broker ran on
 * for as long as anything kept the process alive (forever, for a module waiting on a socket), or
 * ended with Node's 13 ("unsettled top-level await") once nothing did. Requests sent before the
 * close are still owed answers: the start gets `broker.drainTimeoutMs` to finish, and a one-shot
 * pipe whose start finishes meanwhile gets every answer. Through the real CLI; build first
 * (`npm run build`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, fixture, writeConfig } from './helpers.js';

interface Run {
  child: ChildProcess;
  dir: string;
  stdout: () => string;
  stderr: () => string;
  /** Resolves once stderr holds `text`. */
  said: (text: string) => Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const runs: Run[] = [];
afterEach(() => {
  for (const run of runs.splice(0)) {
    if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
    rmSync(run.dir, { recursive: true, force: true });
  }
});

/** Serves on stdio (the default command) with `functions` and `broker`; stdin, stdout and stderr piped. */
function serve(functions: string[], broker: Record<string, unknown> = {}, env: Record<string, string> = {}): Run {
  const { dir, configPath } = writeConfig({}, { functions, broker, estate: { enabled: false } });
  const child = spawn(process.execPath, [CLI, '--config', configPath], { cwd: dir, env: { ...process.env, MCP_BROKER_LOG_FORMAT: 'json', ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin!.on('error', () => undefined);
  let stdout = '';
  let stderr = '';
  const waiting: { text: string; resolve: () => void }[] = [];
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on('data', (c: Buffer) => {
    stderr += c.toString();
    for (const w of waiting.splice(0)) (stderr.includes(w.text) ? w.resolve : () => waiting.push(w))();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const said = (text: string) =>
    new Promise<void>((resolve, reject) => {
      if (stderr.includes(text)) return resolve();
      waiting.push({ text, resolve });
      void exited.then(({ code }) => reject(new Error(`the CLI exited (${code}) before saying ${JSON.stringify(text)}\n--- stderr ---\n${stderr}`)));
    });
  const run = { child, dir, stdout: () => stdout, stderr: () => stderr, said, exited };
  runs.push(run);
  return run;
}

const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } };
const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' };
const toolsList = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
const lines = (...messages: object[]) => messages.map((m) => JSON.stringify(m) + '\n').join('');

describe('stdin closed while the broker starts', () => {
  for (const [what, env] of [
    ['a module that keeps the process alive (ran on forever)', {}],
    ['a module that leaves nothing running (ended 13, unsettled top-level await)', { FIXTURE_IDLE: '1' }],
  ] as const) {
    it(`with nothing sent, during a load that never settles: exit 0 once broker.drainTimeoutMs has passed, no records lock left (${what})`, async () => {
      const run = serve([fixture('functions/never-settles.mjs')], { drainTimeoutMs: 200 }, env);
      await run.said('never-settles: loading');
      run.child.stdin!.end();
      expect(await run.exited).toEqual({ code: 0, signal: null });
      expect(run.stdout()).toBe('');
      expect(run.stderr()).toContain('stdin closed while the broker started; exiting');
      expect(existsSync(join(run.dir, 'calls.ndjson.lock'))).toBe(false);
    });
  }

  it('with requests sent, during a load that never settles: exit 0 once broker.drainTimeoutMs has passed', async () => {
    const run = serve([fixture('functions/never-settles.mjs')], { drainTimeoutMs: 200 });
    await run.said('never-settles: loading');
    run.child.stdin!.end(lines(initialize, initialized));
    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(run.stderr()).toContain('the start has up to broker.drainTimeoutMs to finish');
    expect(run.stderr()).toContain('stdin closed while the broker started; exiting');
  });

  it('with nothing sent, during a load that then fails: exit 2 naming the module, as with stdin open (a closed stdin does not hide a bad module)', async () => {
    const run = serve([fixture('functions/loads-on-signal.mjs')], {}, { FIXTURE_FAIL: '1' });
    await run.said('loads-on-signal: loading');
    run.child.stdin!.end();
    await run.said('the start has up to broker.drainTimeoutMs to finish');
    run.child.kill('SIGUSR2');
    expect(await run.exited).toEqual({ code: 2, signal: null });
    expect(run.stderr()).toContain('mcp-broker: bad config: functions[0]: cannot load function module');
    expect(run.stderr()).not.toContain('stdin closed while the broker started; exiting');
    expect(existsSync(join(run.dir, 'calls.ndjson.lock'))).toBe(false);
  });

  it('with requests sent, during a load that then finishes: every request is answered, then exit 0 (a one-shot pipe)', async () => {
    const run = serve([fixture('functions/loads-on-signal.mjs')]);
    await run.said('loads-on-signal: loading');
    run.child.stdin!.end(lines(initialize, initialized, toolsList));
    // The broker has seen the end while the module still loads; now the load finishes.
    await run.said('the start has up to broker.drainTimeoutMs to finish');
    run.child.kill('SIGUSR2');
    expect(await run.exited).toEqual({ code: 0, signal: null });
    const answers = run.stdout().trim().split('\n').map((l) => JSON.parse(l) as { id: number; result?: { tools?: { name: string }[] } });
    expect(answers.map((a) => a.id)).toEqual([1, 2]);
    expect(answers[1]!.result!.tools!.map((t) => t.name)).toContain('slow_echo');
  });

  it('more than broker.maxMessageBytes sent while the start waits on a signal, stdin left open: served once it finishes (regression: reading paused there kept nothing alive, exit 13 under the client)', async () => {
    const run = serve([fixture('functions/loads-on-signal.mjs')], { maxMessageBytes: 1024 });
    // About 120 KB at once: past 1024 bytes reading pauses, and once the stream's own buffer is
    // full too stdin is no longer read at all (the rest waits in the pipe).
    const pings = Array.from({ length: 3000 }, (_, i) => ({ jsonrpc: '2.0', id: 10 + i, method: 'ping' }));
    run.child.stdin!.write(lines(initialize, initialized, ...pings));
    await run.said('loads-on-signal: loading');
    run.child.kill('SIGUSR2');
    const answered = () => run.stdout().trim().split('\n').filter(Boolean).length;
    await new Promise<void>((resolve, reject) => {
      run.child.stdout!.on('data', () => answered() === 1 + pings.length && resolve());
      void run.exited.then((how) => reject(new Error(`the CLI exited ${JSON.stringify(how)} before answering\n--- stderr ---\n${run.stderr()}`)));
    });
    run.child.stdin!.end();
    expect(await run.exited).toEqual({ code: 0, signal: null });
    const ids = run.stdout().trim().split('\n').map((l) => (JSON.parse(l) as { id: number }).id);
    expect(ids).toEqual([1, ...pings.map((p) => p.id)]);
  });

  it('stdin left open, a load that finishes: serves as before, and a close after the start exits 0', async () => {
    const run = serve([fixture('functions/loads-on-signal.mjs')]);
    await run.said('loads-on-signal: loading');
    run.child.stdin!.write(lines(initialize, initialized));
    run.child.kill('SIGUSR2');
    await new Promise<void>((resolve) => run.child.stdout!.on('data', () => run.stdout().includes('"id":1') && resolve()));
    run.child.stdin!.end(lines(toolsList));
    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(run.stdout()).toContain('slow_echo');
  });
});
