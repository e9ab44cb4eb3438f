/**
 * The principal connections of an upstream isolated per principal (upstream/isolated.ts), on a
 * real fixture child (test/fixtures/crashy.mjs: `hello` answers its pid, `hang` never answers,
 * `crash` exits) and a manual clock for idle closing and restarts.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import type { StdioServerConfig } from '../../src/config/schema.js';
import { ManualClock } from '../../src/shared/clock.js';
import { BrokerError, ConfigError } from '../../src/shared/errors.js';
import { silentLogger } from '../../src/shared/logger.js';
import { IsolatedUpstream } from '../../src/upstream/isolated.js';
import { DEFAULT_INHERITED_ENV } from '../../src/upstream/spawn-env.js';

const crashy = fileURLToPath(new URL('../fixtures/crashy.mjs', import.meta.url));
const IDLE_MS = 60_000;

const textOf = (r: unknown) => ((r as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('');

let open: IsolatedUpstream[] = [];
afterEach(async () => {
  await Promise.all(open.map((u) => u.close()));
  open = [];
});

async function isolated(clock: ManualClock, maxPrincipals = 16): Promise<IsolatedUpstream> {
  const config = parseConfig({ mcpServers: { crashy: { command: 'node', args: [crashy], isolation: 'principal' } } }, { env: {} }).mcpServers.crashy as StdioServerConfig;
  expect(config.isolation).toBe('principal');
  const upstream = new IsolatedUpstream(
    { name: 'crashy', config, logger: silentLogger(), clock, inheritEnv: DEFAULT_INHERITED_ENV, maxMessageBytes: 1024 * 1024, restart: { initialDelayMs: 100, maxDelayMs: 1000 } },
    { idleMs: IDLE_MS, maxPrincipals },
  );
  open.push(upstream);
  await upstream.start();
  expect(upstream.status.state).toBe('ready');
  return upstream;
}

/** The pid of the child that answered `principal`'s `hello`. */
async function pidOf(upstream: IsolatedUpstream, principal?: string): Promise<string> {
  const result = await upstream.callTool('hello', {}, { signal: new AbortController().signal, timeoutMs: 10_000, principal });
  return textOf(result).replace('hello from ', '');
}

