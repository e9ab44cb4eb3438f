/**
 * `mcp-broker check` (issue 18 §6) through the built CLI: it starts every upstream, prints one
 * row per server (state, tools, the error line), and exits 0 only when the servers that count
 * are ready; a bad config is exit 2. Build first (`npm run build`).
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, startBroker, writeConfig } from '../e2e/helpers.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Runs `mcp-broker check` on `servers`; resolves with the exit code and output. */
function check(servers: Record<string, unknown>, args: string[] = []): Promise<{ code: number | null; stdout: string; stderr: string; dir: string; recordsPath: string }> {
  const { dir, configPath, recordsPath } = writeConfig(servers);
  dirs.push(dir);
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, 'check', '--config', configPath, ...args], { cwd: dir, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr, dir, recordsPath });
    });
  });
}

const healthy = { u1: nodeServer(fixture('echo.mjs')) };
const crashing = {
  ...healthy,
  lost: nodeServer(fixture('missing-file.js')),
  throws: nodeServer(fixture('throws-at-start.mjs')),
};

describe('mcp-broker check', () => {
  it('issue 18: with a crashing script beside a working server it prints each state, tool count and error line, and exits 1', async () => {
    const run = await check(crashing);
    expect(run.code).toBe(1);
    const lines = run.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^SERVER\s+STATE\s+TOOLS\s+ERROR$/);
    expect(lines[1]).toMatch(/^u1\s+ready\s+4$/);
    expect(lines[2]).toMatch(/^lost\s+failed\s+0\s+exited with code 1 before it was ready: Error: Cannot find module '[^']*missing-file\.js'$/);
    expect(lines[3]).toMatch(/^throws\s+failed\s+0\s+exited with code 1 before it was ready: Error: fixture failed at start: no database configured$/);
    expect(lines.at(-1)).toBe('1 of 3 servers ready; not ready: lost, throws');
    // Nothing was served, so nothing was recorded; the logs stay quiet by default.
    expect(existsSync(run.recordsPath)).toBe(false);
    expect(run.stderr).toBe('');
  }, 40_000);

  it('a URL with nothing listening names the refused connection, not only fetch failed', async () => {
    // A port just freed: nothing listens on it.
    const port = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        server.close(() => resolve(port));
      });
    });
    const run = await check({ web: { url: `http://127.0.0.1:${port}/mcp` } });
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(new RegExp(`^web\\s+failed\\s+0\\s+.*fetch failed \\(connect ECONNREFUSED 127\\.0\\.0\\.1:${port}\\)$`, 'm'));
  }, 40_000);

  it('with only healthy servers it exits 0', async () => {
    const run = await check({ ...healthy, u2: nodeServer(fixture('echo.mjs')) });
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^u2\s+ready\s+4$/m);
    expect(run.stdout.trim().split('\n').at(-1)).toBe('2 of 2 servers ready');
  }, 40_000);

  it('only the servers marked required count when some are; --json prints one document', async () => {
    const run = await check({ u1: { ...healthy.u1, required: true }, lost: crashing.lost }, ['--json']);
    expect(run.code).toBe(0);
    const answer = JSON.parse(run.stdout) as { ready: boolean; servers: Array<Record<string, unknown>> };
    expect(answer.ready).toBe(true);
    expect(answer.servers[0]).toEqual({ server: 'u1', state: 'ready', required: true, tools: 4 });
    expect(answer.servers[1]).toMatchObject({ server: 'lost', state: 'failed', required: false, tools: 0, errorCode: 'exited' });
    expect(answer.servers[1]!.error).toContain('Cannot find module');

    const required = await check({ u1: healthy.u1, lost: { ...crashing.lost, required: true } }, ['--json']);
    expect(required.code).toBe(1);
    expect(JSON.parse(required.stdout)).toMatchObject({ ready: false });
  }, 40_000);

  it('a bad config is exit 2 naming the JSON path', async () => {
    const { dir, configPath } = writeConfig({});
    dirs.push(dir);
    writeFileSync(configPath, JSON.stringify({ mcpServers: { u1: { command: 1 } } }));
    const run = await new Promise<{ code: number | null; stderr: string }>((resolve) =>
      execFile(process.execPath, [CLI, 'check', '--config', join(dir, 'servers.json')], (err, _out, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stderr })),
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('mcpServers.u1.command');
  });

  it('a policy.output.deny pattern that does not compile is exit 2 naming its path, every one at once (it was exit 1, thrown after the load)', async () => {
    const { dir, configPath } = writeConfig({});
    dirs.push(dir);
    writeFileSync(configPath, JSON.stringify({ mcpServers: healthy, policy: { output: { deny: ['[', 'ok', '(unclosed'] } } }));
    const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
      execFile(process.execPath, [CLI, 'check', '--config', configPath], (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr })),
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('policy.output.deny[0]: is not a valid regular expression');
    expect(run.stderr).toContain('policy.output.deny[2]: is not a valid regular expression');
    expect(run.stderr).not.toContain('policy.output.deny[1]');
    expect(run.stdout).toBe('');
  });
});

