/**
 * Issue 19 (cold start): the built CLI runs from its bundles (dist/cli.early.cjs, which starts the
 * stdio upstreams, then dist/cli.bundle.cjs) with the code caches the build trained, which V8
 * accepts on the Node that built them;
 * what only the module tree could do still works from the bundle: a user function module is
 * imported (through the bin's own `import()`), and `MCP_BROKER_NO_BUNDLE=1` runs the modules.
 * The bin is CommonJS (`dist/cli.cjs`): on Node 20 a start from the bundles sets up no ES module
 * machinery; `dist/cli.js`, the bin's earlier name, runs the same program.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { builtCliStart } from '../../scripts/cli-start.mjs';
import { bundleText } from '../../src/cli-bundle.cjs';
import { CLI, fixture, nodeServer, ROOT, spawnRawBroker, startBroker, waitFor, type StartedBroker } from './helpers.js';

const outcome = (r: { _meta?: unknown }) => (r._meta as Record<string, unknown> | undefined)?.['mcp-broker/outcome'];

/** The CLI's debug line `msg`, parsed. */
function debugLine(stderr: string, msg: string): Record<string, unknown> | undefined {
  for (const line of stderr.split('\n')) {
    if (line.includes(`"msg":${JSON.stringify(msg)}`)) return JSON.parse(line) as Record<string, unknown>;
  }
  return undefined;
}

/** The `start` of the CLI's "program started" debug line. */
function startOf(stderr: string): unknown {
  return debugLine(stderr, 'program started')?.start;
}

let broker: StartedBroker | undefined;
afterEach(async () => {
  await broker?.close();
  broker = undefined;
});