describe('IsolatedUpstream', () => {
  it('dials a principal connection on its first call only, and sends no principal and "local" to the primary', async () => {
    const upstream = await isolated(new ManualClock());
    expect(upstream.principals).toEqual([]);
    const primary = await pidOf(upstream);
    expect(await pidOf(upstream, 'local')).toBe(primary);
    expect(upstream.principals).toEqual([]);
    const alice = await pidOf(upstream, 'alice');
    const bob = await pidOf(upstream, 'bob');
    expect(new Set([primary, alice, bob]).size).toBe(3);
    expect(await pidOf(upstream, 'alice')).toBe(alice);
    expect(upstream.principals.sort()).toEqual(['alice', 'bob']);
    expect(upstream.catalog.tools.map((t) => t.name)).toEqual(['hang', 'crash', 'hello']);
  });

  it('closes a principal connection idle for idleMs, not one with a call in flight, and dials anew after', async () => {
    const clock = new ManualClock();
    const upstream = await isolated(clock);
    const first = await pidOf(upstream, 'alice');
    const busy = new AbortController();
    const hanging = upstream.callTool('hang', {}, { signal: busy.signal, timeoutMs: 600_000, principal: 'bob' });
    await clock.advance(IDLE_MS - 1);
    expect(upstream.principals.sort()).toEqual(['alice', 'bob']);
    await clock.advance(1);
    expect(upstream.principals).toEqual(['bob']);
    await clock.advance(IDLE_MS * 2);
    expect(upstream.principals).toEqual(['bob']);
    busy.abort();
    await expect(hanging).rejects.toBeDefined();
    const again = await pidOf(upstream, 'alice');
    expect(again).not.toBe(first);
  });

  it('past maxPrincipals closes the least recently used idle connection; with none idle, refuses upstream_error', async () => {
    const upstream = await isolated(new ManualClock(), 2);
    await pidOf(upstream, 'alice');
    const bob = await pidOf(upstream, 'bob');
    await pidOf(upstream, 'carol');
    expect(upstream.principals.sort()).toEqual(['bob', 'carol']);
    expect(await pidOf(upstream, 'bob')).toBe(bob);
    const busy = new AbortController();
    const calls = ['bob', 'carol'].map((principal) => upstream.callTool('hang', {}, { signal: busy.signal, timeoutMs: 600_000, principal }));
    const refused = await upstream.callTool('hello', {}, { signal: new AbortController().signal, timeoutMs: 10_000, principal: 'dave' }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(BrokerError);
    expect((refused as BrokerError).code).toBe('upstream_error');
    expect((refused as BrokerError).message).toContain('isolationMaxPrincipals');
    expect(upstream.principals.sort()).toEqual(['bob', 'carol']);
    busy.abort();
    await Promise.allSettled(calls);
  });

  it("a principal's crashed connection fails its calls and restarts; other principals' connections and the primary go on", async () => {
    const clock = new ManualClock();
    const upstream = await isolated(clock);
    const primary = await pidOf(upstream);
    const alice = await pidOf(upstream, 'alice');
    const bob = await pidOf(upstream, 'bob');
    const lost = new Promise<void>((resolve) => upstream.connectionOf('alice')!.on('state', (s) => s.state === 'backoff' && resolve()));
    const hanging = upstream.callTool('hang', {}, { signal: new AbortController().signal, timeoutMs: 600_000, principal: 'alice' });
    await upstream.callTool('crash', {}, { signal: new AbortController().signal, timeoutMs: 600_000, principal: 'alice' }).catch(() => undefined);
    await expect(hanging).rejects.toBeDefined();
    await lost;
    const failedFast = await upstream.callTool('hello', {}, { signal: new AbortController().signal, timeoutMs: 10_000, principal: 'alice' }).catch((err: unknown) => err);
    expect(failedFast).toBeInstanceOf(Error);
    expect(await pidOf(upstream, 'bob')).toBe(bob);
    expect(await pidOf(upstream)).toBe(primary);
    expect(upstream.status.state).toBe('ready');
    const ready = new Promise<void>((resolve) => upstream.connectionOf('alice')!.on('state', (s) => s.state === 'ready' && resolve()));
    await clock.advance(1000);
    await ready;
    const restarted = await pidOf(upstream, 'alice');
    expect(restarted).not.toBe(alice);
  });

  it('reconnect ends every principal connection before the primary is dialled again', async () => {
    const upstream = await isolated(new ManualClock());
    const before = await pidOf(upstream, 'alice');
    const alice = upstream.connectionOf('alice')!;
    expect((await upstream.reconnect()).state).toBe('ready');
    expect(alice.status.state).toBe('closed');
    expect(upstream.principals).toEqual([]);
    expect(await pidOf(upstream, 'alice')).not.toBe(before);
  });

  it('close ends every principal connection with the primary', async () => {
    const upstream = await isolated(new ManualClock());
    await pidOf(upstream, 'alice');
    const alice = upstream.connectionOf('alice')!;
    await upstream.close();
    expect(alice.status.state).toBe('closed');
    expect(upstream.principals).toEqual([]);
  });
});

describe('isolation in servers.json', () => {
  it('is refused on an HTTP server, naming the field', () => {
    let err: unknown;
    try {
      parseConfig({ mcpServers: { web: { url: 'http://127.0.0.1:1/mcp', isolation: 'principal' } } }, { env: {} });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems.map((p) => p.path)).toContain('mcpServers.web.isolation');
    expect((err as ConfigError).message).toContain('only stdio servers');
  });
});
