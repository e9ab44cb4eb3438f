#!/usr/bin/env node
/**
 * Instructions the broker executes per echo call, counted by `valgrind --tool=callgrind`
 * (Debian's `valgrind`; not a dependency). A count of instructions, not of seconds: on a shared
 * or noisy machine, where `npm run bench` measures the host as much as the broker, it still tells
 * one build from another (issue 19; bench/README.md, "Instructions per call").
 *
 *   node bench/instructions.mjs [--concurrency 1] [--warmup 15000] [--calls 1000] [--rounds 2]
 *        [--node-arg=… (default --single-threaded)] [--top 0] [dist …]
 *
 * Each round starts one broker per build (`<dist>/cli.cjs`, default `dist`; several alternate)
 * under callgrind with the bench's echo upstream (not under valgrind), makes `--warmup` calls,
 * zeroes the counters (`callgrind_control -z`), makes `--calls` calls at `--concurrency`, dumps
 * them (`callgrind_control -d`) and prints the broker's instructions per call.
 * Fewer warm-up calls count V8 still optimising: after 5,000 a build read ~8k more a call than
 * after 15,000, and a change could move that compile work into the window or out of it. `--top N` prints
 * the N functions with the most instructions (self) in that window; JIT-compiled JavaScript is
 * anonymous to callgrind (one line, `???:0x…`), so read JavaScript's share with `--cpu-prof`.
 * The broker runs with `--single-threaded` unless `--node-arg` says otherwise: V8's compiler and
 * collector on the main thread, where the count is steadiest. A broker that exits before its
 * calls are answered ends the run with its exit code (exit 1).
 * Under valgrind the broker is some fifty times slower than its peers, so at a concurrency above
 * 1 its reads hold more messages than they would: a high concurrency counts per-message work,
 * concurrency 1 the whole of a lone call.
 */
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    concurrency: { type: 'string', default: '1' },
    warmup: { type: 'string', default: '15000' },
    calls: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '2' },
    'node-arg': { type: 'string', multiple: true, default: ['--single-threaded'] },
    top: { type: 'string', default: '0' },
  },
});
const concurrency = Number(values.concurrency);
const warmup = Number(values.warmup);
const calls = Number(values.calls);
const rounds = Number(values.rounds);
const top = Number(values.top);
const builds = (positionals.length ? positionals : ['dist']).map((d) => resolve(d));

try {
  execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
} catch {
  console.error('instructions: valgrind is not installed (Debian: apt-get install valgrind)');
  process.exit(2);
}

const work = mkdtempSync(join(tmpdir(), 'mcp-broker-instructions-'));
const config = join(work, 'servers.json');
writeFileSync(
  config,
  JSON.stringify({
    mcpServers: { echo: { command: process.execPath, args: [join(here, 'echo-server.mjs')] } },
    broker: { records: { path: join(work, 'calls.ndjson') }, budgetPerUnit: 1_000_000_000 },
  }),
);

/** One broker under callgrind: its instructions per call over `calls` calls after `warmup`. */
async function measure(build, round) {
  const out = join(work, `cg.${round}.${builds.indexOf(build)}.out`);
  const child = spawn(
    'valgrind',
    ['--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${out}`, '--dump-instr=no', process.execPath, ...values['node-arg'], join(build, 'cli.cjs'), 'serve', '--config', config],
    { stdio: ['pipe', 'pipe', 'ignore'] },
  );
  let buffered = '';
  let seq = 0;
  const waiting = new Map();
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    buffered += chunk;
    for (let i; (i = buffered.indexOf('\n')) >= 0; ) {
      const line = buffered.slice(0, i);
      buffered = buffered.slice(i + 1);
      if (!line.startsWith('{')) continue;
      const message = JSON.parse(line);
      waiting.get(message.id)?.done(message);
      waiting.delete(message.id);
    }
  });
  let ended;
  const exited = new Promise((done) => child.once('exit', (code, signal) => done({ code, signal })));
  void exited.then(({ code, signal }) => {
    ended = new Error(`the broker under valgrind (${build}) exited (code ${code}, signal ${signal}) with ${waiting.size} request(s) unanswered`);
    for (const { fail } of waiting.values()) fail(ended);
    waiting.clear();
  });
  child.stdin.on('error', () => undefined); // EPIPE once it is gone: reported by the exit above
  const request = (method, params) =>
    new Promise((done, fail) => {
      if (ended) return fail(ended);
      const id = ++seq;
      waiting.set(id, { done, fail });
      child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    });
  const text = 'x'.repeat(100);
  const run = async (total) => {
    let left = total;
    const worker = async () => {
      while (left-- > 0) {
        const answer = await request('tools/call', { name: 'echo__echo', arguments: { text } });
        if (answer.result?.content?.[0]?.text !== text) throw new Error(`wrong answer: ${JSON.stringify(answer).slice(0, 300)}`);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  };
  await request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'instructions', version: '1' } });
  child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
  await run(warmup);
  execFileSync('callgrind_control', ['-z', String(child.pid)], { stdio: 'ignore' });
  await run(calls);
  execFileSync('callgrind_control', ['-d', String(child.pid)], { stdio: 'ignore' });
  child.stdin.end();
  await exited;
  const dumps = readdirSync(work).filter((f) => f.startsWith(`cg.${round}.${builds.indexOf(build)}.out.`) && !f.endsWith('.out'));
  const dump = join(work, dumps.sort()[0]);
  const summary = /^summary:\s+(\d+)/m.exec(readFileSync(dump, 'utf8'));
  if (!summary) throw new Error(`no summary in ${dump}`);
  const perCall = Number(summary[1]) / calls;
  let functions = '';
  if (top > 0) {
    const annotated = execFileSync('callgrind_annotate', ['--threshold=100', dump], { encoding: 'utf8', maxBuffer: 64 << 20 });
    // A dump taken inside the event loop charges the frames open at the zeroing (main, the
    // loop, a thread's entry) with all that ran under them: a line of half the window or more is
    // such a frame (no function of the call path comes near it), not work of its own.
    functions = annotated
      .split('\n')
      .map((l) => /^\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(\S.*)$/.exec(l))
      .filter((m) => m && !m[3].includes('PROGRAM TOTALS') && Number(m[2]) < 50)
      .slice(0, top)
      .map(([, count, , name]) => `    ${String(Math.round(Number(count.replace(/,/g, '')) / calls)).padStart(8)}  ${name.slice(0, 150)}`)
      .join('\n');
  }
  return { perCall, functions };
}

console.log(`instructions per echo call of 100 B, concurrency ${concurrency}, ${calls} calls after ${warmup}; node ${process.version} ${values['node-arg'].join(' ')}`);
try {
  for (let round = 1; round <= rounds; round++) {
    for (const build of builds) {
      const { perCall, functions } = await measure(build, round);
      console.log(`round ${round}  ${build}  ${Math.round(perCall).toLocaleString('en-US')} instructions a call`);
      if (functions) console.log(functions);
    }
  }
} catch (err) {
  console.error(`instructions: ${err.message}`);
  process.exitCode = 1;
} finally {
  rmSync(work, { recursive: true, force: true });
}