/**
 * Runs the built CLI with `args` (`serve` when they name no command) in `cwd`, stdin closed (a
 * serve that starts ends at once). `asOther`: as another user (uid 65534) when this runs as
 * root, so that permissions apply. Resolves with the exit code and output.
 */
function runCli(args: string[], cwd: string, asOther = false, env: NodeJS.ProcessEnv = process.env): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const asRoot = process.getuid?.() === 0;
  const child = spawn(process.execPath, [CLI, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], ...(asOther && asRoot && { uid: 65534, gid: 65534 }) });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d));
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    // A spawn refused (another user may not run this Node, say one under a private temp folder)
    // emits no close: answered as exit -1, which the callers' probes skip on.
    child.on('error', (err) => {
      clearTimeout(timer);
      resolve({ code: -1, stdout, stderr: stderr + String(err) });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The CLI's own lines on stderr (`mcp-broker: …`), without the log lines around them. */
function ownLines(stderr: string): string[] {
  return stderr.split('\n').filter((l) => l.startsWith('mcp-broker: '));
}

/** A config of one healthy server with `broker` settings, in a fresh folder others may enter; its paths. */
function brokerConfig(broker: (dir: string) => Record<string, unknown>): { dir: string; configPath: string } {
  const { dir } = writeConfig({});
  dirs.push(dir);
  chmodSync(dir, 0o755);
  const configPath = join(dir, 'servers.json');
  writeFileSync(configPath, JSON.stringify({ mcpServers: healthy, broker: broker(dir) }));
  return { dir, configPath };
}

/**
 * What serve and check say of one config: check's table and `--json` runs must both exit as serve
 * exits at start, with the same lines, and print nothing on stdout.
 */
async function expectCheckRefusesAsServe(dir: string, configPath: string, asOther = false, env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  const serve = await runCli(['--config', configPath], dir, asOther, env);
  expect(serve.code).toBe(2);
  const lines = ownLines(serve.stderr);
  expect(lines.length).toBeGreaterThan(0);
  for (const json of [false, true]) {
    const run = await runCli(['check', '--config', configPath, ...(json ? ['--json'] : [])], dir, asOther, env);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr.trim().split('\n')).toEqual(lines);
  }
  return lines;
}

describe('mcp-broker check finds what serve refuses at start: the records path', () => {
  it('a records folder that cannot be made (a file on the way, under /proc) is exit 2 with the line serve exits with, nothing made (it was exit 0)', async () => {
    const { dir, configPath } = brokerConfig((d) => ({ records: { path: join(d, 'afile', 'calls.ndjson') }, dataDir: join(d, 'data') }));
    writeFileSync(join(dir, 'afile'), 'not a folder');
    const lines = await expectCheckRefusesAsServe(dir, configPath);
    expect(lines).toEqual([`mcp-broker: bad config: broker.records.path: cannot be used: EEXIST: file already exists, mkdir '${join(dir, 'afile')}'`]);

    if (process.platform === 'linux') {
      const proc = brokerConfig((d) => ({ records: { path: '/proc/self/mcp-broker-x/calls.ndjson' }, dataDir: join(d, 'data') }));
      expect(await expectCheckRefusesAsServe(proc.dir, proc.configPath)).toEqual([
        "mcp-broker: bad config: broker.records.path: cannot be used: ENOENT: no such file or directory, mkdir '/proc/self/mcp-broker-x'",
      ]);
    }
  }, 60_000);

  it('a records folder this user cannot write (no lock file can be made there) is exit 2 with the line serve exits with (it was exit 0)', async (ctx) => {
    const { dir, configPath } = brokerConfig((d) => ({ records: { path: join(d, 'rec', 'calls.ndjson') }, dataDir: join(d, 'data') }));
    mkdirSync(join(dir, 'rec'), { mode: 0o555 });
    mkdirSync(join(dir, 'data'), { mode: 0o777 });
    chmodSync(join(dir, 'data'), 0o777);
    const probe = await runCli(['--version'], dir, true);
    if (probe.code !== 0) ctx.skip(`the CLI could not be run as another user here (exit ${probe.code})`);
    const lines = await expectCheckRefusesAsServe(dir, configPath, true);
    expect(lines).toEqual(['mcp-broker: bad config: broker.records.path: cannot be used: the lock file calls.ndjson.lock could not be created (EACCES)']);
  }, 60_000);

  it('a records path no record could be appended to (a folder, a file without write permission) is exit 2 naming broker.records.path (serve starts, then refuses every call guard_error)', async (ctx) => {
    const folder = brokerConfig((d) => ({ records: { path: join(d, 'calls.ndjson') }, dataDir: join(d, 'data') }));
    mkdirSync(join(folder.dir, 'calls.ndjson'));
    for (const json of [false, true]) {
      const run = await runCli(['check', '--config', folder.configPath, ...(json ? ['--json'] : [])], folder.dir);
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toBe('mcp-broker: bad config: broker.records.path: cannot be used: the records path is not a regular file\n');
    }

    const readOnly = brokerConfig((d) => ({ records: { path: join(d, 'rec', 'calls.ndjson') }, dataDir: join(d, 'data') }));
    for (const sub of ['rec', 'data']) {
      mkdirSync(join(readOnly.dir, sub));
      chmodSync(join(readOnly.dir, sub), 0o777);
    }
    writeFileSync(join(readOnly.dir, 'rec', 'calls.ndjson'), '{"old":1}\n', { mode: 0o444 });
    chmodSync(join(readOnly.dir, 'rec', 'calls.ndjson'), 0o444);
    const probe = await runCli(['--version'], readOnly.dir, true);
    if (probe.code !== 0) ctx.skip(`the CLI could not be run as another user here (exit ${probe.code})`);
    const run = await runCli(['check', '--config', readOnly.configPath], readOnly.dir, true);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe('mcp-broker: bad config: broker.records.path: cannot be used: the records file could not be opened (EACCES)\n');
  }, 60_000);

  it('a missing records folder is not left behind, an existing records file is left as it was, and a records lock held by a running broker passes', async () => {
    const fresh = brokerConfig((d) => ({ records: { path: join(d, 'new', 'deep', 'calls.ndjson') }, dataDir: join(d, 'data') }));
    const made = await runCli(['check', '--config', fresh.configPath], fresh.dir);
    expect(made.code).toBe(0);
    expect(existsSync(join(fresh.dir, 'new'))).toBe(false);

    const held = brokerConfig((d) => ({ records: { path: join(d, 'calls.ndjson') }, dataDir: join(d, 'data') }));
    const path = join(held.dir, 'calls.ndjson');
    writeFileSync(path, '{"old":1}\n');
    // This test runner is alive: its pid in the lock is a broker running on the file.
    const lock = `${process.pid} 00000000-0000-4000-8000-000000000000\n`;
    writeFileSync(`${path}.lock`, lock);
    const before = statSync(path);
    const run = await runCli(['check', '--config', held.configPath, '--json'], held.dir);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ ready: true });
    expect(readFileSync(path, 'utf8')).toBe('{"old":1}\n');
    expect(statSync(path).mtimeMs).toBe(before.mtimeMs);
    expect(readFileSync(`${path}.lock`, 'utf8')).toBe(lock);
  }, 60_000);
});

