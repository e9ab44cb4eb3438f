#!/usr/bin/env node
/**
 * The `mcp-broker` bin: runs the program (`cli-main.ts`) from the CLI bundles with their code
 * caches when the build made them (`cli-bundle.ts`; issue 19: cold start), else from the module
 * tree. `MCP_BROKER_NO_BUNDLE=1` always runs the module tree.
 */
import { fileURLToPath } from 'node:url';
import { loadCliBundle } from './cli-bundle.js';

// Code run from a bundle (a vm.Script) has no import() of its own: user function modules are
// imported through this one.
const importModule = (url: string) => import(url) as Promise<Record<string, unknown>>;
const bundled = loadCliBundle(fileURLToPath(new URL('.', import.meta.url)));
// The stdio upstreams of a `serve` command line start as early as can be, so they boot on the
// other core while the program loads (upstream/early-spawn.ts): the early bundle started them
// before the program's bundle was read; without it the module of the same code does it here,
// before the program runs.
if (!bundled?.earlyStarted) (await import('./upstream/early-spawn.js')).earlySpawn(process.argv.slice(2));
const program = bundled?.program ?? (await import('./cli-main.js'));
await program.main({ importModule });
