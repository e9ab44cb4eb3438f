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
// Cold start (issue 6): the stdio upstreams of a `serve` command line start before the program
// loads, so they boot on the other core meanwhile (upstream/early-spawn.ts); the early bundle
// did it when it ran, the module of the same code does it otherwise.
if (!bundled?.earlyStarted) (await import('./upstream/early-spawn.js')).earlySpawn(process.argv.slice(2));
const program = bundled?.program ?? (await import('./cli-main.js'));
await program.main({ importModule });
