/**
 * The early start of the stdio upstreams (cold start, issue 6): which command lines start them,
 * that the specs read from the raw file (the loader's fill, the validator generated from the
 * schema) are the ones the validated config starts, and that settling against the validated
 * config keeps, starts and ends the right children.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { serverKind, type StdioServerConfig } from '../../src/config/schema.js';
import { serveConfigPath } from '../../src/serve-options.js';
import { parkedChildren, prespawnChild, releaseSignals, settleParked, type ChildSpawnSpec } from '../../src/upstream/child-transport.js';
import { earlySpawn, earlyStdioSpecs } from '../../src/upstream/early-spawn.js';
import { stdioSpawnSpec } from '../../src/upstream/spawn-env.js';

const BASE = '/srv/conf';

/** What the validated config starts, in server order. */
function validatedSpecs(raw: unknown, env: NodeJS.ProcessEnv, baseDir = BASE): ChildSpawnSpec[] {
  const config = parseConfig(raw, { baseDir, env });
  return Object.values(config.mcpServers)
    .filter((s) => serverKind(s) === 'stdio' && !s.disabled)
    .map((s) => stdioSpawnSpec(s as StdioServerConfig, config.broker.env.inherit));
}

describe('serveConfigPath', () => {
  it('finds the config of a plain serve command line, default servers.json', () => {
    expect(serveConfigPath([], {})).toBe('servers.json');
    expect(serveConfigPath(['serve'], {})).toBe('servers.json');
    expect(serveConfigPath(['-c', 'a.json'], {})).toBe('a.json');
    expect(serveConfigPath(['serve', '--config', 'b.json', '--transport', 'http', '-p', '0'], {})).toBe('b.json');
    expect(serveConfigPath(['--config=c.json', '--log-level=debug', '--host', '127.0.0.1', '--no-watch'], {})).toBe('c.json');
    // Commander reads these the same way.
    expect(serveConfigPath(['-cfoo.json'], {})).toBe('foo.json');
    expect(serveConfigPath(['--config='], {})).toBe('');
  });

  it('starts nothing for anything else: another command, help, version, an unknown or incomplete option, a value the CLI refuses', () => {
    const refused = [
      ['calls'], ['approve', 'x__y'], ['--help'], ['-h'], ['-V'], ['--version'], ['--bogus'], ['-c'], ['--watch'],
      ['serve', 'serve'], ['serve', 'extra'], ['--nope=1'], ['-c', 'a.json', 'serve'], ['--', 'serve'],
      ['--transport', 'bogus'], ['-p', 'abc'], ['--port=70000'], ['-p', '-1'], ['--log-level', 'loud'],
    ];
    for (const argv of refused) expect(serveConfigPath(argv, {}), argv.join(' ')).toBeUndefined();
    // MCP_BROKER_LOG_LEVEL counts when --log-level is not given.
    expect(serveConfigPath([], { MCP_BROKER_LOG_LEVEL: 'loud' })).toBeUndefined();
    expect(serveConfigPath(['--log-level', 'warn'], { MCP_BROKER_LOG_LEVEL: 'loud' })).toBe('servers.json');
    expect(serveConfigPath(['-t', 'http', '-p', '0'], { MCP_BROKER_LOG_LEVEL: 'debug' })).toBe('servers.json');
  });
});

