#!/usr/bin/env node
/**
 * The stdio reference proxy: spawns its upstream and copies bytes both ways, parsing nothing.
 * No stdio proxy can cost less than this extra hop; the benchmark shows it for scale.
 *
 *   node bench/byte-pipe.mjs <command> [args…]
 */
import { spawn } from 'node:child_process';

const [command, ...args] = process.argv.slice(2);
const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
process.stdin.pipe(child.stdin);
child.stdout.pipe(process.stdout);
process.stdin.on('end', () => child.stdin.end());
child.on('exit', (code) => process.exit(code ?? 0));