describe('mcp-broker check finds what serve refuses at start: the store in broker.dataDir', () => {
  /** The names and bytes of the files in `dir`. */
  const contents = (dir: string) => Object.fromEntries(readdirSync(dir).map((name) => [name, readFileSync(join(dir, name)).toString('base64')]));

  it('a broker.sqlite serve cannot open (not a database, a newer schema) is exit 2 with the line serve exits with, the store left as it was (it was exit 0)', async () => {
    const corrupt = brokerConfig((d) => ({ records: { path: join(d, 'calls.ndjson') }, dataDir: join(d, 'data') }));
    const data = join(corrupt.dir, 'data');
    mkdirSync(data);
    writeFileSync(join(data, 'broker.sqlite'), randomBytes(8192));
    const before = contents(data);
    const run = await runCli(['check', '--config', corrupt.configPath], corrupt.dir);
    expect(contents(data)).toEqual(before);
    expect(run.code).toBe(2);
    expect(await expectCheckRefusesAsServe(corrupt.dir, corrupt.configPath)).toEqual([
      `mcp-broker: bad config: broker.dataDir: cannot be used: cannot open the store ${join(data, 'broker.sqlite')}: file is not a database`,
    ]);

    const newer = brokerConfig((d) => ({ records: { path: join(d, 'calls.ndjson') }, dataDir: join(d, 'data') }));
    const newerData = join(newer.dir, 'data');
    mkdirSync(newerData);
    const db = new Database(join(newerData, 'broker.sqlite'));
    db.exec('CREATE TABLE later (x)');
    db.pragma('user_version = 9');
    db.close();
    const unopened = contents(newerData);
    const refused = await runCli(['check', '--config', newer.configPath, '--json'], newer.dir);
    // Checked before serve, which sets the journal mode of the store it then refuses.
    expect(contents(newerData)).toEqual(unopened);
    expect(refused.code).toBe(2);
    expect(await expectCheckRefusesAsServe(newer.dir, newer.configPath)).toEqual([
      `mcp-broker: bad config: broker.dataDir: cannot be used: cannot open the store ${join(newerData, 'broker.sqlite')}: store schema version 9 is newer than this build understands (2)`,
    ]);
  }, 90_000);

  it('a dataDir that cannot be made (a file there, under /proc) is exit 2 with the line serve exits with; a records problem beside it is named too', async () => {
    const file = brokerConfig((d) => ({ records: { path: join(d, 'calls.ndjson') }, dataDir: join(d, 'data') }));
    writeFileSync(join(file.dir, 'data'), 'not a folder');
    expect(await expectCheckRefusesAsServe(file.dir, file.configPath)).toEqual([
      `mcp-broker: bad config: broker.dataDir: cannot be used: cannot open the store ${join(file.dir, 'data', 'broker.sqlite')}: EEXIST: file already exists, mkdir '${join(file.dir, 'data')}'`,
    ]);

    if (process.platform === 'linux') {
      const proc = brokerConfig((d) => ({ records: { path: join(d, 'calls.ndjson') }, dataDir: '/proc/self/mcp-broker-x' }));
      expect(await expectCheckRefusesAsServe(proc.dir, proc.configPath)).toEqual([
        "mcp-broker: bad config: broker.dataDir: cannot be used: cannot open the store /proc/self/mcp-broker-x/broker.sqlite: ENOENT: no such file or directory, mkdir '/proc/self/mcp-broker-x'",
      ]);
    }

    // serve stops at the first; check names both.
    const both = brokerConfig((d) => ({ records: { path: join(d, 'afile', 'calls.ndjson') }, dataDir: join(d, 'afile', 'data') }));
    writeFileSync(join(both.dir, 'afile'), 'not a folder');
    const run = await runCli(['check', '--config', both.configPath], both.dir);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr.trim().split('\n')).toEqual([
      `mcp-broker: bad config: broker.records.path: cannot be used: EEXIST: file already exists, mkdir '${join(both.dir, 'afile')}'`,
      `mcp-broker: bad config: broker.dataDir: cannot be used: cannot open the store ${join(both.dir, 'afile', 'data', 'broker.sqlite')}: ENOTDIR: not a directory, mkdir '${join(both.dir, 'afile', 'data')}'`,
    ]);
  }, 90_000);

  it('a dataDir or broker.sqlite this user cannot write is exit 2 with the line serve exits with (it was exit 0)', async (ctx) => {
    const folder = brokerConfig((d) => ({ records: { path: join(d, 'rec', 'calls.ndjson') }, dataDir: join(d, 'data') }));
    mkdirSync(join(folder.dir, 'rec'));
    chmodSync(join(folder.dir, 'rec'), 0o777);
    mkdirSync(join(folder.dir, 'data'), { mode: 0o555 });
    const probe = await runCli(['--version'], folder.dir, true);
    if (probe.code !== 0) ctx.skip(`the CLI could not be run as another user here (exit ${probe.code})`);
    expect(await expectCheckRefusesAsServe(folder.dir, folder.configPath, true)).toEqual([
      `mcp-broker: bad config: broker.dataDir: cannot be used: cannot open the store ${join(folder.dir, 'data', 'broker.sqlite')}: unable to open database file`,
    ]);

    const file = brokerConfig((d) => ({ records: { path: join(d, 'rec', 'calls.ndjson') }, dataDir: join(d, 'data') }));
    for (const sub of ['rec', 'data']) {
      mkdirSync(join(file.dir, sub));
      chmodSync(join(file.dir, sub), 0o777);
    }
    new Database(join(file.dir, 'data', 'broker.sqlite')).close();
    chmodSync(join(file.dir, 'data', 'broker.sqlite'), 0o444);
    expect(await expectCheckRefusesAsServe(file.dir, file.configPath, true)).toEqual([
      `mcp-broker: bad config: broker.dataDir: cannot be used: cannot open the store ${join(file.dir, 'data', 'broker.sqlite')}: attempt to write a readonly database`,
    ]);
  }, 90_000);

  it('a store serve made is left as it was, and a missing dataDir is not left behind', async () => {
    const used = brokerConfig((d) => ({ records: { path: join(d, 'calls.ndjson') }, dataDir: join(d, 'data') }));
    const serve = await runCli(['--config', used.configPath], used.dir);
    expect(serve.code).toBe(0);
    const data = join(used.dir, 'data');
    const before = contents(data);
    expect(Object.keys(before)).toEqual(['broker.sqlite']);
    const run = await runCli(['check', '--config', used.configPath], used.dir);
    expect(run.code).toBe(0);
    expect(contents(data)).toEqual(before);

    const fresh = brokerConfig((d) => ({ records: { path: join(d, 'calls.ndjson') }, dataDir: join(d, 'new', 'data') }));
    expect((await runCli(['check', '--config', fresh.configPath], fresh.dir)).code).toBe(0);
    expect(existsSync(join(fresh.dir, 'new'))).toBe(false);
  }, 60_000);
});

