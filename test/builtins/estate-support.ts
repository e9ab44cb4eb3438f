/**
 * Shared set-up for the estate tests: a temp folder holding an estate root and, beside it, an
 * `outside/` folder with a canary file that no estate tool may ever read, plus the ways out of the
 * root a path can try (symlinks out, an absolute symlink, a dangling one, a loop, a FIFO).
 */
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { estateTools, type ReservedPath } from '../../src/builtins/estate/index.js';
import type { BrokerCall, CallerSession } from '../../src/broker/types.js';
import { ToolRouter, type RouterOutcome } from '../../src/router/index.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { Scrubber } from '../../src/shared/scrub.js';
import { SqliteStore } from '../../src/store/sqlite.js';
import { Registry } from '../../src/upstream/registry.js';

export interface EstateFixture {
  base: string;
  root: string;
  outside: string;
  /** The secret text of `outside/canary.txt`. */
  canary: string;
  canarySha256: string;
  router: ToolRouter;
  store: SqliteStore;
  /** Runs one estate tool through the router (the broker's dispatch point), as `principal` (default `local`). */
  run(name: string, args: Record<string, unknown>, principal?: string): Promise<RouterOutcome>;
  /** The record notes the last call left (`proposal`). */
  lastNotes(): BrokerCall['notes'];
  /** A snapshot of everything outside the root (names and contents), to prove nothing changed. */
  outsideSnapshot(): string;
  close(): Promise<void>;
}

export interface EstateFixtureOptions {
  maxBytes?: number;
  maxResults?: number;
  /** Runs inside `estate__apply_proposal` between its checks and its write. */
  beforeWrite?: () => void | Promise<void>;
  /** Principals with role `operator` (besides `local`, always privileged). */
  operators?: string[];
  /** The scrubber the read tools mask with; default one with no exact secrets (the built-in patterns only). */
  scrubber?: Scrubber;
  /** The broker's own paths the scope refuses (estateTools' `reserved`), given the root. */
  reserved?: (root: string) => ReservedPath[];
}

export function makeEstate(limits: EstateFixtureOptions = {}): EstateFixture {
  const base = mkdtempSync(join(tmpdir(), 'mcp-broker-estate-'));
  const root = join(base, 'root');
  const outside = join(base, 'outside');
  mkdirSync(join(root, 'sub', 'deeper'), { recursive: true });
  mkdirSync(outside);
  const canary = `CANARY-${randomBytes(8).toString('hex')}`;
  writeFileSync(join(outside, 'canary.txt'), `${canary}\n`);
  writeFileSync(join(root, 'a.txt'), 'alpha line\nsecond line\n');
  writeFileSync(join(root, 'sub', 'b.txt'), 'bravo\n');
  writeFileSync(join(root, 'sub', 'deeper', 'c.txt'), 'charlie\n');
  // Encoded separators are names, never decoded.
  writeFileSync(join(root, '%2e%2e%2fcanary.txt'), 'literal name inside the root\n');
  symlinkSync('../outside', join(root, 'link-out'));
  symlinkSync('../outside/canary.txt', join(root, 'link-canary'));
  symlinkSync('../../outside/canary.txt', join(root, 'sub', 'up'));
  symlinkSync(join(outside, 'canary.txt'), join(root, 'abs-link'));
  symlinkSync('../outside/nothing-here', join(root, 'dangling'));
  symlinkSync('loop', join(root, 'loop'));
  symlinkSync('a.txt', join(root, 'link-in'));
  symlinkSync('sub', join(root, 'link-sub'));
  execFileSync('mkfifo', [join(root, 'fifo')]);
  const store = SqliteStore.open(':memory:');
  const router = new ToolRouter(new Registry(silentLogger()), new ManualClock());
  router.register(
    estateTools({
      config: { root, maxBytes: limits.maxBytes ?? 256 * 1024, maxResults: limits.maxResults ?? 100 },
      scrubber: limits.scrubber ?? new Scrubber(),
      store: () => store,
      clock: new ManualClock(),
      isPrivileged: (principal) => principal === 'local' || (limits.operators ?? []).includes(principal),
      beforeWrite: limits.beforeWrite,
      ...(limits.reserved ? { reserved: limits.reserved(root) } : {}),
    }),
    { server: 'estate' },
  );
  let seq = 0;
  let notes: BrokerCall['notes'] = {};
  const run = async (name: string, args: Record<string, unknown>, principal = 'local') => {
    const caller: CallerSession = { sessionId: `s-${principal}`, principal, unit: `s-${principal}`, isLive: () => true };
    const signal = new AbortController().signal;
    const call: BrokerCall = { callId: `c${++seq}`, request: { name, args, signal }, session: caller, startedAt: 0, signal, attempts: 0, bytesOut: 0, notes: {} };
    notes = call.notes;
    const [outcome] = await router.dispatchBatch([call]);
    return outcome!;
  };
  const outsideSnapshot = () =>
    readdirSync(outside)
      .sort()
      .map((n) => `${n}:${readFileSync(join(outside, n), 'utf8')}`)
      .join('|');
  return {
    base,
    root,
    outside,
    canary,
    canarySha256: createHash('sha256').update(`${canary}\n`).digest('hex'),
    router,
    store,
    run,
    lastNotes: () => notes,
    outsideSnapshot,
    async close() {
      await store.close();
      rmSync(base, { recursive: true, force: true });
    },
  };
}

/** Text of the first content block. */
export function firstText(result: CallToolResult): string {
  return (result.content[0] as { text: string }).text;
}
