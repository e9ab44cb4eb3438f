/**
 * When stdin is a terminal, the CLI prints a short banner to stderr (upstreams, tool count, how
 * to connect, Ctrl-C) instead of sitting silent. Driven through util-linux `script` for a pty;
 * skipped where `script` is missing.
 */
import { execFileSync, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, spawnRawBroker, waitFor, writeConfig } from './helpers.js';

const hasScript = (() => {
  try {
    execFileSync('script', ['--version'], { stdio: 'ignore' });
    return process.platform === 'linux';
  } catch {
    return false;
  }
})();

const servers = { u1: nodeServer(fixture('echo.mjs')), missing: { command: 'does-not-exist-banner' } };
/** Beside those, a script that is not there: Node crashes with a stack trace and its version trailer. */
const withCrash = { ...servers, crash: nodeServer(fixture('missing-file.js')) };

describe('TTY banner', () => {
  it.skipIf(!hasScript)('prints upstreams, the tool count, how to connect and Ctrl-C when stdin is a terminal', async () => {
    const { dir, configPath } = writeConfig(withCrash);
    const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    const child = spawn('script', ['-qfc', `${quote(process.execPath)} ${quote(CLI)} --config ${quote(configPath)}`, '/dev/null'], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    const exited = new Promise((r) => child.once('exit', r));
    try {
      await waitFor(() => out.includes('Press Ctrl-C to stop.'), 'the banner', 20_000);
      expect(out).toMatch(/u1\s+ready, 4 tools/);
      expect(out).toMatch(/missing\s+\w+: cannot start "does-not-exist-banner": command not found/);
      // Issue 18 §3: a crashing script shows the line that says why, not `Node.js v…`.
      expect(out).toMatch(/crash\s+\w+: exited with code 1 before it was ready: Error: Cannot find module '[^']*missing-file\.js'/);
      // u1's four tools and the broker's own, counted apart (the rows above list only the servers').
      expect(out).toMatch(/(\d+) tools in all: 4 from the servers above, (\d+) of the broker's own\./);
      const [, all, own] = /(\d+) tools in all: 4 from the servers above, (\d+) of the broker's own/.exec(out)!;
      expect(Number(all)).toBe(4 + Number(own));
      expect(Number(own)).toBeGreaterThan(0);
      expect(out).toContain('npx mcp-inspector-cli --cli --method tools/list -- node ');
      expect(out).toContain('Claude Desktop');
      // The snippets carry real paths, so they run as printed (issue 18 §6).
      expect(out).not.toContain('<repo>');
      expect(out).toContain(JSON.stringify(CLI));
      expect(out).toContain(JSON.stringify(configPath));
    } finally {
      child.stdin.end(); // EOF on the pty: the broker shuts down
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 40_000);

  it('prints no banner when stdin is a pipe (an MCP client is attached)', async () => {
    const b = spawnRawBroker({ servers });
    try {
      await b.initialize();
      await b.request(2, 'tools/list');
      expect(b.stderr()).not.toContain('Press Ctrl-C');
    } finally {
      await b.close();
    }
  });
});
