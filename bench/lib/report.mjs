/**
 * Figures → ratios → targets → the printed table (and the same data as JSON).
 *
 * A ratio is a cost against the row's family baseline (`direct` for stdio rows, `sdk-floor`
 * for HTTP rows, `direct-modern` and `sdk-floor-modern` for the 2026-07-28 client's rows): 1.00× costs the same, 2.00× twice as much. For latency and large results it
 * is value / baseline; for throughput it is baseline / value (the time per call ratio).
 */

/** Every figure: key, label, unit, and whether more is better. */
export const FIGURES = [
  { key: 'p50', label: 'echo 100 B p50', unit: 'ms' },
  { key: 'p90', label: 'echo 100 B p90', unit: 'ms' },
  { key: 'p99', label: 'echo 100 B p99', unit: 'ms' },
  { key: 'c1', label: 'throughput c1', unit: '/s', higherIsBetter: true },
  { key: 'c16', label: 'throughput c16', unit: '/s', higherIsBetter: true },
  { key: 'c64', label: 'throughput c64', unit: '/s', higherIsBetter: true },
  { key: 'mib1', label: '1 MiB result', unit: 'ms' },
  { key: 'mib8', label: '8 MiB result', unit: 'ms' },
  { key: 'rss', label: 'proxy RSS after run', unit: 'MiB', absolute: true },
  { key: 'cpu', label: 'process CPU per call', unit: 'µs' },
  { key: 'cpu64', label: 'process CPU per call c64', unit: 'µs' },
  { key: 'upCpu64', label: 'its upstream CPU/call c64', unit: 'µs', absolute: true },
  { key: 'sys64', label: 'process syscalls per call c64', unit: 'calls', absolute: true },
  { key: 'loadCpu64', label: 'client CPU per call c64', unit: 'µs', absolute: true },
  { key: 'cold', label: 'cold start → tools/list', unit: 'ms' },
];

/** The issue's targets, for the broker rows (same run, full path, a record per call). */
export const TARGETS = [
  { id: 'broker-stdio', key: 'p50', max: 2.5, text: 'stdio p50 ≤ 2.5× direct' },
  { id: 'broker-stdio', key: 'c64', max: 1.6, text: 'stdio c64 time per call ≤ 1.6× direct' },
  { id: 'broker-stdio', key: 'mib8', max: 1.5, text: 'stdio 8 MiB ≤ 1.5× direct' },
  { id: 'broker-stdio', key: 'rss', maxAbsolute: 120, text: 'stdio proxy RSS ≤ 120 MiB' },
  { id: 'broker-stdio', key: 'cold', max: 1.5, text: 'cold start (1 upstream) ≤ 1.5× direct' },
  { id: 'broker-http', key: 'p50', max: 1.25, text: 'http p50 ≤ 1.25× SDK floor' },
  { id: 'broker-http', key: 'c64', max: 1.25, text: 'http c64 time per call ≤ 1.25× SDK floor' },
  { id: 'broker-http', key: 'rss', maxAbsolute: 120, text: 'http proxy RSS ≤ 120 MiB' },
  { id: 'broker-stdio-modern', key: 'p50', max: 2.5, text: 'modern stdio p50 ≤ 2.5× direct modern' },
  { id: 'broker-stdio-modern', key: 'c64', max: 1.6, text: 'modern stdio c64 time per call ≤ 1.6× direct modern' },
  { id: 'broker-stdio-modern', key: 'mib8', max: 1.5, text: 'modern stdio 8 MiB ≤ 1.5× direct modern' },
  { id: 'broker-stdio-modern', key: 'rss', maxAbsolute: 120, text: 'modern stdio proxy RSS ≤ 120 MiB' },
  { id: 'broker-stdio-modern', key: 'cold', max: 1.5, text: 'modern cold start (1 upstream) ≤ 1.5× direct modern' },
  { id: 'broker-http-modern', key: 'p50', max: 1.25, text: 'modern http p50 ≤ 1.25× SDK modern floor' },
  { id: 'broker-http-modern', key: 'c64', max: 1.25, text: 'modern http c64 time per call ≤ 1.25× SDK modern floor' },
];

/**
 * The issue's other yardstick: each stdio broker row against the naive SDK aggregator of its
 * family (`bench/naive-aggregator.mjs`: Client + Server forwarding calls, no policy, no records),
 * same run, same client. Not targets; printed beside them.
 */
const VERSUS_NAIVE = [
  { id: 'broker-stdio', naive: 'naive' },
  { id: 'broker-stdio-modern', naive: 'naive-modern' },
];
const VERSUS_FIGURES = ['p50', 'c64', 'mib8', 'cpu64', 'cold'];
const VERSUS_LABELS = { p50: 'p50', c64: 'c64 time per call', mib8: '8 MiB', cpu64: 'CPU per call c64', cold: 'cold start' };

/**
 * Cost of each broker row against its naive aggregator, per figure of {@link VERSUS_FIGURES}
 * (1.00× = the same; below 1, the broker costs less): `[{id, naive, label, ratios: {p50, …}}]`,
 * a figure left out when either row lacks it; rows whose naive aggregator did not run are left out.
 */
