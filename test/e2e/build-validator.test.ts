/**
 * Issue 19: `npm run build` from a clean tree (no generated file, no dist/) generates the config
 * validator the early start imports (scripts/config-validator.mjs), and the built CLI runs on it.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from './helpers.js';

const run = promisify(execFile);
const clean = mkdtempSync(join(tmpdir(), 'mcp-broker-clean-build-'));
afterAll(() => rmSync(clean, { recursive: true, force: true }));

describe('npm run build from a clean tree', () => {
  it('issue 19: generates the config validator module, and the early start finds the bundled servers.json valid', async () => {
    for (const entry of ['package.json', 'tsconfig.json', 'servers.json', 'servers.schema.json', 'scripts']) cpSync(join(ROOT, entry), join(clean, entry), { recursive: true });
    cpSync(join(ROOT, 'src'), join(clean, 'src'), { recursive: true, filter: (from) => !from.includes('validate-config.generated') });
    symlinkSync(join(ROOT, 'node_modules'), join(clean, 'node_modules'));
    const module = join(clean, 'dist/config/validate-config.generated.js');
    expect(existsSync(module)).toBe(false);

    await run('npm', ['run', 'build', '--silent'], { cwd: clean });

    expect(existsSync(module)).toBe(true);
    const { validateConfig } = (await import(pathToFileURL(module).href)) as { validateConfig: (data: unknown) => boolean };
    expect(validateConfig(JSON.parse(readFileSync(join(clean, 'servers.json'), 'utf8')))).toBe(true);
    expect(validateConfig({ mcpServers: { a: { command: '' } } })).toBe(false);
    const early = (await import(pathToFileURL(join(clean, 'dist/upstream/early-spawn.js')).href)) as typeof import('../../src/upstream/early-spawn.js');
    const specs = early.earlyStdioSpecs(JSON.parse(readFileSync(join(clean, 'servers.json'), 'utf8')), clean);
    expect(specs?.map((s) => s.args[0])).toEqual([
      './node_modules/@modelcontextprotocol/server-everything/dist/index.js',
      './node_modules/@modelcontextprotocol/server-filesystem/dist/index.js',
      './node_modules/@modelcontextprotocol/server-memory/dist/index.js',
    ]);
  }, 300_000);
});
