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
