/**
 * The CLI bundles (issue 19: cold start). `npm run build` bundles the program (`cli-main.ts`)
 * and its dependencies into one CommonJS file, `dist/cli.bundle.cjs`, and the early start of the
 * stdio upstreams (`cli-early.ts`: the config read and checked without zod, the children
 * started) into a small one, `dist/cli.early.cjs` (scripts/bundle-cli.mjs); it then trains a V8
 * code cache for each (`.cache` beside it) by serving a few calls once. The bin runs the early
 * bundle first, so the upstreams start about as soon as Node has booted, then the program's.
 * Loaded through `vm.Script` with its cache, a start compiles almost nothing and reads two files
 * instead of resolving, compiling and linking some 300 ES modules.
 *
 * The bundles are used only when they are at least as new as `cli-main.js` (a `tsc` run after
 * the build leaves them stale, and the module tree runs instead) and `MCP_BROKER_NO_BUNDLE` is
 * not `1`. A cache is used only when it was trained on that very bundle (the build id in both
 * headers) and V8 accepts it (same V8 version and flags); otherwise the bundle is compiled from
 * its source, which is still faster than the module tree. Nothing is written at run time, except
 * by the build's training run (`MCP_BROKER_CODE_CACHE_OUT`).
 */
import { closeSync, fstatSync, openSync, readSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Script } from 'node:vm';
import type { CliOptions } from './cli-main.js';

/** The program's bundle, beside this module in `dist/` (`.cjs`, and its code cache `.cache`). */
export const PROGRAM_BUNDLE = 'cli.bundle';
/** The early start's bundle, beside it. */
export const EARLY_BUNDLE = 'cli.early';
/** The module the bundles are made from, whose age tells a stale bundle. */
const MAIN_FILE = 'cli-main.js';
/** `1`: never the bundles, always the module tree (stack traces name the source modules). */
export const NO_BUNDLE_ENV = 'MCP_BROKER_NO_BUNDLE';
/** A folder: when the process exits, the code cache of each bundle as run is written there (the build's training run). */
export const CODE_CACHE_OUT_ENV = 'MCP_BROKER_CODE_CACHE_OUT';

/** The first line of a bundle: `/* mcp-broker cli bundle <build id> *\/`. */
const BUNDLE_HEADER = /^\/\* mcp-broker cli bundle ([0-9a-f]{16,64}) \*\//;
/** A code cache file starts with this and the build id, padded (see {@link cacheHeader}), then V8's data. */
const CACHE_MAGIC = 'mcp-broker code cache ';
/** V8 uses cache data in place only when it starts at this alignment (a pointer's); it copies it otherwise. */
const CACHE_DATA_ALIGN = 8;
/** A bundle is a CommonJS module body inside this function expression, in the file itself (see {@link bundleText}). */
const WRAP_HEAD = '(function (exports, require, module, __filename, __dirname) {';
const WRAP_TAIL = '\n})';

/**
 * The text of a bundle file: its header line naming build `buildId`, then `body` (CommonJS,
 * ASCII only) inside the module function the loader calls. The wrapper is in the file so that
 * the loader compiles the file's text as read: a bundle of ~1.9 MB read as a Buffer and decoded
 * as Latin-1 becomes one external one-byte string, with no UTF-8 decode and no concatenated copy
 * for V8 to flatten (each fresh page of memory costs at start).
 */
export function bundleText(buildId: string, body: string): string {
  return `/* mcp-broker cli bundle ${buildId} */\n${WRAP_HEAD}${body}${WRAP_TAIL}\n`;
}

/** What the program's bundle exports (cli-main.ts). */
export interface CliProgram {
  main(options?: CliOptions): Promise<void>;
}

/** What became of a bundle's code cache: V8 took it, refused it, or there was none for this build. */
export type CacheState = 'accepted' | 'rejected' | 'absent';

/**
 * How the program was started, for the debug log: from the bundles (what became of each cache;
 * `early` is absent when the early bundle was not there), or from the module tree and why.
 */
export type CliStart = { from: 'modules'; why: 'no_bundle' | 'stale' | 'disabled' } | { from: 'bundle'; cache: CacheState; early?: CacheState };

/** Where {@link loadCliBundle} leaves its {@link CliStart} (one per process, whichever copy of this module reads it). */
const START_KEY = Symbol.for('mcp-broker/cli-start');

/** How this process's program was started; undefined when it was not started by the bin. */
export function cliStart(): CliStart | undefined {
  return (globalThis as Record<symbol, CliStart | undefined>)[START_KEY];
}

/**
 * Runs the early bundle of `dir` (which starts the stdio upstreams of a `serve` command line),
 * then evaluates the program's bundle, each with its code cache when that fits. Undefined when
 * the module tree is to run instead (no program bundle, a stale one, or `MCP_BROKER_NO_BUNDLE=1`);
 * `earlyStarted` tells whether the early bundle ran (else the bin starts them from the module).
 * Throws what evaluating a bundle throws.
 */
