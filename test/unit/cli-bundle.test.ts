/**
 * Issue 19 (cold start): which program the bin runs (src/cli-bundle.cts). The bundle when it is
 * there and not older than the modules, with its code cache only when the cache was made for
 * that very bundle and V8 takes it; the module tree otherwise. Each case builds a small bundle
 * of its own in a temp folder (the real one is exercised by every end-to-end test and by
 * test/e2e/cli-bundle.test.ts).
 */
import { mkdtempSync, rmSync, utimesSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Script } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { bundleText, cliStart, EARLY_BUNDLE, loadCliBundle, PROGRAM_BUNDLE, writeCodeCache } from '../../src/cli-bundle.cjs';

const BUNDLE_FILE = `${PROGRAM_BUNDLE}.cjs`;
const CODE_CACHE_FILE = `${PROGRAM_BUNDLE}.cache`;

const ID = '0123456789abcdef0123456789abcdef';
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A folder with cli-main.js (modules) and a bundle whose main() resolves to its own name. */
function folder(options: { id?: string; bundleAgeMs?: number } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-cli-bundle-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'cli-main.js'), 'export async function main() {}\n');
  writeFileSync(
    join(dir, BUNDLE_FILE),
    bundleText(options.id ?? ID, `const path = require('node:path');\nmodule.exports = { main: async () => 'bundle:' + path.basename(__filename) };`),
  );
  const now = Date.now() / 1000;
  utimesSync(join(dir, 'cli-main.js'), now - 10, now - 10);
  const bundleAt = now - 10 + (options.bundleAgeMs ?? 1000) / 1000;
  utimesSync(join(dir, BUNDLE_FILE), bundleAt, bundleAt);
  return dir;
}

/** The V8 code cache of a bundle in `dir` (the program's unless named), compiled as the loader compiles it. */
function trainedCache(dir: string, file = BUNDLE_FILE): Buffer {
  const script = new Script(readFileSync(join(dir, file), 'latin1'), { filename: join(dir, file) });
  return script.createCachedData();
}

