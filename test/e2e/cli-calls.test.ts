/**
 * `mcp-broker calls` through the real CLI, over a records file written here: options that
 * cannot be read are exit 2 naming the option (a `--tool` glob that does not compile used to
 * match nothing, silently, as if no call had been made).
 */
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, writeConfig } from './helpers.js';

function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

const rec = (ts: string, callId: string, name: string) => ({
  ts,
  callId,
  sessionId: null,
  principal: 'local',
  unit: 'modern:local',
  subject: `fx/${name}`,
  name,
  outcome: 'ok',
  status: 200,
  durationMs: 12,
  attempts: 1,
  bytesOut: 10,
});

const written = writeConfig({});
afterAll(() => rmSync(written.dir, { recursive: true, force: true }));
writeFileSync(written.recordsPath, [rec('2026-01-02T10:05:00.000Z', 'b', 'fx__b'), rec('2026-01-02T10:06:00.000Z', 'a', '[a')].map((r) => `${JSON.stringify(r)}\n`).join(''));

describe('mcp-broker calls --tool', () => {
  it('a glob that does not compile is exit 2 naming --tool, not an empty table', async () => {
    for (const glob of ['[a', '[z-a]', 'fs__(', '{a', 'a]']) {
      const { code, stdout, stderr } = await runCli(['calls', '--config', written.configPath, '--tool', glob]);
      expect({ glob, code, stdout }).toEqual({ glob, code: 2, stdout: '' });
      expect(stderr).toContain(`mcp-broker calls: --tool ${JSON.stringify(glob)} is not a glob`);
    }
  });

  it('a glob that compiles still filters', async () => {
    const { code, stdout } = await runCli(['calls', '--config', written.configPath, '--tool', 'fx__*']);
    expect(code).toBe(0);
    expect(stdout).toContain('fx__b');
    expect(stdout).toMatch(/1 call\n$/);
    // A bracket written as a literal character matches it.
    expect((await runCli(['calls', '--config', written.configPath, '--tool', '\\[a'])).stdout).toMatch(/1 call\n$/);
  });
});

describe('mcp-broker calls: oldest first', () => {
  // A record is written when its call settles, its `ts` when the call started: a call parked on
  // an approval for an hour is written after calls that started (and ended) long after it.
  const order = writeConfig({});
  afterAll(() => rmSync(order.dir, { recursive: true, force: true }));
  const lines = [
    rec('2026-01-02T10:05:00.000Z', 'second', 'fx__second'),
    rec('2026-01-02T10:06:00.000Z', 'third', 'fx__third'),
    rec('2026-01-02T10:00:00.000Z', 'parked', 'fx__parked'),
    rec('2026-01-02T10:06:00.000Z', 'third-too', 'fx__third_too'),
  ];
  writeFileSync(order.recordsPath, lines.map((r) => `${JSON.stringify(r)}\n`).join(''));
  const toolsOf = (stdout: string) =>
    stdout
      .split('\n')
      .slice(1)
      .filter((l) => l.startsWith('2026'))
      .map((l) => l.split(/\s{2,}/)[3]);

  it('prints the records in the order their calls started (ties in file order), not the order they were written', async () => {
    const all = await runCli(['calls', '--config', order.configPath]);
    expect(all.code).toBe(0);
    expect(toolsOf(all.stdout)).toEqual(['fx__parked', 'fx__second', 'fx__third', 'fx__third_too']);
    const json = await runCli(['calls', '--config', order.configPath, '--json', '--limit', '0']);
    expect(json.stdout.trim().split('\n').map((l) => JSON.parse(l).callId)).toEqual(['parked', 'second', 'third', 'third-too']);
  });

  it('--limit keeps the newest calls by start time', async () => {
    const last = await runCli(['calls', '--config', order.configPath, '--limit', '2']);
    expect(toolsOf(last.stdout)).toEqual(['fx__third', 'fx__third_too']);
    expect(last.stdout).toContain('2 of 4 matching calls (the newest 2; --limit 0 shows all)');
    const three = await runCli(['calls', '--config', order.configPath, '--limit', '3', '--json']);
    expect(three.stdout.trim().split('\n').map((l) => JSON.parse(l).callId)).toEqual(['second', 'third', 'third-too']);
  });
});

describe('a config glob that does not compile', () => {
  // picomatch makes a glob whose expression does not compile match nothing: a deny rule of such
  // globs denied nothing, and the config loaded, under `policy.default` allow, as if it held no rule.
  it('is a config error naming its path, not a rule that silently matches nothing', async () => {
    const bad = writeConfig({}, { policy: { default: 'allow', rules: [{ tools: ['fs__ok', 'fs__[z-a]*'], action: 'deny' }, { tools: ['x'], resources: ['file:///etc/[z-a]'], action: 'deny' }], readOnly: ['x\\'] } });
    try {
      const { code, stderr } = await runCli(['check', '--config', bad.configPath]);
      expect(code).toBe(2);
      expect(stderr).toContain('policy.rules[0].tools[1]');
      expect(stderr).toContain('policy.rules[1].resources[0]');
      expect(stderr).toContain('policy.readOnly[0]');
      expect(stderr).not.toContain('policy.rules[0].tools[0]');
    } finally {
      rmSync(bad.dir, { recursive: true, force: true });
    }
    // A bracket picomatch takes as literal text still loads, as before.
    const literal = writeConfig({}, { policy: { rules: [{ tools: ['fs__[a'], action: 'deny' }] } });
    try {
      expect((await runCli(['check', '--config', literal.configPath])).code).toBe(0);
    } finally {
      rmSync(literal.dir, { recursive: true, force: true });
    }
  });
});