export function loadCliBundle(dir: string, env: NodeJS.ProcessEnv = process.env): { program: CliProgram; earlyStarted: boolean } | undefined {
  const note = (start: CliStart) => ((globalThis as Record<symbol, CliStart>)[START_KEY] = start);
  if (env[NO_BUNDLE_ENV] === '1') return void note({ from: 'modules', why: 'disabled' });
  let mainAt: number;
  let program: { mtimeMs: number; size: number };
  try {
    mainAt = statSync(join(dir, MAIN_FILE)).mtimeMs;
    program = statSync(join(dir, `${PROGRAM_BUNDLE}.cjs`));
  } catch {
    return void note({ from: 'modules', why: 'no_bundle' });
  }
  if (program.mtimeMs < mainAt) return void note({ from: 'modules', why: 'stale' });
  const cacheOut = env[CODE_CACHE_OUT_ENV] || undefined;
  // Sized for the largest file, the program's bundle (its cache is a little smaller).
  const files = new FileReader(program.size);
  let early: CacheState | undefined;
  try {
    if (statSync(join(dir, `${EARLY_BUNDLE}.cjs`)).mtimeMs >= mainAt) early = runBundle(dir, EARLY_BUNDLE, files, cacheOut).cache;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  // Not `exports`: that would hide this CommonJS module's own.
  const { exports: programExports, cache } = runBundle(dir, PROGRAM_BUNDLE, files, cacheOut);
  note({ from: 'bundle', cache, ...(early !== undefined && { early }) });
  return { program: programExports as CliProgram, earlyStarted: early !== undefined };
}

/** Evaluates `dir/<name>.cjs` as a CommonJS module with its code cache when that fits; writes the cache to `cacheOut` at exit when given. */
function runBundle(dir: string, name: string, files: FileReader, cacheOut: string | undefined): { exports: unknown; cache: CacheState } {
  const file = join(dir, `${name}.cjs`);
  // ASCII by construction (bundleText): Latin-1 is the same text, decoded without a UTF-8 pass
  // (a copy: the reader's buffer is read into again).
  const source = files.read(file).toString('latin1');
  const buildId = BUNDLE_HEADER.exec(source)?.[1];
  const cachedData = buildId === undefined ? undefined : readCodeCache(files, join(dir, `${name}.cache`), buildId);
  // V8 deserialises the cache here, and keeps no hold on its bytes after.
  const script = new Script(source, { filename: file, cachedData });
  const cache: CacheState = cachedData === undefined ? 'absent' : script.cachedDataRejected ? 'rejected' : 'accepted';
  if (cacheOut && buildId !== undefined) process.once('exit', () => writeCodeCache(join(cacheOut, `${name}.cache`), buildId, script.createCachedData()));
  // Named so as not to hide this CommonJS module's own `exports` and `module`.
  const bundleModule = { exports: {} as unknown };
  (script.runInThisContext() as (...args: unknown[]) => void)(bundleModule.exports, createRequire(file), bundleModule, file, dir);
  return { exports: bundleModule.exports, cache };
}

/**
 * Reads whole files into one buffer of its own (`bytes` to begin with), replaced only for a file
 * larger than it: the four files of a start (~4 MB) touch fresh memory for the largest alone
 * (each fresh page of memory costs at start: ~11 µs on the 2-core VM of bench/README). What
 * {@link read} gives back is valid until the next read. The buffer is the allocator's own (not
 * Node's shared pool), so its first byte is aligned for V8's code cache data.
 */
class FileReader {
  private buffer: Buffer;

  constructor(bytes: number) {
    this.buffer = Buffer.allocUnsafeSlow(bytes);
  }

  read(path: string): Buffer {
    const fd = openSync(path, 'r');
    try {
      const size = fstatSync(fd).size;
      if (size > this.buffer.length) this.buffer = Buffer.allocUnsafeSlow(size);
      let length = 0;
      while (length < size) {
        const n = readSync(fd, this.buffer, length, size - length, null);
        if (n === 0) break; // shorter than it was a moment ago
        length += n;
      }
      return this.buffer.subarray(0, length);
    } finally {
      closeSync(fd);
    }
  }
}

/**
 * The first line of a code cache file made for build `buildId`: {@link CACHE_MAGIC}, the id, and
 * spaces before its newline up to a multiple of {@link CACHE_DATA_ALIGN} bytes, so that V8's data
 * after it starts aligned in a buffer that does (V8 would otherwise copy it first: ~1.8 MB).
 */
function cacheHeader(buildId: string): string {
  const line = `${CACHE_MAGIC}${buildId}`;
  return `${line.padEnd(Math.ceil((line.length + 1) / CACHE_DATA_ALIGN) * CACHE_DATA_ALIGN - 1, ' ')}\n`;
}

/** The V8 data of the cache at `path` when it was made for build `buildId` (valid until the reader's next read); undefined otherwise. */
function readCodeCache(files: FileReader, path: string, buildId: string): Buffer | undefined {
  let data: Buffer;
  try {
    data = files.read(path);
  } catch {
    return undefined;
  }
  const header = cacheHeader(buildId);
  return data.subarray(0, header.length).toString('latin1') === header ? data.subarray(header.length) : undefined;
}

/** Writes a code cache for build `buildId` (to a temporary name first, so a reader never sees half of it). */
export function writeCodeCache(path: string, buildId: string, data: Buffer): void {
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, Buffer.concat([Buffer.from(cacheHeader(buildId), 'latin1'), data]));
  renameSync(temp, path);
}