export function versusNaive(rows) {
  const ok = (id) => rows.find((r) => r.id === id && r.status === 'ok');
  return VERSUS_NAIVE.flatMap((v) => {
    const broker = ok(v.id);
    const naive = ok(v.naive);
    if (!broker || !naive) return [];
    const ratios = {};
    for (const key of VERSUS_FIGURES) {
      // A cold start that failed in some round prints "failed" in the table: no ratio from the rest.
      if (key === 'cold' && (broker.coldError || naive.coldError)) continue;
      const r = ratioOf(FIGURES.find((f) => f.key === key), broker.figures?.[key], naive.figures?.[key]);
      if (r !== undefined) ratios[key] = r;
    }
    return [{ ...v, label: broker.label, ratios }];
  });
}

/** The printed tables: one per family, in this order. */
const FAMILIES = [
  { family: 'stdio', title: 'stdio' },
  { family: 'http', title: 'Streamable HTTP' },
  { family: 'stdio-modern', title: 'stdio, 2026-07-28 client' },
  { family: 'http-modern', title: 'HTTP, 2026-07-28 client (stateless)' },
];

/** Ratio of one figure against its baseline figure, or undefined. */
export function ratioOf(figure, value, base) {
  if (figure.absolute || value === undefined || base === undefined || value <= 0 || base <= 0) return undefined;
  return figure.higherIsBetter ? base / value : value / base;
}

/** Adds `ratios` to each row and evaluates the targets. */
export function evaluate(rows) {
  const baseOf = (family) => rows.find((r) => r.family === family && r.baseline);
  for (const row of rows) {
    const base = baseOf(row.family);
    row.ratios = {};
    for (const f of FIGURES) row.ratios[f.key] = base && row !== base ? ratioOf(f, row.figures?.[f.key], base.figures?.[f.key]) : undefined;
  }
  return TARGETS.map((t) => {
    const row = rows.find((r) => r.id === t.id);
    const figure = FIGURES.find((f) => f.key === t.key);
    const value = row?.figures?.[t.key];
    const ratio = row?.ratios?.[t.key];
    let status;
    if (!row || row.status !== 'ok' || value === undefined) status = 'n/a';
    else if (t.maxAbsolute !== undefined) status = value <= t.maxAbsolute ? 'met' : 'missed';
    else status = ratio !== undefined && ratio <= t.max ? 'met' : 'missed';
    return { ...t, figure: figure.label, value, ratio, status };
  });
}

function fmtValue(figure, v) {
  if (v === undefined) return '—';
  if (figure.unit === '/s') return `${Math.round(v).toLocaleString('en-US')}/s`;
  if (figure.unit === 'MiB') return `${v.toFixed(1)} MiB`;
  if (figure.unit === 'µs') return `${Math.round(v)} µs`;
  if (figure.unit === 'calls') return v.toFixed(2);
  if (v < 10) return `${v.toFixed(2)} ms`;
  if (v < 100) return `${v.toFixed(1)} ms`;
  return `${Math.round(v)} ms`;
}

function fmtRatio(r) {
  return r === undefined ? '' : `${r.toFixed(2)}×`;
}

function cell(row, figure) {
  if (row.status === 'unavailable') return 'n/a (not available)';
  if (row.status === 'failed') return 'failed';
  if (figure.key === 'cold' && row.coldError) return 'failed';
  const v = row.figures?.[figure.key];
  const r = row.ratios?.[figure.key];
  return r === undefined ? fmtValue(figure, v) : `${fmtValue(figure, v)} ${fmtRatio(r)}`;
}

