/**
 * `mcp-broker check` (issue 18 §6) through the built CLI: it starts every upstream, prints one
 * row per server (state, tools, the error line), and exits 0 only when the servers that count
 * are ready; a bad config is exit 2. Build first (`npm run build`).
 */
import { execFile } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, writeConfig } from '../e2e/helpers.js';

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
