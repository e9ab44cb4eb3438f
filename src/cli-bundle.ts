/**
 * The CLI bundle (issue 19: cold start). `npm run build` bundles the program (`cli-main.ts`) and
 * its dependencies into one CommonJS file, `dist/cli.bundle.cjs` (scripts/bundle-cli.mjs), and
 * trains a V8 code cache for it, `dist/cli.bundle.cache`, by serving a few calls once. Loaded
 * through `vm.Script` with that cache, a stdio start compiles almost nothing and resolves, reads
 * and links one file instead of some 300 ES modules: its CPU to the first `tools/list` fell by
 * about half on the 2-core machine of bench/README.md.
 *
 * The bundle is used only when it is at least as new as `cli-main.js` (a `tsc` run after the
 * build leaves it stale, and the module tree runs instead) and `MCP_BROKER_NO_BUNDLE` is not
 * `1`. Its cache is used only when it was trained on this very bundle (the build id in both
 * headers) and V8 accepts it (same V8 version and flags); otherwise the bundle is compiled from
 * its source, which is still faster than the module tree. Nothing is written at run time, except
 * by the build's training run (`MCP_BROKER_CODE_CACHE_OUT`).
 */
import { readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Script } from 'node:vm';
import type { CliOptions } from './cli-main.js';

/** The bundle's file name, beside this module in `dist/`. */
export const BUNDLE_FILE = 'cli.bundle.cjs';
/** The code cache's file name, beside the bundle. */
export const CODE_CACHE_FILE = 'cli.bundle.cache';
/** The module the bundle is made from, whose age tells a stale bundle. */
const MAIN_FILE = 'cli-main.js';
/** `1`: never the bundle, always the module tree (stack traces name the source modules). */
export const NO_BUNDLE_ENV = 'MCP_BROKER_NO_BUNDLE';
/** A file path: when the process exits, the code cache of the bundle as run is written there (the build's training run). */
export const CODE_CACHE_OUT_ENV = 'MCP_BROKER_CODE_CACHE_OUT';

/** The first line of a bundle: `/* mcp-broker cli bundle <build id> *\/`. */
const BUNDLE_HEADER = /^\/\* mcp-broker cli bundle ([0-9a-f]{16,64}) \*\//;
/** The code cache file starts with this and the build id, then a newline, then V8's data. */
const CACHE_MAGIC = 'mcp-broker code cache ';
/** The bundle runs as a CommonJS module body. */
const WRAP_HEAD = '(function (exports, require, module, __filename, __dirname) {';
const WRAP_TAIL = '\n})';

/** What the bundle exports (cli-main.ts). */
export interface CliProgram {
  main(options?: CliOptions): Promise<void>;
}

/** How the program was started, for the debug log: from the bundle (and what became of its cache) or the module tree. */
export type CliStart = { from: 'modules'; why: 'no_bundle' | 'stale' | 'disabled' } | { from: 'bundle'; cache: 'accepted' | 'rejected' | 'absent' };

/** Where {@link loadCliBundle} leaves its {@link CliStart} (one per process). */
const START_KEY = Symbol.for('mcp-broker/cli-start');

/** How this process's program was started; undefined when it was not started by the bin. */
export function cliStart(): CliStart | undefined {
  return (globalThis as Record<symbol, CliStart | undefined>)[START_KEY];
}

/**
 * The program from the bundle in `dir`, evaluated with its code cache when that fits; undefined
 * when the module tree is to run instead (no bundle, a stale one, or `MCP_BROKER_NO_BUNDLE=1`).
 * Throws what evaluating the bundle throws.
 */
export function loadCliBundle(dir: string, env: NodeJS.ProcessEnv = process.env): CliProgram | undefined {
  const note = (start: CliStart) => ((globalThis as Record<symbol, CliStart>)[START_KEY] = start);
  if (env[NO_BUNDLE_ENV] === '1') return void note({ from: 'modules', why: 'disabled' });
  const file = join(dir, BUNDLE_FILE);
  let source: string;
  try {
    if (statSync(file).mtimeMs < statSync(join(dir, MAIN_FILE)).mtimeMs) return void note({ from: 'modules', why: 'stale' });
    source = readFileSync(file, 'utf8');
  } catch {
    return void note({ from: 'modules', why: 'no_bundle' });
  }
  const buildId = BUNDLE_HEADER.exec(source)?.[1];
  const cachedData = buildId === undefined ? undefined : readCodeCache(join(dir, CODE_CACHE_FILE), buildId);
  const script = new Script(WRAP_HEAD + source + WRAP_TAIL, { filename: file, cachedData });
  note({ from: 'bundle', cache: cachedData === undefined ? 'absent' : script.cachedDataRejected ? 'rejected' : 'accepted' });
  const out = env[CODE_CACHE_OUT_ENV];
  if (out && buildId !== undefined) process.once('exit', () => writeCodeCache(out, buildId, script.createCachedData()));
  const module = { exports: {} as CliProgram };
  (script.runInThisContext() as (...args: unknown[]) => void)(module.exports, createRequire(file), module, file, dir);
  return module.exports;
}

/** The V8 data of the cache at `path` when it was made for build `buildId`; undefined otherwise. */
function readCodeCache(path: string, buildId: string): Buffer | undefined {
  let data: Buffer;
  try {
    data = readFileSync(path);
  } catch {
    return undefined;
  }
  const header = `${CACHE_MAGIC}${buildId}\n`;
  return data.subarray(0, header.length).toString('latin1') === header ? data.subarray(header.length) : undefined;
}

/** Writes a code cache for build `buildId` (to a temporary name first, so a reader never sees half of it). */
export function writeCodeCache(path: string, buildId: string, data: Buffer): void {
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, Buffer.concat([Buffer.from(`${CACHE_MAGIC}${buildId}\n`, 'latin1'), data]));
  renameSync(temp, path);
}
