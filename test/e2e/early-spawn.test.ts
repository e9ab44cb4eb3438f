/**
 * The stdio upstreams start before the CLI loads its own modules (cold start, issue 6;
 * src/upstream/early-spawn.ts): each one once, adopted by its dial, and none left behind when
 * the broker refuses its config.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from './broker-support.js';
import { CLI, fixture, isAlive, nodeServer, startBroker, waitFor } from './helpers.js';

const scratch = mkdtempSync(join(tmpdir(), 'mcp-broker-early-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Live processes whose command line contains `text` (Linux /proc; elsewhere none are seen). */
function processesWith(text: string): number[] {
  const found: number[] = [];
  if (process.platform !== 'linux') return found;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(text)) found.push(Number(entry));
    } catch {
      // ended meanwhile
    }
  }
  return found;
}

const pidsIn = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number) : []);

describe('early start of the stdio upstreams', () => {
  it('starts each stdio upstream once (two with the same command line too), and the broker serves them', async () => {
    const mark = join(scratch, 'served.pids');
    const server = (extra: string[] = []) => nodeServer(fixture('mark.mjs'), { args: [fixture('mark.mjs'), ...extra], env: { MARK_FILE: mark } });
    const broker = await startBroker({ servers: { a: server(), b: server(), c: server(['other']) } });
    let pids: number[] = [];
    try {
      const names = (await broker.client.listTools()).tools.map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(['a__echo', 'b__echo', 'c__echo']));
      pids = pidsIn(mark);
      expect(pids).toHaveLength(3);
      expect(new Set(pids).size).toBe(3);
      expect(pids.every(isAlive)).toBe(true);
    } finally {
      await broker.close();
    }
    await waitFor(() => pids.every((p) => !isAlive(p)), 'the upstreams to end with the broker');
  });

  it('starts nothing early from a file the loader refuses, and reads a config given as a pipe once', async () => {
    const mark = join(scratch, 'never.pids');
    const config = join(scratch, 'reserved.json');
    const upstream = nodeServer(fixture('mark.mjs'), { env: { MARK_FILE: mark } });
    writeFileSync(config, JSON.stringify({ mcpServers: { a: upstream, broker: upstream } }));
    const run = await runCli(['--config', config]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/reserved/);
    expect(existsSync(mark)).toBe(false);

    // A config on a pipe (`-c <(cat servers.json)`) can be read once: the early start leaves it alone.
    const fifo = join(scratch, 'servers.fifo');
    execFileSync('mkfifo', [fifo]);
    const piped = JSON.stringify({
      mcpServers: { a: nodeServer(fixture('mark.mjs'), { env: { MARK_FILE: join(scratch, 'piped.pids') } }) },
      broker: { records: { path: join(scratch, 'piped.ndjson') }, dataDir: join(scratch, 'piped-data') },
    });
    const child = spawn(process.execPath, [CLI, '--config', fifo, '--transport', 'http', '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise((r) => child.once('exit', r));
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    await writeFile(fifo, piped);
    try {
      await waitFor(() => stderr.includes('serving http://') || child.exitCode !== null, 'the broker to serve or exit');
      expect(stderr).toContain('serving http://');
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  });

  it('ends every upstream it started early when the config is refused (exit 2)', async () => {
    const mark = join(scratch, 'refused.pids');
    const tag = `early-spawn-refused-${process.pid}`;
    const config = join(scratch, 'refused.json');
    writeFileSync(
      config,
      JSON.stringify({
        mcpServers: { a: nodeServer(fixture('mark.mjs'), { args: [fixture('mark.mjs'), tag], env: { MARK_FILE: mark } }) },
        functions: ['./no-such-module.mjs'],
        broker: { records: { path: join(scratch, 'calls.ndjson') }, dataDir: join(scratch, 'data') },
      }),
    );
    const run = await runCli(['--config', config]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/bad config/);
    // Whether or not it got as far as noting its pid, no upstream outlives the refusal.
    await waitFor(() => pidsIn(mark).every((p) => !isAlive(p)), 'early upstreams to end');
    await waitFor(() => processesWith(tag).length === 0, 'no process left with the tag');
  });
});
