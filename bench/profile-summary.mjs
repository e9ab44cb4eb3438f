#!/usr/bin/env node
/**
 * Summarises a V8 `.cpuprofile` (from `node --cpu-prof`): self time by function and by file,
 * and inclusive time of the functions you name. For reading where the broker spends its time.
 *
 *   node bench/run.js --only broker-stdio --no-cold --broker-node-args="--cpu-prof --cpu-prof-dir=/tmp/prof"
 *   node bench/profile-summary.mjs /tmp/prof/<file>.cpuprofile [--top 40] [--inclusive name,name]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '40' }, inclusive: { type: 'string', default: '' } },
});
const profile = JSON.parse(readFileSync(positionals[0], 'utf8'));
const top = Number(values.top);

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// Self time per node from the sample stream.
const self = new Map();
const deltas = profile.timeDeltas;
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i];
  self.set(id, (self.get(id) ?? 0) + (deltas[i + 1] ?? 0));
}
// Percentages are of busy time: idle samples (waiting for I/O) are left out.
const isIdle = (id) => byId.get(id).callFrame.functionName === '(idle)';
for (const id of [...self.keys()]) if (isIdle(id)) self.delete(id);
const total = [...self.values()].reduce((a, b) => a + b, 0);

const short = (url) => url.replace(/^file:\/\//, '').replace(/.*node_modules\//, 'nm/').replace(/.*\/(dist|src|bench)\//, '$1/');
const nameOf = (n) => `${n.callFrame.functionName || '(anon)'} ${short(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;

function tally(key) {
  const m = new Map();
  for (const [id, t] of self) {
    const k = key(byId.get(id));
    m.set(k, (m.get(k) ?? 0) + t);
  }
  return [...m.entries()].sort((a, b) => b[1] - a[1]);
}

const pct = (t) => `${((100 * t) / total).toFixed(1).padStart(5)}%`;
console.log(`busy (non-idle) time sampled: ${(total / 1000).toFixed(0)} ms`);
console.log('\nself time by function');
for (const [k, t] of tally(nameOf).slice(0, top)) console.log(`${pct(t)}  ${k}`);
console.log('\nself time by file');
for (const [k, t] of tally((n) => short(n.callFrame.url) || n.callFrame.functionName).slice(0, 25)) console.log(`${pct(t)}  ${k}`);

if (values.inclusive) {
  console.log('\ninclusive time');
  for (const name of values.inclusive.split(',')) {
    let t = 0;
    for (const [id, s] of self) {
      for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
        if (byId.get(cur).callFrame.functionName === name) {
          t += s;
          break;
        }
      }
    }
    console.log(`${pct(t)}  ${name}`);
  }
}
