#!/usr/bin/env node
/**
 * The `mcp-broker` bin (`dist/cli.cjs`): runs the program (`cli-main.ts`) from the CLI bundles
 * with their code caches when the build made them (`cli-bundle.cts`; issue 19: cold start), else
 * from the module tree. `MCP_BROKER_NO_BUNDLE=1` always runs the module tree.
 *
 * CommonJS, so a start from the bundles never sets up Node's ES module loader (~5 ms of Node 20
 * before the first line of an ES module entry runs; the stdio upstreams start that much sooner).
 * `dist/cli.js` runs this same file for command lines written with that name.
 */
import { loadCliBundle } from './cli-bundle.cjs';

// Code run from a bundle (a vm.Script) has no import() of its own: user function modules are
// imported through this one.
const importModule = (url: string) => import(url) as Promise<Record<string, unknown>>;

async function run(): Promise<void> {
  const bundled = loadCliBundle(__dirname);
  // The stdio upstreams of a `serve` command line start as early as can be, so they boot on the
  // other core while the program loads (upstream/early-spawn.ts): the early bundle started them
  // before the program's bundle was read; without it the module of the same code does it here,
  // before the program runs.
  if (!bundled?.earlyStarted) (await import('./upstream/early-spawn.js')).earlySpawn(process.argv.slice(2));
  const program = bundled?.program ?? (await import('./cli-main.js'));
  await program.main({ importModule });
}

// Ends as an ES module entry's top-level await would: a rejection as an uncaught exception (exit
// code 1, the error printed); a program that never settles and leaves nothing to wait for with
// exit code 13, not as a success.
let running = true;
process.once('beforeExit', () => {
  if (running) process.exitCode ??= 13;
});
run().then(
  () => {
    running = false;
  },
  (err: unknown) => {
    running = false;
    process.nextTick(() => {
      throw err;
    });
  },
);
