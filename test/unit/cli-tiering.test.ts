/**
 * Issue 19 (sequential p50): `serve` lowers V8 11's interrupt budget so the broker's own code is
 * optimised sooner (src/cli-tiering.ts), and leaves V8 alone when told to, when the command line
 * chose a tiering of its own, while the build trains the code caches, and on other V8 lines. The
 * last case runs V8 itself: a function is optimised about four times sooner after the call.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { BROKER_INTERRUPT_BUDGET, optimiseSooner, TIERING_ENV, V8_11_INTERRUPT_BUDGET } from '../../src/cli-tiering.js';

function run(deps: { env?: NodeJS.ProcessEnv; execArgv?: string[]; v8Version?: string }) {
  const set: string[] = [];
  const tiering = optimiseSooner({ env: {}, execArgv: [], v8Version: '11.3.244.8-node.38', ...deps, setFlags: (flags) => set.push(flags) });
  return { tiering, set };
}

describe('optimiseSooner', () => {
  it('on V8 11 sets a quarter of the default interrupt budget', () => {
    expect(BROKER_INTERRUPT_BUDGET).toBe(V8_11_INTERRUPT_BUDGET / 4);
    const { tiering, set } = run({});
    expect(tiering).toEqual({ set: `--interrupt-budget=${BROKER_INTERRUPT_BUDGET}` });
    expect(set).toEqual([`--interrupt-budget=${BROKER_INTERRUPT_BUDGET}`]);
  });

  it('sets nothing on V8 lines that count invocations instead (Node 22, 24)', () => {
    for (const v8Version of ['12.4.254.21-node.57', '13.6.233.17-node.63']) {
      expect(run({ v8Version })).toEqual({ tiering: { kept: 'v8_version' }, set: [] });
    }
  });

  it(`sets nothing with ${TIERING_ENV}=default, or while the build trains the code caches`, () => {
    expect(run({ env: { [TIERING_ENV]: 'default' } })).toEqual({ tiering: { kept: 'disabled' }, set: [] });
    expect(run({ env: { MCP_BROKER_CODE_CACHE_OUT: '/tmp/cache' } })).toEqual({ tiering: { kept: 'training' }, set: [] });
    // Any other value is not a request to keep V8's thresholds.
    expect(run({ env: { [TIERING_ENV]: 'Default' } })).toEqual({ tiering: { kept: 'disabled' }, set: [] });
    expect(run({ env: { [TIERING_ENV]: 'yes' } }).set).toHaveLength(1);
  });

  it("sets nothing when the command line chose V8's tiering itself, and ignores other flags", () => {
    const others = ['--max-lazy', '--optimize-for-size', '--max-old-space-size=512'];
    const tiering = ['--jitless', '--lite-mode', '--interrupt-budget=1000', '--interrupt_budget=1000', '--ticks-before-optimization=10', '--bytecode-size-allowance-per-tick=1000', '--max-bytecode-size-for-early-opt=0'];
    tiering.push('--no-maglev', '--always-sparkplug', '--always-turbofan', '--turbo-filter=~', '--no-opt', '--max-opt=2', '--invocation-count-for-turbofan=10', '--always-osr', '--no-use-osr', '--no-lazy-feedback-allocation');
    for (const flag of [...tiering, ...others]) {
      const { tiering, set } = run({ execArgv: ['--enable-source-maps', flag] });
      if (others.includes(flag)) expect({ flag, set }).toEqual({ flag, set: [`--interrupt-budget=${BROKER_INTERRUPT_BUDGET}`] });
      else expect({ flag, tiering, set }).toEqual({ flag, tiering: { kept: 'own_flags' }, set: [] });
    }
    expect(run({ execArgv: ['--cpu-prof', '--cpu-prof-dir=/tmp/p', '--max-old-space-size=512'] }).set).toHaveLength(1);
    // NODE_OPTIONS carries some V8 flags (--jitless among them) that process.execArgv never shows.
    expect(run({ env: { NODE_OPTIONS: '--enable-source-maps  --jitless' } })).toEqual({ tiering: { kept: 'own_flags' }, set: [] });
    expect(run({ env: { NODE_OPTIONS: '--max-old-space-size=512' } }).set).toHaveLength(1);
  });

  it.runIf(Number.parseInt(process.versions.v8, 10) === 11)('makes V8 optimise a function about four times sooner (this Node is V8 11)', () => {
    // The flag as this module decides it; a child V8 applies it at run time, as serve does, with
    // optimisation in the foreground and no on-stack replacement: the count is V8's tier-up alone.
    let flag = '';
    expect(optimiseSooner({ env: {}, execArgv: [], setFlags: (f) => (flag = f) })).toEqual({ set: flag });
    const callsUntilOptimised = (setAtRunTime: string | undefined) => {
      const script = [
        ...(setAtRunTime === undefined ? [] : [`require('node:v8').setFlagsFromString(${JSON.stringify(setAtRunTime)});`]),
        'function work(a) { return a * 2 + 1; }',
        'let n = 0;',
        'for (; n < 1e6; n++) { work(n); if (%GetOptimizationStatus(work) & 16) break; }',
        'console.log(n);',
      ].join('\n');
      const out = spawnSync(process.execPath, ['--allow-natives-syntax', '--no-use-osr', '--no-concurrent-recompilation', '-e', script], { encoding: 'utf8' });
      expect(out.status, out.stderr).toBe(0);
      return Number(out.stdout.trim());
    };
    const sooner = callsUntilOptimised(flag);
    const asV8 = callsUntilOptimised(undefined);
    expect(asV8).toBeLessThan(1e6);
    expect(sooner).toBeLessThan(asV8 / 3);
  });
});
