#!/usr/bin/env node
/**
 * The `mcp-broker` bin: runs the program (`cli-main.ts`) from the CLI bundle with its code
 * cache when the build made them (`cli-bundle.ts`; issue 19: cold start), else from the module
 * tree. `MCP_BROKER_NO_BUNDLE=1` always runs the module tree.
 */
import { fileURLToPath } from 'node:url';
import { loadCliBundle } from './cli-bundle.js';

// Code run from the bundle (a vm.Script) has no import() of its own: user function modules are
// imported through this one.
const importModule = (url: string) => import(url) as Promise<Record<string, unknown>>;
const program = loadCliBundle(fileURLToPath(new URL('.', import.meta.url))) ?? (await import('./cli-main.js'));
await program.main({ importModule });
