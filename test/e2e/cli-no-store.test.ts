/**
 * A command that only reads or refuses leaves no state behind. `mcp-broker approvals list` and
 * `approvals approve|reject <unknown id>` and `approve <unknown tool>` run in a fresh folder
 * created `data/broker.sqlite` (and `data/`) to report nothing or to refuse; now, with no store
 * file, they answer as an empty store would (no parked calls; unknown id or tool, exit 2, the
 * same messages) and create no file or folder. A decision that is stored still creates the store.
 * Through the real CLI; build first (`npm run build`).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/index.js';
import { CLI } from './helpers.js';

const shared = mkdtempSync(join(tmpdir(), 'mcp-broker-e2e-no-store-'));
afterAll(() => rmSync(shared, { recursive: true, force: true }));

/** A fresh folder holding only `servers.json` (no upstreams; the store and records at their defaults, `./data/…`). */
function freshDir(): string {
  const dir = mkdtempSync(join(shared, 'fresh-'));
  writeFileSync(join(dir, 'servers.json'), JSON.stringify({ mcpServers: {} }));
  return dir;
}

/** Every file and folder under `dir` but `servers.json`. */
function tree(dir: string): string[] {
  const out: string[] = [];
  const walk = (at: string) => {
    for (const name of readdirSync(at)) {
      const path = join(at, name);
      const key = relative(dir, path);
      if (key === 'servers.json') continue;
      out.push(key);
      if (statSync(path).isDirectory()) walk(path);
    }
  };
  walk(dir);
  return out.sort();
}

function runCli(dir: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args, '--config', join(dir, 'servers.json')], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

describe('read-only commands and refusals create no store where there is none', () => {
  const cases: [args: string[], code: number, stdout: RegExp | string, stderr: RegExp | string][] = [
    [['approvals', 'list'], 0, /^ID\s+CREATED\s+TOOL\s+PRINCIPAL\s+ARGS\s+WHY\n0 parked calls\n$/, ''],
    [['approvals', 'list', '--json'], 0, '', ''],
    [['approvals', 'approve', 'no-such-id'], 2, '', 'mcp-broker: no parked call "no-such-id" waits for a decision (see mcp-broker approvals list)\n'],
    [['approvals', 'reject', 'no-such-id', '--reason', 'no'], 2, '', 'mcp-broker: no parked call "no-such-id" waits for a decision (see mcp-broker approvals list)\n'],
    [['approve', 'fs__write_file'], 2, '', /^mcp-broker: no tool "fs__write_file" is known to this broker .*--force/],
    [['calls'], 0, /^no records yet at .*calls\.ndjson\n$/, ''],
    [['calls', '--json'], 0, '', ''],
    [['check'], 0, /0 of 0 servers ready\n$/, ''],
  ];
  for (const [args, code, stdout, stderr] of cases) {
    it(`mcp-broker ${args.join(' ')} in a fresh folder: exit ${code}, no data/ or data/broker.sqlite made`, async () => {
      const dir = freshDir();
      const run = await runCli(dir, args);
      expect(run.code).toBe(code);
      if (typeof stdout === 'string') expect(run.stdout).toBe(stdout);
      else expect(run.stdout).toMatch(stdout);
      if (typeof stderr === 'string') expect(run.stderr).toBe(stderr);
      else expect(run.stderr).toMatch(stderr);
      expect(tree(dir)).toEqual([]);
    });
  }

  it('an existing data folder without a store file is left as it was (approvals list, approve of an unknown tool)', async () => {
    const dir = freshDir();
    mkdirSync(join(dir, 'data'));
    expect((await runCli(dir, ['approvals', 'list'])).code).toBe(0);
    expect((await runCli(dir, ['approve', 'fs__write_file'])).code).toBe(2);
    expect(tree(dir)).toEqual(['data']);
  });

  it('a decision that is stored still creates the store: approve of a built-in tool, revoke', async () => {
    let dir = freshDir();
    let run = await runCli(dir, ['approve', 'broker__reconnect']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('approved broker__reconnect for every principal');
    let store = SqliteStore.open(join(dir, 'data'));
    expect((await store.getApproval('broker__reconnect', 'local'))?.decision).toBe('approved');
    await store.close();

    dir = freshDir();
    run = await runCli(dir, ['revoke', 'fs__write_file']);
    expect(run.code).toBe(0);
    store = SqliteStore.open(join(dir, 'data'));
    expect((await store.getApproval('fs__write_file', 'local'))?.decision).toBe('revoked');
    await store.close();
  });
});