function table(title, rows) {
  const header = [title, ...rows.map((r) => r.label + (r.baseline ? ' (base)' : ''))];
  const body = FIGURES.map((f) => [f.label, ...rows.map((r) => cell(r, f))]);
  const widths = header.map((_, i) => Math.max(...[header, ...body].map((line) => line[i].length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ').trimEnd();
  return [line(header), line(widths.map((w) => '─'.repeat(w))), ...body.map(line)].join('\n');
}

/**
 * A target's ratio as printed: two decimals, or more when two would round it onto the other
 * side of its bound (1.2504 against 1.25 prints 1.2504, not 1.25), so the printed figure always
 * agrees with the verdict (met: ratio ≤ max).
 */
export function verdictRatio(ratio, max) {
  for (let digits = 2; digits < 8; digits++) {
    const shown = ratio.toFixed(digits);
    if (Number(shown) <= max === ratio <= max) return shown;
  }
  return String(ratio);
}

/** The whole printout: header, the stdio and HTTP tables, notes, targets. */
export function render(result) {
  const { rows, targets, meta } = result;
  const out = [];
  out.push(
    `mcp-broker benchmark${meta.smoke ? ' (SMOKE: tiny counts, figures meaningless)' : ''}${meta.partial ? ' (partial run)' : ''} · ${meta.date} · node ${meta.node} · ${meta.cpus} cpus · ${meta.rounds} interleaved rounds · ${meta.seconds.toFixed(0)} s`,
  );
  out.push(
    `load: ${meta.counts.latency} sequential echo calls of 100 B; ${meta.counts.throughput} calls at each concurrency; ${meta.counts.mib1} × 1 MiB and ${meta.counts.mib8} × 8 MiB results (median); cold start median of ${meta.counts.cold}`,
  );
  out.push('ratios: cost against the family baseline (direct for stdio, SDK floor for HTTP, each era against its own); 1.00× = same cost, higher = slower');
  out.push('');
  for (const { family, title } of FAMILIES) {
    const members = rows.filter((r) => r.family === family);
    if (!members.length) continue;
    out.push(table(title, members));
    out.push('');
  }
  for (const r of rows) {
    if (r.status === 'failed') out.push(`  ${r.label}: failed: ${r.error}`);
    if (r.status === 'unavailable') out.push(`  ${r.label}: n/a (not available): ${r.error}`);
    if (r.coldError) out.push(`  ${r.label}: cold start failed: ${r.coldError}`);
  }
  const notes = rows.filter((r) => r.coldNote && r.status === 'ok').map((r) => `${r.label}: ${r.coldNote}`);
  out.push(`cold start: ${notes.join('; ')}`);
  out.push('process CPU per call: user+system CPU of the proxy process (for direct: the upstream itself; for the floor: the server) over the throughput phases; c64: over that phase alone; its upstream: the child processes it spawned (the echo upstream), same phase');
  out.push('process syscalls per call c64: the read and write system calls of that process (syscr + syscw of /proc/<pid>/io) over the c64 phase; client CPU per call c64: the benchmark\'s own process (the SDK client making the calls), same phase');
  for (const r of rows) if (r.records !== undefined) out.push(`records: ${r.label} wrote ${r.records} records for ${r.calls} calls`);
  out.push('');
  out.push('targets (mcp-broker, default policy, records on)');
  for (const t of targets) {
    const got = t.maxAbsolute !== undefined ? (t.value === undefined ? '—' : `${t.value.toFixed(1)} MiB`) : t.ratio === undefined ? '—' : `${verdictRatio(t.ratio, t.max)}×`;
    const want = t.maxAbsolute !== undefined ? `≤ ${t.maxAbsolute} MiB` : `≤ ${t.max.toFixed(2)}×`;
    out.push(`  ${t.status.padEnd(6)}  ${t.text.padEnd(54)} ${got.padStart(10)}  (${want})`);
  }
  const versus = result.versusNaive ?? [];
  if (versus.length) {
    out.push('');
    out.push('against the naive SDK aggregator (same run, same client; below 1.00× the broker costs less)');
    for (const v of versus) {
      const figures = VERSUS_FIGURES.filter((k) => v.ratios[k] !== undefined).map((k) => `${VERSUS_LABELS[k]} ${fmtRatio(v.ratios[k])}`);
      out.push(`  ${v.label.padEnd(24)} ${figures.join(' · ')}`);
    }
  }
  return out.join('\n');
}

/**
 * The call-timing breakdown of each broker row (`--timing`): along the path most calls took
 * (src/shared/call-timing.ts), the median time from each point to the next and its share of the
 * summed medians.
 */
export function renderTiming(rows) {
  const out = ["where a call's time goes (--timing: calls alone on the path, i.e. the sequential phases; median µs from the point before)"];
  for (const row of rows) {
    if (!row.recordsPath) continue;
    const t = row.timing;
    if (!t || !t.path?.length) {
      out.push(`  ${row.label}: no timing written`);
      continue;
    }
    const byPair = new Map(t.segments.map((s) => [`${s.from}\u0000${s.to}`, s]));
    // A step repeated in a row (an upstream answer read in many chunks) is one line: ×n, its median n times.
    const steps = [];
    for (let i = 1; i < t.path.length; i++) {
      const step = byPair.get(`${t.path[i - 1]}\u0000${t.path[i]}`) ?? { from: t.path[i - 1], to: t.path[i], medianUs: 0 };
      const last = steps[steps.length - 1];
      if (last && last.from === step.from && last.to === step.to) last.times++;
      else steps.push({ from: step.from, to: step.to, medianUs: step.medianUs, times: 1 });
    }
    const label = (s) => `${s.from} → ${s.to}${s.times > 1 ? ` ×${s.times}` : ''}`;
    const total = steps.reduce((a, s) => a + s.medianUs * s.times, 0);
    out.push('');
    out.push(`  ${row.label}: ${t.calls - t.overlapped} calls timed alone (${t.overlapped} overlapped, not timed); sum of medians ${total.toFixed(0)} µs`);
    const width = Math.max(...steps.map((s) => label(s).length));
    for (const s of steps) {
      const us = s.medianUs * s.times;
      const share = total > 0 ? ((100 * us) / total).toFixed(0) : '0';
      out.push(`    ${label(s).padEnd(width)}  ${us.toFixed(1).padStart(7)} µs  ${share.padStart(3)} %`);
    }
  }
  return out.join('\n');
}
