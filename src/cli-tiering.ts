/**
 * Sooner optimisation of the broker's own code (issue 19: sequential p50). `mcp-broker serve`
 * calls {@link optimiseSooner} once, when the upstreams' first dial has settled.
 *
 * V8 optimises a function with TurboFan once it has run enough bytecode: on Node 20 (V8 11) each
 * function's "interrupt budget" is 67,584 bytes of bytecode. One call through the broker runs a
 * few hundred functions, each once or a few times, so for its first ~2,000 calls a broker
 * process answers mostly from the interpreter and baseline code (a review counted 34 functions
 * optimised by call 300 and 109 by call 1,000; 95 and 230 with the budget below); that is every
 * call of most stdio sessions (a client starts its own broker). In alternating runs of
 * bench/run.js (its latency phase: 300 warm-up calls, then 2,000 in a row), a quarter of the
 * budget took the broker's p50 from 2.72–3.35× a direct connection to 2.05–2.58× (modern
 * clients 2.48–2.65× to 1.77–2.38×), with c64, 8 MiB, cold start and RSS within their noise
 * (bench/README.md, "What each change bought").
 *
 * Where V8 counts invocations instead (V8 12 and later: Node 22, 24) nothing is changed. Node
 * 24's Maglev tier already covers a session's first calls, and lowering its TurboFan and Maglev
 * counts showed no gain in two runs of a raw sequential driver; Node 22 was not measured.
 *
 * V8 reads the flag each time it sets a function's budget: a function that has not run yet gets
 * the quarter from the start; one that ran during the start keeps the budget it has until its
 * next tick.
 *
 * Nothing is changed either when:
 * - `MCP_BROKER_V8_TIERING=default` (any case): V8's own thresholds (to tell a tiering fault
 *   from ours);
 * - the process was started with a tiering flag of its own, on its command line or in
 *   `NODE_OPTIONS` (`--jitless`, `--interrupt-budget`, `--ticks-before-optimization`,
 *   `--maglev`, `--always-sparkplug`, `--max-opt`, `--no-use-osr`, …);
 * - the build is training the code caches (`MCP_BROKER_CODE_CACHE_OUT`): a V8 flag is part of a
 *   cache's check, and a cache written under another budget would be refused at every start.
 *
 * Not before the first dial has settled: the start's one-off work (the config's and the SDK's
 * schemas, the handshakes) would be optimised too, on the core where the upstreams boot. By
 * then the bundles are long compiled with their code caches, whose check the flag is part of.
 */
import { setFlagsFromString } from 'node:v8';
import { CODE_CACHE_OUT_ENV } from './cli-bundle.cjs';

/** `default`: leave V8's tiering thresholds alone. */
export const TIERING_ENV = 'MCP_BROKER_V8_TIERING';

/** V8 11's default `--interrupt-budget`, in bytes of bytecode run before TurboFan is considered. */
export const V8_11_INTERRUPT_BUDGET = 67_584;
/** The budget `serve` sets on V8 11: a quarter of the default. */
export const BROKER_INTERRUPT_BUDGET = V8_11_INTERRUPT_BUDGET / 4;

/** Flags that set when V8 tiers up; one of them among the process's own means the operator chose. */
const TIERING_FLAGS =
  /^--(?:no[-_])?(?:always[-_])?(?:jitless|lite[-_]mode|interrupt[-_]budget|invocation[-_]count|ticks[-_]before|bytecode[-_]size[-_]allowance|max[-_]bytecode[-_]size|minimum[-_]invocations|maglev|sparkplug|turbofan|turbo[-_]filter|opt\b|max[-_]opt|osr|use[-_]osr|lazy[-_]feedback)/;

/** What {@link optimiseSooner} did: the flag it set, or why it set none. */
export type Tiering = { set: string } | { kept: 'disabled' | 'own_flags' | 'training' | 'v8_version' };

export interface TieringDeps {
  env?: NodeJS.ProcessEnv;
  /** The process's own Node and V8 flags (default `process.execArgv`; `NODE_OPTIONS` is read from `env`). */
  execArgv?: readonly string[];
  /** V8's version (default `process.versions.v8`). */
  v8Version?: string;
  /** Default `node:v8`'s. */
  setFlags?: (flags: string) => void;
}

/**
 * Lowers V8 11's interrupt budget to {@link BROKER_INTERRUPT_BUDGET} for this process, unless one
 * of the cases in the module comment holds. Returns what it did.
 */
export function optimiseSooner(deps: TieringDeps = {}): Tiering {
  const env = deps.env ?? process.env;
  const tiering = choose(env, deps.execArgv ?? process.execArgv, deps.v8Version ?? process.versions.v8);
  if ('set' in tiering) (deps.setFlags ?? setFlagsFromString)(tiering.set);
  return tiering;
}

function choose(env: NodeJS.ProcessEnv, execArgv: readonly string[], v8Version: string): Tiering {
  if (env[TIERING_ENV]?.toLowerCase() === 'default') return { kept: 'disabled' };
  if (env[CODE_CACHE_OUT_ENV]) return { kept: 'training' };
  const own = [...execArgv, ...(env.NODE_OPTIONS ?? '').split(/\s+/)];
  if (own.some((arg) => TIERING_FLAGS.test(arg))) return { kept: 'own_flags' };
  if (Number.parseInt(v8Version, 10) !== 11) return { kept: 'v8_version' };
  return { set: `--interrupt-budget=${BROKER_INTERRUPT_BUDGET}` };
}