describe('the CLI bundle loader', () => {
  it('runs the bundle, as CommonJS in its own folder, when it is not older than the modules', async () => {
    const dir = folder();
    const loaded = loadCliBundle(dir, {});
    expect(await loaded?.program.main()).toBe(`bundle:${BUNDLE_FILE}`);
    expect(loaded?.earlyStarted).toBe(false);
    expect(cliStart()).toEqual({ from: 'bundle', cache: 'absent' });
  });

  it('takes a code cache made for the same build, and V8 accepts it', async () => {
    const dir = folder();
    writeCodeCache(join(dir, CODE_CACHE_FILE), ID, trainedCache(dir));
    expect(await loadCliBundle(dir, {})?.program.main()).toBe(`bundle:${BUNDLE_FILE}`);
    expect(cliStart()).toEqual({ from: 'bundle', cache: 'accepted' });
  });

  it('ignores a cache made for another build, and runs the bundle from source', async () => {
    const dir = folder();
    writeCodeCache(join(dir, CODE_CACHE_FILE), 'ffffffffffffffffffffffffffffffff', trainedCache(dir));
    expect(await loadCliBundle(dir, {})?.program.main()).toBe(`bundle:${BUNDLE_FILE}`);
    expect(cliStart()).toEqual({ from: 'bundle', cache: 'absent' });
  });

  it('runs the bundle from source when V8 refuses the cache (another V8, or damaged)', async () => {
    const dir = folder();
    writeCodeCache(join(dir, CODE_CACHE_FILE), ID, Buffer.from('not a V8 code cache at all'));
    expect(await loadCliBundle(dir, {})?.program.main()).toBe(`bundle:${BUNDLE_FILE}`);
    expect(cliStart()).toEqual({ from: 'bundle', cache: 'rejected' });
  });

  it('runs the early bundle first (for its effect), then the program; each with its own cache; a stale early bundle is skipped', async () => {
    const dir = folder();
    const early = join(dir, `${EARLY_BUNDLE}.cjs`);
    writeFileSync(early, bundleText('e'.repeat(32), 'globalThis.__earlyRan = (globalThis.__earlyRan ?? 0) + 1;'));
    const g = globalThis as { __earlyRan?: number };
    g.__earlyRan = 0;
    const loaded = loadCliBundle(dir, {});
    expect(g.__earlyRan).toBe(1);
    expect(loaded?.earlyStarted).toBe(true);
    expect(await loaded?.program.main()).toBe(`bundle:${BUNDLE_FILE}`);
    expect(cliStart()).toEqual({ from: 'bundle', cache: 'absent', early: 'absent' });
    const old = Date.now() / 1000 - 3600;
    utimesSync(early, old, old);
    expect(loadCliBundle(dir, {})?.earlyStarted).toBe(false);
    expect(g.__earlyRan).toBe(1);
    expect(cliStart()).toEqual({ from: 'bundle', cache: 'absent' });
  });

  it('reads the early bundle, the program and their caches through one buffer: V8 takes both caches, each with its data at an 8-byte boundary of its file', async () => {
    const dir = folder();
    const earlyId = 'e'.repeat(32);
    // The early files larger than the program's, so the program's are read over them.
    writeFileSync(join(dir, `${EARLY_BUNDLE}.cjs`), bundleText(earlyId, `globalThis.__earlyPad = ${JSON.stringify('x'.repeat(50_000))}.length;`));
    writeCodeCache(join(dir, `${EARLY_BUNDLE}.cache`), earlyId, trainedCache(dir, `${EARLY_BUNDLE}.cjs`));
    writeCodeCache(join(dir, CODE_CACHE_FILE), ID, trainedCache(dir));
    const loaded = loadCliBundle(dir, {});
    expect((globalThis as { __earlyPad?: number }).__earlyPad).toBe(50_000);
    expect(await loaded?.program.main()).toBe(`bundle:${BUNDLE_FILE}`);
    expect(cliStart()).toEqual({ from: 'bundle', cache: 'accepted', early: 'accepted' });
    // V8 uses cache data in place only when it is pointer-aligned (else it copies it first).
    for (const file of [CODE_CACHE_FILE, `${EARLY_BUNDLE}.cache`]) expect((readFileSync(join(dir, file)).indexOf(0x0a) + 1) % 8).toBe(0);
  });

  it('leaves a bundle older than the modules alone (tsc ran after the build): the module tree runs', () => {
    const dir = folder({ bundleAgeMs: -5000 });
    expect(loadCliBundle(dir, {})).toBeUndefined();
    expect(cliStart()).toEqual({ from: 'modules', why: 'stale' });
  });

  it('runs the module tree without a bundle, and with MCP_BROKER_NO_BUNDLE=1', () => {
    const dir = folder();
    expect(loadCliBundle(dir, { MCP_BROKER_NO_BUNDLE: '1' })).toBeUndefined();
    expect(cliStart()).toEqual({ from: 'modules', why: 'disabled' });
    rmSync(join(dir, BUNDLE_FILE));
    expect(loadCliBundle(dir, {})).toBeUndefined();
    expect(cliStart()).toEqual({ from: 'modules', why: 'no_bundle' });
  });

  it('MCP_BROKER_CODE_CACHE_OUT: the code cache of the bundle as run is written as the process exits, for this build only', async () => {
    const dir = folder();
    const out = mkdtempSync(join(tmpdir(), 'mcp-broker-cli-cache-out-'));
    dirs.push(out);
    const listeners = process.listeners('exit');
    loadCliBundle(dir, { MCP_BROKER_CODE_CACHE_OUT: out });
    const added = process.listeners('exit').filter((l) => !listeners.includes(l));
    expect(added).toHaveLength(1);
    process.off('exit', added[0]!);
    (added[0] as () => void)();
    expect(existsSync(join(out, CODE_CACHE_FILE))).toBe(true);
    writeFileSync(join(dir, CODE_CACHE_FILE), readFileSync(join(out, CODE_CACHE_FILE)));
    expect(await loadCliBundle(dir, {})?.program.main()).toBe(`bundle:${BUNDLE_FILE}`);
    expect(cliStart()).toEqual({ from: 'bundle', cache: 'accepted' });
  });
});