describe('the CLI bundle (e2e)', () => {
  it('carries one copy of what it needs: no zod locale but English, one Ajv provider, no early start of its own', () => {
    const program = readFileSync(join(ROOT, 'dist/cli.bundle.cjs'), 'latin1');
    const early = readFileSync(join(ROOT, 'dist/cli.early.cjs'), 'latin1');
    // zod's French messages (charset ascii escapes the é); its English ones stay.
    expect(program).not.toContain('Entr\\xE9e invalide');
    expect(program).toContain('Invalid input');
    // The Ajv provider of the SDK's server package serves its client package too: one class.
    const count = (text: string, what: RegExp) => text.match(what)?.length ?? 0;
    expect(count(program, /\bAjvJsonSchemaValidator\d*=class\b/g)).toBe(1);
    // The early start is the early bundle's (the bin runs it), not the program's.
    expect(count(early, /\bfunction earlyStdioSpecs\(/g)).toBe(1);
    expect(count(program, /\bfunction earlyStdioSpecs\(/g)).toBe(0);
  });


  it("the build's check of its caches (scripts/cli-start.mjs) tells a start that takes them from one whose V8 flags refuse them", () => {
    const dist = join(ROOT, 'dist');
    expect(builtCliStart(dist)).toEqual({ from: 'bundle', cache: 'accepted', early: 'accepted' });
    // A V8 flag is part of a cache's check: the build removes a cache a start refuses.
    expect(builtCliStart(dist, { nodeArgs: ['--no-opt'] })).toEqual({ from: 'bundle', cache: 'rejected', early: 'rejected' });
  });

  it('the built CLI runs from its bundles, with the code caches the build trained, and serves', async () => {
    broker = await startBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) }, args: ['--log-level', 'debug'], env: { MCP_BROKER_LOG_FORMAT: 'json' } });
    const result = (await broker.client.callTool({ name: 'echo__echo', arguments: { text: 'hi' } })) as CallToolResult;
    expect(outcome(result)).toBe('ok');
    const start = await waitFor(() => startOf(broker!.stderr()), 'the program started line');
    expect(start).toEqual({ from: 'bundle', cache: 'accepted', early: 'accepted' });
    // Once the upstream's first dial settled, V8's tiering for serving (src/cli-tiering.ts): V8 11 only.
    const tiering = await waitFor(() => debugLine(broker!.stderr(), 'V8 tiering for serving')?.tiering, 'the V8 tiering line');
    expect(tiering).toEqual(Number.parseInt(process.versions.v8, 10) === 11 ? { set: '--interrupt-budget=16896' } : { kept: 'v8_version' });
    const lines = broker.stderr().split('\n');
    const at = (msg: string) => lines.findIndex((line) => line.includes(`"msg":${JSON.stringify(msg)}`));
    expect(at('upstream ready')).toBeGreaterThan(-1);
    expect(at('V8 tiering for serving')).toBeGreaterThan(at('upstream ready'));
  });

  it('a user function module is imported and served when the CLI runs from the bundle', async () => {
    broker = await startBroker({ servers: {}, extra: { functions: [join(ROOT, 'tools/weather.js')] }, args: ['--log-level', 'debug'], env: { MCP_BROKER_LOG_FORMAT: 'json' } });
    expect(await waitFor(() => startOf(broker!.stderr()), 'the program started line')).toMatchObject({ from: 'bundle' });
    const result = (await broker.client.callTool({ name: 'get_weather', arguments: { city: 'Oslo' } })) as CallToolResult;
    expect(outcome(result)).toBe('ok');
    expect(broker.stderr()).not.toContain('ExperimentalWarning');
  });

  it('MCP_BROKER_NO_BUNDLE=1 runs the module tree, which serves the same', async () => {
    broker = await startBroker({
      servers: { echo: nodeServer(fixture('echo.mjs')) },
      args: ['--log-level', 'debug'],
      env: { MCP_BROKER_LOG_FORMAT: 'json', MCP_BROKER_NO_BUNDLE: '1' },
    });
    const result = (await broker.client.callTool({ name: 'echo__echo', arguments: { text: 'hi' } })) as CallToolResult;
    expect(outcome(result)).toBe('ok');
    expect(await waitFor(() => startOf(broker!.stderr()), 'the program started line')).toEqual({ from: 'modules', why: 'disabled' });
  });

  // Node 20 sets up its ES module loader (~5 ms) before the first line of an ES module entry runs;
  // later lines do it for a CommonJS entry as well, so there is nothing to tell apart.
  it.runIf(Number(process.versions.node.split('.')[0]) === 20)('on Node 20 the bin, a CommonJS file, serves from the bundles without setting up ES modules', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-esm-setup-'));
    const log = join(dir, 'esm.log');
    const raw = spawnRawBroker({
      servers: { echo: nodeServer(fixture('echo.mjs')) },
      env: { ESM_SETUP_LOG: log, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require=${join(fixture('hooks'), 'esm-setup.cjs')}`.trim() },
    });
    try {
      await raw.initialize();
      const answer = await raw.request(2, 'tools/call', { name: 'echo__echo', arguments: { text: 'hi' } });
      expect(outcome(answer.result as CallToolResult)).toBe('ok');
      await raw.close();
      expect(readFileSync(log, 'utf8')).toBe('cli.cjs: none\n');
    } finally {
      await raw.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the bin is dist/cli.cjs; dist/cli.js runs the same program, exit codes and all', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    expect(join(ROOT, pkg.bin['mcp-broker']!)).toBe(CLI);
    const run = (file: string, args: string[]) => spawnSync(process.execPath, [join(ROOT, 'dist', file), ...args], { encoding: 'utf8', timeout: 20_000 });
    const version = run('cli.js', ['--version']);
    expect(version.status).toBe(0);
    expect(version.stdout).toBe(run('cli.cjs', ['--version']).stdout);
    const missing = join(tmpdir(), 'mcp-broker-no-such-dir', 'servers.json');
    const bad = run('cli.js', ['check', '--config', missing]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('cannot read');
    expect(bad.stderr).toBe(run('cli.cjs', ['check', '--config', missing]).stderr);
  });

  it('the bin ends as an ES module entry would: a failing program with its error and exit code 1, one that never settles with 13', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-bin-'));
    try {
      // The built bin and its loader, beside bundles of our own (no cache: compiled from their text).
      for (const file of ['cli.cjs', 'cli-bundle.cjs']) copyFileSync(join(ROOT, 'dist', file), join(dir, file));
      writeFileSync(join(dir, 'cli-main.js'), '');
      writeFileSync(join(dir, 'cli.early.cjs'), bundleText('0123456789abcdef', '')); // starts nothing
      const runWith = (body: string) => {
        writeFileSync(join(dir, 'cli.bundle.cjs'), bundleText('0123456789abcdef', body));
        return spawnSync(process.execPath, [join(dir, 'cli.cjs'), '--version'], { encoding: 'utf8', timeout: 20_000 });
      };
      const failing = runWith("exports.main = async () => { throw new Error('the program failed here'); };");
      expect(failing.status).toBe(1);
      expect(failing.stderr).toContain('Error: the program failed here');
      const unsettled = runWith('exports.main = () => new Promise(() => {});');
      expect(unsettled.status).toBe(13);
      const fine = runWith("exports.main = async () => { process.stdout.write('ran\\n'); };");
      expect(fine.status).toBe(0);
      expect(fine.stdout).toBe('ran\n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
