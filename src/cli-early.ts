/**
 * The CLI's early start, bundled on its own (`dist/cli.early.cjs`, cli-bundle.cts): the bin runs
 * it before the program's bundle loads, so the stdio upstreams of a `serve` command line start
 * about as soon as Node has booted (upstream/early-spawn.ts). Run for its effect.
 */
import { earlySpawn } from './upstream/early-spawn.js';

earlySpawn(process.argv.slice(2));
