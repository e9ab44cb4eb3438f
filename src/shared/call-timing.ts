/**
 * Where a call's time goes (`node bench/run.js --timing`): timestamps taken at the points of
 * the call path (stdin read, parse, each broker stage in and out, upstream write and read,
 * records write, stdout write), summed per segment over the calls that ran alone, and written
 * as JSON when the process exits.
 *
 * Off unless `MCP_BROKER_CALL_TIMING` names a file when the process starts. The switch is read
 * once, into {@link CALL_TIMING}: every call site is `if (CALL_TIMING) markCall(…)`, one branch
 * on a constant and no allocation when off.
 *
 * A trace opens at the first point after the previous one closed. Requests are counted in at
 * `parse` (a request: `edge` `'begin'`) and out at `stdout write` / `response end` (`'end'`);
 * the trace closes when none is in flight. A trace during which two were in flight at once is
 * counted (`overlapped`) but not timed: its points interleave, so only calls alone on the path
 * (sequential load) give segments. A segment holds the time from one point to the next.
 *
 * The file: `{calls, overlapped, path, segments: [{from, to, count, medianUs, meanUs}]}`, segments
 * in the order first seen; `path` is the sequence of points most calls timed alone took
 * through the broker's stages (`"<stage> in"`/`"<stage> out"`), in order.
 */
import { writeFileSync } from 'node:fs';

/** The file the summary goes to, from `MCP_BROKER_CALL_TIMING` at start; undefined: off. */
const TARGET = process.env.MCP_BROKER_CALL_TIMING || undefined;

/** True when call timing is on; constant for the life of the process. */
export const CALL_TIMING: boolean = TARGET !== undefined;

/** Samples kept per segment (the median is taken over them). */
const MAX_SAMPLES = 50_000;

interface Segment {
  from: string;
  to: string;
  samples: number[];
  sum: number;
  count: number;
}

let points: string[] = [];
let times: number[] = [];
let overlapped = false;
/** Requests received and not yet answered. */
let inflight = 0;
/** The point sequences of the calls timed alone that ran the broker's stages, with how many took each. */
const shapes = new Map<string, { points: string[]; count: number }>();
/** Distinct sequences kept (the most common one is the path reported). */
const MAX_SHAPES = 64;
let calls = 0;
let overlappedCalls = 0;
const segments = new Map<string, Segment>();

/**
 * Notes that the call path reached `point` now: `edge` `'begin'` where a request is taken in
 * (parsed), `'end'` where one is answered. Call only under `if (CALL_TIMING)`.
 */
export function markCall(point: string, edge?: 'begin' | 'end'): void {
  const now = performance.now();
  points.push(point);
  times.push(now);
  if (edge === 'begin' && ++inflight > 1) overlapped = true;
  else if (edge === 'end') {
    inflight = Math.max(0, inflight - 1);
    if (inflight === 0) close();
  }
}

function close(): void {
  calls++;
  if (overlapped) overlappedCalls++;
  else {
    for (let i = 1; i < points.length; i++) {
      const key = `${points[i - 1]}\u0000${points[i]}`;
      let s = segments.get(key);
      if (!s) segments.set(key, (s = { from: points[i - 1]!, to: points[i]!, samples: [], sum: 0, count: 0 }));
      const us = (times[i]! - times[i - 1]!) * 1000;
      s.sum += us;
      s.count++;
      if (s.samples.length < MAX_SAMPLES) s.samples.push(us);
    }
    if (points.some((p) => p.endsWith(' in'))) {
      const shape = points.join('\u0000');
      const seen = shapes.get(shape);
      if (seen) seen.count++;
      else if (shapes.size < MAX_SHAPES) shapes.set(shape, { points, count: 1 });
    }
  }
  points = [];
  times = [];
  overlapped = false;
}

/** The summary as written to the file. */
export function callTimingSummary(): { calls: number; overlapped: number; path: string[]; segments: Array<{ from: string; to: string; count: number; medianUs: number; meanUs: number }> } {
  return {
    calls,
    overlapped: overlappedCalls,
    path: [...shapes.values()].reduce<{ points: string[]; count: number } | undefined>((a, b) => (!a || b.count > a.count ? b : a), undefined)?.points ?? [],
    segments: [...segments.values()].map((s) => {
      const sorted = [...s.samples].sort((a, b) => a - b);
      return { from: s.from, to: s.to, count: s.count, medianUs: sorted[Math.floor(sorted.length / 2)] ?? 0, meanUs: s.count ? s.sum / s.count : 0 };
    }),
  };
}

if (TARGET !== undefined) {
  process.on('exit', () => {
    try {
      writeFileSync(TARGET, JSON.stringify(callTimingSummary()) + '\n');
    } catch {
      // Timing is a bench aid: never fail the exit over it.
    }
  });
}
