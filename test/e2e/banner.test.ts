/**
 * When stdin is a terminal, the CLI prints a short banner to stderr (upstreams, tool count, how
 * to connect, Ctrl-C) instead of sitting silent. Driven through util-linux `script` for a pty;
 * skipped where `script` is missing.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { STATUS_MESSAGE_MAX_CHARS } from '../../src/commands/shown-status-message.js';
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

/**
 * Runs the CLI on a pty (stdin and stderr a terminal) with `args`, until the banner has been
 * printed; resolves with all it wrote (the pty's line discipline writes each `\n` as `\r\n`).
 */
async function bannerOf(args: string[], env: Record<string, string> = {}): Promise<string> {
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const child = spawn('script', ['-qfc', [process.execPath, CLI, ...args].map(quote).join(' '), '/dev/null'], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
  const exited = new Promise((r) => child.once('exit', r));
  try {
    await waitFor(() => out.includes('Press Ctrl-C to stop.'), 'the banner', 20_000);
    return out;
  } finally {
    child.stdin.end(); // EOF on the pty: the broker shuts down
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

/** Any character `printable` escapes but the line ends (C0 but \r and \n, DEL, C1, bidi, invisible format, line separators). */
const UNPRINTABLE = /[\u0000-\u0009\u000b\u000c\u000e-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/;

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

  it.skipIf(!hasScript)(
    "an upstream's status is shown escaped, scrubbed whole and then cut (regression: its error text reached the terminal raw, unscrubbed and whole)",
    async () => {
      const secret = `banner${randomBytes(32).toString('hex')}`;
      // OSC 52 (a clipboard write), erase-line and cursor-up, C1 CSI, a right-to-left override, a lone \r.
      const hostile = 'gone\u001b]52;c;cHduZWQ=\u0007\u001b[2K\u001b[1A\u009b2J\u202eboot\rforged';
      // Its 70-character secret stands across the cut (the message's prefix, `listing failed after connect: MCP
      // error -32603: `, is 30 to 80 characters): cut first, the secret's first characters would be shown.
      const long = `${'w'.repeat(STATUS_MESSAGE_MAX_CHARS - 90)}${secret} and more${'z'.repeat(200)}`;
      const { dir, configPath } = writeConfig({
        crash: nodeServer(fixture('says-why.mjs'), { env: { FIXTURE_TEXT: hostile } }),
        lister: nodeServer(fixture('says-why.mjs'), { env: { FIXTURE_FAIL: 'list', FIXTURE_TEXT: long, API_TOKEN: '${env:BANNER_TOKEN}' } }),
      }, { broker: { restart: { initialDelayMs: 60_000, maxDelayMs: 60_000 } } });
      try {
        const out = await bannerOf(['--config', configPath, '--log-level', 'silent'], { BANNER_TOKEN: secret });
        const rows = out.split('\r\n');
        const crash = rows.find((r) => r.startsWith('  crash '))!;
        const lister = rows.find((r) => r.startsWith('  lister '))!;
        expect(crash).toMatch(/^  crash\s+\w+: exited with code 1 before it was ready: Error: gone\\x1b]52;c;cHduZWQ=\\x07\\x1b\[2K\\x1b\[1A\\x9b2J\\u202eboot\\rforged$/);
        expect(lister).not.toContain(secret.slice(0, 6));
        const shown = /^  lister\s+\w+: (.*)$/.exec(lister)![1]!;
        expect(shown).toHaveLength(STATUS_MESSAGE_MAX_CHARS);
        expect(shown).toMatch(/^listing failed after connect: .*w+\[REDACTED\] and morez+…$/);
        for (const row of [crash, lister]) expect(row).not.toMatch(UNPRINTABLE);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    40_000,
  );

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
