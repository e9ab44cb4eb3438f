#!/usr/bin/env node
/**
 * `npm run bench`: the same load against a direct stdio connection, mcp-broker (stdio and
 * Streamable HTTP, default policy, records on), the SDK's own Streamable HTTP server (the HTTP
 * floor), mcp-proxy and supergateway; interleaved round by round so machine noise hits every
 * configuration alike. Prints the table (bench/lib/report.mjs) and writes it as JSON.
 *
 *   node bench/run.js [--smoke] [--rounds N] [--only id,id] [--out file] [--broker-node-args="…"]
 *
 *   --smoke              tiny counts (a few seconds): checks that every configuration runs; the
 *                        figures mean nothing. Writes bench/results/smoke.json unless --out.
 *   --rounds N           rounds to split each figure's calls into (default 5)
 *   --scale F            multiplies the full run's call counts (default 1; e.g. 0.25 on a busy machine)
 *   --only ids           configurations to run (direct, byte-pipe, naive, broker-stdio, sdk-floor,
 *                        broker-http, mcp-proxy, supergateway, direct-modern, naive-modern,
 *                        broker-stdio-modern, sdk-floor-modern, broker-http-modern); the baseline of
 *                        each chosen row's family is kept
 *   --out file           where the JSON goes (default bench/results/latest.json for a full run;
 *                        bench/results/partial.json when --only, --phases, --no-cold, --timing,
 *                        --broker-node-args, or a --scale or --rounds other than the default
 *                        narrows or changes it)
 *   --broker-node-args   node flags for the broker process, e.g. ="--cpu-prof --cpu-prof-dir=/tmp/p"
 *   --no-cold            skip the cold-start figure
 *   --phases list        only these load phases: latency,c1,c16,c64,mib1,mib8 (for profiling)
 *   --timing             the broker rows time each call at the points of its path (stdin read,
 *                        parse, every broker stage in and out, upstream write and read, records
 *                        write, stdout write; src/shared/call-timing.ts) and the breakdown is
 *                        printed after the table. Off by default: it costs the broker a little.
 *
 * Exit code: 0 when every available configuration answered every call correctly, 1 otherwise.
 * Targets met or missed never change the exit code (benchmarks are not tests).
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { concurrentEcho, percentile, sequentialBlob, sequentialEcho, warmUp } from './lib/load.mjs';
import { childPids, cpuMs, rssMiB, syscalls } from './lib/procs.mjs';
import { evaluate, render, renderTiming, versusNaive } from './lib/report.mjs';
import { configurations } from './lib/targets.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MiB = 1024 * 1024;

const { values: opts } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    scale: { type: 'string' },
    only: { type: 'string' },
    out: { type: 'string' },
    'broker-node-args': { type: 'string', default: '' },
    'no-cold': { type: 'boolean', default: false },
    phases: { type: 'string' },
    timing: { type: 'boolean', default: false },
  },
});

const FULL = { latency: 2000, throughput: 5000, mib1: 30, mib8: 10, warmEcho: 300 };
const SMOKE = { latency: 20, throughput: 64, mib1: 1, mib8: 1, warmEcho: 10 };
const scale = Number(opts.scale ?? 1);
const counts = opts.smoke
  ? SMOKE
  : Object.fromEntries(Object.entries(FULL).map(([k, v]) => [k, Math.max(1, Math.round(v * scale))]));
const DEFAULT_ROUNDS = 5;
const rounds = Number(opts.rounds ?? (opts.smoke ? 1 : DEFAULT_ROUNDS));
const coldRounds = opts['no-cold'] ? 0 : opts.smoke ? 1 : rounds;
const phases = new Set((opts.phases ?? 'latency,c1,c16,c64,mib1,mib8').split(','));
// A partial run (some rows, phases or figures; other counts; timing or node flags on the broker)
// never overwrites the full run's JSON.
const partial =
  !opts.smoke &&
  (opts.only !== undefined || opts.phases !== undefined || opts['no-cold'] || opts.timing || scale !== 1 || rounds !== DEFAULT_ROUNDS || opts['broker-node-args'] !== '');
const out = resolve(opts.out ?? join(ROOT, 'bench/results', opts.smoke ? 'smoke.json' : partial ? 'partial.json' : 'latest.json'));
const log = (text) => process.stderr.write(`bench: ${text}\n`);

const cli = join(ROOT, 'dist/cli.cjs');
if (!existsSync(cli)) {
  log(`${cli} is missing: run "npm run build" first (npm run bench does)`);
  process.exit(1);
}

const tmp = mkdtempSync(join(tmpdir(), 'mcp-broker-bench-'));
const echo = join(ROOT, 'bench/echo-server.mjs');

/** A broker config: `upstreams` echo servers, records into the temp folder, a budget no run exhausts. */
function writeConfig(name, upstreams) {
  const mcpServers = {};
  for (const key of upstreams) mcpServers[key] = { command: 'node', args: [echo] };
  const file = join(tmp, `${name}.json`);
  const records = join(tmp, `${name}.calls.ndjson`);
  writeFileSync(file, JSON.stringify({ mcpServers, broker: { records: { path: records }, budgetPerUnit: 1_000_000_000 } }, null, 2));
  return { file, records };
}