describe('earlyStdioSpecs', () => {
  it('reads from the raw file exactly the spawn specs the validated config gives', () => {
    const env = { TOKEN: 'secret-token-value', HOME: '/home/u', PATH: '/usr/bin' };
    const raw = {
      mcpServers: {
        plain: { command: 'node', args: ['server.js'] },
        bare: { command: 'uvx' },
        filled: {
          command: '${configDir}/bin/tool',
          args: ['--root', '${configDir}/data', '--token=${env:TOKEN}'],
          env: { API_TOKEN: '${env:TOKEN}', MODE: 'fast' },
          inheritEnv: ['PATH'],
          cwd: 'sub',
        },
        absolute: { command: 'node', args: ['x.js'], cwd: '/opt/srv', type: 'stdio' },
        off: { command: 'node', args: ['off.js'], disabled: true },
        remote: { type: 'http', url: 'https://example.com/mcp' },
      },
      broker: { env: { inherit: ['HOME', 'LANG'] } },
    };
    expect(earlyStdioSpecs(raw, BASE, env)).toEqual(validatedSpecs(raw, env));
    const defaults = { mcpServers: { a: { command: 'node', args: ['a.js'] } } };
    expect(earlyStdioSpecs(defaults, BASE, env)).toEqual(validatedSpecs(defaults, env));
    expect(earlyStdioSpecs(raw, BASE, env)?.[0]!.command).toBe(process.execPath);
  });

  it('starts nothing from a file the loader would refuse', () => {
    const ok = { command: 'node', args: ['ok.js'] };
    const refused: unknown[] = [
      { mcpServers: { ok, other: { command: 'node', args: ['${env:NOT_SET}'] } } },
      { mcpServers: { ok }, principals: { p: { token: '${env:NOT_SET}' } } },
      { mcpServers: { ok, bad: { command: 'node', args: 'a.js' } } },
      { mcpServers: { ok, bad: { command: 'node', env: { N: 1 } } } },
      { mcpServers: { ok, bad: { command: 'node', cwd: 3 } } },
      { mcpServers: { ok, bad: { command: '' } } },
      { mcpServers: { ok, bad: { command: 'node', disabled: 'true' } } },
      { mcpServers: { ok, bad: { command: 'node', enabled: false } } },
      { mcpServers: { ok, bad: { command: 'node', url: 'https://example.com' } } },
      { mcpServers: { ok, bad: { command: 'node', type: 'http' } } },
      { mcpServers: { ok, bad: { command: 'node', prefix: 'a__b' } } },
      { mcpServers: { ok, bad: { command: 'node', timeoutMs: 0 } } },
      { mcpServers: { ok, broker: { command: 'node' } } },
      { mcpServers: { ok, 'a__b': { command: 'node' } } },
      { mcpServers: { ok, '-x': { command: 'node' } } },
      { mcpServers: { ok }, broker: 'yes' },
      { mcpServers: { ok }, broker: { env: { inherit: 'HOME' } } },
      { mcpServers: [] },
      'nonsense',
    ];
    for (const raw of refused) expect(earlyStdioSpecs(raw, BASE, {}), JSON.stringify(raw)).toBeUndefined();
    // The loader refuses each of them (exit 2).
    for (const raw of refused.slice(0, -1)) expect(() => parseConfig(raw, { baseDir: BASE, env: {} }), JSON.stringify(raw)).toThrow();
    // A disabled server and a non-stdio one are left out; the rest start.
    const mixed = { mcpServers: { ok, off: { command: 'node', disabled: true }, remote: { type: 'sse', url: 'https://example.com/sse' } } };
    expect(earlyStdioSpecs(mixed, BASE, {})?.map((s) => s.args)).toEqual([['ok.js']]);
  });

  it('issue 18 §2: reads what the loader reads: VS Code servers and inputs, envFile, every placeholder', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-early-fill-'));
    try {
      writeFileSync(join(dir, '.env'), 'FROM_FILE=1\nMODE=file\n');
      const env = { A: 'a', HOME: '/home/u', MCP_BROKER_INPUT_K: 'key-value' };
      const inputs = [{ type: 'promptString', id: 'k' }];
      const same: unknown[] = [
        { mcpServers: { s: { command: 'node', args: ['${input:k}'] } }, inputs },
        { servers: { s: { command: 'node', args: ['${A}'] } }, inputs },
        { mcpServers: { s: { command: 'node', envFile: '.env', env: { MODE: 'env' } } } },
        { mcpServers: { s: { command: 'node', args: ['${UNSET:-x}', '${env:A:-y}', '${userHome}', '${workspaceFolder}/w'] } } },
        { mcpServers: { s: { command: 'node', cwd: '${workspaceFolder}' } } },
      ];
      for (const raw of same) {
        const specs = earlyStdioSpecs(raw, dir, env);
        expect(specs, JSON.stringify(raw)).toHaveLength(1);
        expect(specs, JSON.stringify(raw)).toEqual(validatedSpecs(raw, env, dir));
      }
      expect(earlyStdioSpecs(same[2], dir, env)?.[0]!.env).toMatchObject({ FROM_FILE: '1', MODE: 'env' });
      // What the loader refuses starts nothing: an unset input, an unknown placeholder, a missing envFile, both server maps.
      const refused: unknown[] = [
        { mcpServers: { s: { command: 'node', args: ['${input:k}'] } }, inputs },
        { mcpServers: { s: { command: 'node', args: ['${nonsense:x}'] } } },
        { mcpServers: { s: { command: 'node', envFile: 'missing.env' } } },
        { mcpServers: { s: { command: 'node' } }, servers: { t: { command: 'node' } } },
      ];
      for (const raw of refused) {
        expect(earlyStdioSpecs(raw, dir, { HOME: '/home/u' }), JSON.stringify(raw)).toBeUndefined();
        expect(() => parseConfig(raw, { baseDir: dir, env: { HOME: '/home/u' } }), JSON.stringify(raw)).toThrow();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('issue 18 §2: starts nothing from a config that is JSON with comments or trailing commas', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-early-jsonc-'));
    try {
      const config = join(dir, 'servers.json');
      const tag = `early-jsonc-${process.pid}`;
      writeFileSync(config, `{ // pasted\n "mcpServers": { "a": { "command": "node", "args": ["-e", "setInterval(() => {}, 1000)", "${tag}"], }, }, }`);
      earlySpawn(['-c', config]);
      expect(parkedChildren().filter((p) => p.spec.includes(tag))).toEqual([]);
    } finally {
      settleParked([]);
      releaseSignals();
      rmSync(dir, { recursive: true, force: true });
    }
  });

});

describe('settleParked', () => {
  const idle = (tag: string): ChildSpawnSpec => ({ command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)', tag], cwd: process.cwd(), env: {} });
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  const pidsOf = (spec: ChildSpawnSpec) => parkedChildren().find((p) => p.spec.includes(JSON.stringify(spec.args)))?.pids ?? [];

  afterEach(() => {
    settleParked([]);
    releaseSignals();
  });

  it('keeps the children the validated config starts, starts the missing ones, ends the rest', async () => {
    const [a, b, c] = [idle('a'), idle('b'), idle('c')];
    prespawnChild(a);
    prespawnChild(a);
    prespawnChild(b);
    const before = { a: pidsOf(a), b: pidsOf(b) };
    expect(before.a).toHaveLength(2);
    expect(before.b).toHaveLength(1);

    settleParked([a, c]);
    const kept = pidsOf(a);
    expect(kept).toHaveLength(1);
    expect(before.a).toContain(kept[0]);
    expect(pidsOf(b)).toEqual([]);
    expect(pidsOf(c)).toHaveLength(1);
    const ended = [...before.a.filter((p) => p !== kept[0]), ...before.b];
    await expect.poll(() => ended.filter(alive), { timeout: 5000 }).toEqual([]);
    expect(alive(kept[0]!)).toBe(true);
  });
});

describe('earlySpawn', () => {
  afterEach(() => {
    settleParked([]);
    releaseSignals();
  });

  it('starts the stdio upstreams of a serve command line from the file, and holds the shutdown signals until the CLI takes them', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-early-unit-'));
    try {
      const config = join(dir, 'servers.json');
      const idle = { command: 'node', args: ['-e', 'setInterval(() => {}, 1000)', `early-unit-${process.pid}`] };
      writeFileSync(config, JSON.stringify({ mcpServers: { a: idle } }));
      const before = process.listenerCount('SIGTERM');
      earlySpawn(['calls', '-c', config]);
      expect(parkedChildren().flatMap((p) => p.pids)).toEqual([]);
      earlySpawn(['-c', config]);
      const started = parkedChildren().find((p) => p.spec.includes(`early-unit-${process.pid}`));
      expect(started?.pids).toHaveLength(1);
      expect(process.listenerCount('SIGTERM')).toBe(before + 1);
      releaseSignals();
      expect(process.listenerCount('SIGTERM')).toBe(before);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
