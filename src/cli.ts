#!/usr/bin/env node
/**
 * `node dist/cli.js`, the bin's name before issue 19: runs the bin, `dist/cli.cjs` (cli.cts), as
 * it is. The bin itself is CommonJS so that it starts without Node's ES module loader; this entry
 * pays that loader's start (~5 ms) and is otherwise the same program.
 */
import './cli.cjs';