const stdioConfig = writeConfig('broker-stdio', ['echo']);
const httpConfig = writeConfig('broker-http', ['echo']);
const modernStdioConfig = writeConfig('broker-stdio-modern', ['echo']);
const modernHttpConfig = writeConfig('broker-http-modern', ['echo']);
const coldConfig = writeConfig('cold', ['echo']);

const only = opts.only ? new Set(opts.only.split(',').map((s) => s.trim())) : undefined;
const recordsOf = {
  'broker-stdio': stdioConfig.records,
  'broker-http': httpConfig.records,
  'broker-stdio-modern': modernStdioConfig.records,
  'broker-http-modern': modernHttpConfig.records,
};
const all = configurations({
  echo,
  cli,
  floor: join(ROOT, 'bench/sdk-http-floor.mjs'),
  bindLoopback: join(ROOT, 'bench/bind-loopback.mjs'),
  bytePipe: join(ROOT, 'bench/byte-pipe.mjs'),
  naive: join(ROOT, 'bench/naive-aggregator.mjs'),
  stdioConfig: stdioConfig.file,
  httpConfig: httpConfig.file,
  modernStdioConfig: modernStdioConfig.file,
  modernHttpConfig: modernHttpConfig.file,
  coldConfig: coldConfig.file,
  brokerNodeArgs: opts['broker-node-args'].split(/\s+/).filter(Boolean),
  timingFile: opts.timing ? (id) => join(tmp, `${id}.timing.json`) : undefined,
});
const chosenFamilies = new Set(all.filter((c) => !only || only.has(c.id)).map((c) => c.family));
const rows = all
  .filter((c) => !only || only.has(c.id) || (c.baseline && chosenFamilies.has(c.family)))
  .map((c) => ({
    ...c,
    status: 'ok',
    figures: {},
    samples: { latency: [], mib1: [], mib8: [], cold: [] },
    elapsed: { c1: 0, c16: 0, c64: 0 },
    cpu: { ms: 0, calls: 0 },
    cpu64: { ms: 0, upMs: 0, calls: 0, up: false, sys: 0, sysCalls: 0, loadUs: 0, loadCalls: 0 },
    calls: 0,
    recordsPath: recordsOf[c.id],
  }));

const started = performance.now();
const live = () => rows.filter((r) => r.status === 'ok' && r.conn);

/** Runs `work(row)` for every live row, round by round, rotating the order each round. */
async function interleaved(phase, work) {
  for (let round = 0; round < rounds; round++) {
    const order = live();
    const shift = round % Math.max(1, order.length);
    for (const row of [...order.slice(shift), ...order.slice(0, shift)]) {
      if (row.status !== 'ok') continue;
      try {
        await work(row, round);
      } catch (err) {
        fail(row, `${phase}: ${err.message}`);
      }
    }
  }
}