describe('mcp-broker check finds what serve refuses at start: the environment', () => {
  it('a bad MCP_BROKER_CALL_BUDGET is exit 2 with the bad config line serve exits with (it was exit 1, "mcp-broker: MCP_BROKER_CALL_BUDGET: …")', async () => {
    const { dir, configPath } = brokerConfig((d) => ({ records: { path: join(d, 'calls.ndjson') }, dataDir: join(d, 'data') }));
    expect(await expectCheckRefusesAsServe(dir, configPath, false, { ...process.env, MCP_BROKER_CALL_BUDGET: 'bogus' })).toEqual([
      'mcp-broker: bad config: MCP_BROKER_CALL_BUDGET: must be a non-negative integer or "unlimited" (got "bogus")',
    ]);
  }, 60_000);
});

describe('mcp-broker check beside a running broker', () => {
  it('passes on the config of a broker that serves (its records lock held, its store open), and the broker goes on recording', async () => {
    const b = await startBroker({ servers: healthy });
    try {
      await b.client.callTool({ name: 'u1__echo', arguments: { text: 'one' } });
      expect(await b.records()).toHaveLength(1);
      const lock = readFileSync(`${b.recordsPath}.lock`, 'utf8');
      const records = readFileSync(b.recordsPath, 'utf8');
      const data = join(b.dir, 'data');
      expect(readdirSync(data)).toContain('broker.sqlite-wal');
      const run = await runCli(['check', '--config', join(b.dir, 'servers.json'), '--json'], b.dir);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout)).toMatchObject({ ready: true });
      expect(readFileSync(b.recordsPath, 'utf8')).toBe(records);
      expect(readFileSync(`${b.recordsPath}.lock`, 'utf8')).toBe(lock);
      await b.client.callTool({ name: 'u1__echo', arguments: { text: 'two' } });
      expect((await b.records()).map((r) => r.outcome)).toEqual(['ok', 'ok']);
    } finally {
      await b.close();
    }
  }, 60_000);
});