function fail(row, message) {
  row.status = 'failed';
  row.error = message.split('\n')[0].slice(0, 300);
  log(`${row.id} failed: ${row.error}`);
  const conn = row.conn;
  row.conn = undefined;
  void conn?.close().catch(() => undefined);
}

/** Splits `total` calls into `rounds` shares that add up exactly. */
const share = (total, round) => Math.floor((total * (round + 1)) / rounds) - Math.floor((total * round) / rounds);

let exitCode = 0;
try {
  log(`temp folder ${tmp}; ${rounds} rounds${opts.smoke ? ' (smoke)' : ''}`);
  for (const row of rows) {
    try {
      row.conn = await row.start();
      row.pid = row.conn.pid;
    } catch (err) {
      const notBuilt = /not available/i.test(err.message) && /exited with 2\b/.test(err.message);
      row.status = notBuilt ? 'unavailable' : 'failed';
      row.error = err.message.split('\n')[0].slice(0, 300);
      log(`${row.id}: ${row.status}: ${row.error}`);
    }
  }
  log('warm-up');
  for (const row of live()) {
    try {
      await warmUp(row.conn, { echo: counts.warmEcho, mib: !opts.smoke });
      row.calls += counts.warmEcho + (opts.smoke ? 0 : 1);
    } catch (err) {
      fail(row, `warm-up: ${err.message}`);
    }
  }

  if (phases.has('latency')) log(`latency: ${counts.latency} sequential echo calls each`);
  if (phases.has('latency')) await interleaved('latency', async (row, round) => {
    const n = share(counts.latency, round);
    row.samples.latency.push(...(await sequentialEcho(row.conn, n)));
    row.calls += n;
  });
  for (const c of [1, 16, 64]) {
    if (!phases.has(`c${c}`)) continue;
    log(`throughput at concurrency ${c}: ${counts.throughput} calls each`);
    await interleaved(`c${c}`, async (row, round) => {
      const n = share(counts.throughput, round);
      const upstreams = childPids(row.pid);
      // The c64 breakdown's system calls and client CPU: read around that phase only.
      const at64 = c === 64;
      const sys0 = at64 ? syscalls(row.pid) : undefined;
      const load0 = at64 ? process.cpuUsage() : undefined;
      const cpu0 = cpuMs(row.pid);
      const up0 = upstreams.map(cpuMs);
      row.elapsed[`c${c}`] += await concurrentEcho(row.conn, n, c);
      const cpu1 = cpuMs(row.pid);
      const up1 = upstreams.map(cpuMs);
      if (at64) {
        const load = process.cpuUsage(load0);
        const sys1 = syscalls(row.pid);
        row.cpu64.loadUs += load.user + load.system;
        row.cpu64.loadCalls += n;
        if (sys0 !== undefined && sys1 !== undefined) {
          row.cpu64.sys += sys1 - sys0;
          row.cpu64.sysCalls += n;
        }
      }
      if (cpu0 !== undefined && cpu1 !== undefined) {
        row.cpu.ms += cpu1 - cpu0;
        row.cpu.calls += n;
        if (at64) {
          row.cpu64.ms += cpu1 - cpu0;
          row.cpu64.calls += n;
          for (let i = 0; i < upstreams.length; i++) {
            if (up0[i] === undefined || up1[i] === undefined) continue;
            row.cpu64.upMs += up1[i] - up0[i];
            row.cpu64.up = true;
          }
        }
      }
      row.calls += n;
    });
  }
  for (const [key, bytes] of [
    ['mib1', MiB],
    ['mib8', 8 * MiB],
  ]) {
    if (!phases.has(key)) continue;
    log(`${bytes / MiB} MiB results: ${counts[key]} each`);
    await interleaved(key, async (row, round) => {
      const n = share(counts[key], round);
      row.samples[key].push(...(await sequentialBlob(row.conn, bytes, n)));
      row.calls += n;
    });
  }

  for (const row of rows) {
    if (row.status !== 'ok') continue;
    row.figures.rss = row.baseline && row.family === 'stdio' ? undefined : rssMiB(row.pid);
  }
  log('closing warm connections');
  for (const row of rows) {
    const conn = row.conn;
    row.conn = undefined;
    await conn?.close().catch(() => undefined);
  }

  if (coldRounds) log(`cold start: ${coldRounds} per configuration`);
  for (let round = 0; round < coldRounds; round++) {
    const order = rows.filter((r) => r.status === 'ok' && r.cold);
    const shift = round % Math.max(1, order.length);
    for (const row of [...order.slice(shift), ...order.slice(0, shift)]) {
      if (row.coldError) continue;
      try {
        row.samples.cold.push(await row.cold());
      } catch (err) {
        // The load figures stand; only this one is lost.
        row.coldError = err.message.split('\n')[0].slice(0, 300);
        log(`${row.id} cold start failed: ${row.coldError}`);
      }
    }
  }

  for (const row of rows) {
    if (row.status !== 'ok') continue;
    const f = row.figures;
    f.p50 = percentile(row.samples.latency, 50);
    f.p90 = percentile(row.samples.latency, 90);
    f.p99 = percentile(row.samples.latency, 99);
    for (const c of ['c1', 'c16', 'c64']) f[c] = row.elapsed[c] > 0 ? (counts.throughput / row.elapsed[c]) * 1000 : undefined;
    f.mib1 = percentile(row.samples.mib1, 50);
    f.mib8 = percentile(row.samples.mib8, 50);
    f.cold = percentile(row.samples.cold, 50);
    f.cpu = row.cpu.calls ? (row.cpu.ms * 1000) / row.cpu.calls : undefined;
    f.cpu64 = row.cpu64.calls ? (row.cpu64.ms * 1000) / row.cpu64.calls : undefined;
    f.upCpu64 = row.cpu64.calls && row.cpu64.up ? (row.cpu64.upMs * 1000) / row.cpu64.calls : undefined;
    f.sys64 = row.cpu64.sysCalls ? row.cpu64.sys / row.cpu64.sysCalls : undefined;
    f.loadCpu64 = row.cpu64.loadCalls ? row.cpu64.loadUs / row.cpu64.loadCalls : undefined;
    if (row.recordsPath) row.records = countLines(row.recordsPath);
    if (opts.timing && row.recordsPath) row.timing = await readTiming(join(tmp, `${row.id}.timing.json`));
  }
  const targets = evaluate(rows);
  const seconds = (performance.now() - started) / 1000;
  const meta = {
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    rounds,
    smoke: opts.smoke,
    seconds,
    counts: { ...counts, cold: coldRounds },
    partial,
  };
  const result = { meta, rows, targets, versusNaive: versusNaive(rows) };
  const printed = render(result) + (opts.timing ? '\n\n' + renderTiming(rows) : '');
  process.stdout.write(printed + '\n');
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(
    out,
    JSON.stringify(
      {
        meta,
        configurations: rows.map((r) => ({
          id: r.id,
          label: r.label,
          family: r.family,
          baseline: !!r.baseline,
          status: r.status,
          error: r.error,
          coldError: r.coldError,
          figures: r.figures,
          ratios: r.ratios,
          calls: r.calls,
          records: r.records,
          coldNote: r.coldNote,
          timing: r.timing,
        })),
        targets,
        versusNaive: result.versusNaive,
        table: printed,
      },
      null,
      2,
    ) + '\n',
  );
  log(`wrote ${out}`);
  if (rows.some((r) => r.status === 'failed' || r.coldError)) exitCode = 1;
} catch (err) {
  log(`aborted: ${err?.stack ?? err}`);
  exitCode = 1;
} finally {
  for (const row of rows) await row.conn?.close().catch(() => undefined);
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(exitCode);

/** The call-timing summary a broker wrote at exit (it may take a moment after the close); undefined if none came. */
async function readTiming(file) {
  for (let i = 0; i < 100; i++) {
    if (existsSync(file)) {
      try {
        return JSON.parse(readFileSync(file, 'utf8'));
      } catch {
        // Still being written.
      }
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return undefined;
}

function countLines(file) {
  try {
    const text = readFileSync(file, 'utf8');
    let n = 0;
    for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
    return n;
  } catch {
    return 0;
  }
}
