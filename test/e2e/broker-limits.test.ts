/**
 * End to end through the real CLI: budget (config and MCP_BROKER_CALL_BUDGET), breaker (open,
 * half-open, closed), timeout with the cancel received upstream, and read-only retry against a
 * Streamable HTTP upstream that answers 503 twice.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, startBroker, waitFor, type StartedBroker } from './helpers.js';
import { brokerUpstream, callsOf, callTool, fixtureEvents } from './broker-support.js';

const tmp = mkdtempSync(join(tmpdir(), 'mcp-broker-limits-e2e-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('budget', () => {
  const log = join(tmp, 'budget.log');
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({
      servers: { fx: brokerUpstream() },
      extra: { broker: { budgetPerUnit: 1 }, policy: { rules: [{ tools: ['fx__write'], action: 'deny' }] } },
      env: { FIXTURE_LOG: log, MCP_BROKER_CALL_BUDGET: '3' },
    });
  });
  afterAll(() => broker?.close());

  it('MCP_BROKER_CALL_BUDGET overrides broker.budgetPerUnit; refused calls do not spend; past it budget_exhausted', async () => {
    expect((await callTool(broker, 'fx__write')).outcome).toBe('denied');
    const outcomes = [];
    for (let i = 0; i < 4; i++) outcomes.push((await callTool(broker, 'fx__read', { i })).outcome);
    expect(outcomes).toEqual(['ok', 'ok', 'ok', 'budget_exhausted']);
    expect(callsOf(log, 'read')).toBe(3);
    const last = (await broker.records()).at(-1)!;
    expect(last).toMatchObject({ outcome: 'budget_exhausted', status: 429, attempts: 0 });
  });
});

describe('budget defaults (issue 18 §1)', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({ servers: { fx: brokerUpstream() } });
  });
  afterAll(() => broker?.close());

  it('a wall after 200 calls: 300 calls in one default session all run', async () => {
    const outcomes = new Set<string>();
    for (let i = 0; i < 300; i++) outcomes.add((await callTool(broker, 'fx__read', { i })).outcome);
    expect([...outcomes]).toEqual(['ok']);
    expect((await broker.records()).filter((r) => r.outcome === 'ok')).toHaveLength(300);
  });
});

describe('breaker and deadline', () => {
  const log = join(tmp, 'breaker.log');
  const openMs = 1500;
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({
      servers: { fx: brokerUpstream({ tools: { slow: { timeoutMs: 800 } } }) },
      extra: { broker: { breaker: { threshold: 2, openMs } } },
      env: { FIXTURE_LOG: log },
    });
  });
  afterAll(() => broker?.close());

  it('F08: opens after threshold upstream failures, half-opens after openMs, reopens on a failed trial, closes on success', async () => {
    expect((await callTool(broker, 'fx__fail', { fail: true })).outcome).toBe('upstream_error');
    expect((await callTool(broker, 'fx__fail', { fail: true })).outcome).toBe('upstream_error');
    const open = await callTool(broker, 'fx__fail', { fail: false });
    expect(open.outcome).toBe('breaker_open');
    expect(callsOf(log, 'fail')).toBe(2);

    await sleep(openMs + 200);
    expect((await callTool(broker, 'fx__fail', { fail: true })).outcome).toBe('upstream_error'); // the trial
    expect((await callTool(broker, 'fx__fail', { fail: false })).outcome).toBe('breaker_open');
    expect(callsOf(log, 'fail')).toBe(3);

    await sleep(openMs + 200);
    expect((await callTool(broker, 'fx__fail', { fail: false })).outcome).toBe('ok');
    expect((await callTool(broker, 'fx__fail', { fail: false })).outcome).toBe('ok');
    expect(callsOf(log, 'fail')).toBe(5);

    const states = (await broker.records()).filter((r) => r.name === 'fx__fail').map((r) => `${r.outcome}:${r.breaker}`);
    expect(states).toEqual([
      'upstream_error:closed',
      'upstream_error:open',
      'breaker_open:open',
      'upstream_error:open',
      'breaker_open:open',
      'ok:closed',
      'ok:closed',
    ]);
  });

  it('a tool error (isError: true) never opens the breaker', async () => {
    for (let i = 0; i < 3; i++) expect((await callTool(broker, 'fx__leak', { mode: 'error' })).outcome).toBe('tool_error');
    const states = (await broker.records()).filter((r) => r.name === 'fx__leak').map((r) => r.breaker);
    expect(states).toEqual(['closed', 'closed', 'closed']);
  });

  it('F18: at the per-tool deadline the call is timeout and the upstream receives the cancel', async () => {
    const started = Date.now();
    const { outcome, text } = await callTool(broker, 'fx__slow', { ms: 20_000 });
    expect(outcome).toBe('timeout');
    expect(text).toContain('800 ms');
    expect(Date.now() - started).toBeLessThan(10_000);
    await waitFor(() => fixtureEvents(log).some((e) => e.event === 'cancelled' && e.tool === 'slow'), 'the cancel at the upstream');
    const rec = (await broker.records()).at(-1)!;
    expect(rec).toMatchObject({ outcome: 'timeout', status: 504, name: 'fx__slow' });
  });
});

describe('read-only retry against an HTTP upstream that answers 503 twice', () => {
  let server: ChildProcess;
  let port = 0;
  let broker: StartedBroker;
  beforeAll(async () => {
    server = spawn(process.execPath, [fixture('broker-flaky-http.mjs')], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = createInterface({ input: server.stdout! });
    port = await new Promise<number>((resolve, reject) => {
      lines.once('line', (l) => resolve(JSON.parse(l).port));
      server.once('exit', () => reject(new Error('fixture exited')));
    });
    broker = await startBroker({
      servers: { web: { type: 'http', url: `http://127.0.0.1:${port}/mcp` } },
      extra: { broker: { retry: { maxRetries: 2, baseDelayMs: 50 } } },
    });
  });
  afterAll(async () => {
    await broker?.close();
    server?.kill();
  });
  const counts = async () => (await fetch(`http://127.0.0.1:${port}/counts`)).json() as Promise<Record<string, number>>;

  it('a read-only tool is retried twice and answers; a write tool is tried once', async () => {
    const read = await callTool(broker, 'web__read_thing');
    expect(read.outcome).toBe('ok');
    expect(read.text).toContain('after 3 POSTs');
    const write = await callTool(broker, 'web__write_thing');
    expect(write.outcome).toBe('upstream_error');
    expect(write.text).toContain('503');
    expect(await counts()).toEqual({ read_thing: 3, write_thing: 1 });
    const recs = await broker.records();
    expect(recs.find((r) => r.name === 'web__read_thing')).toMatchObject({ outcome: 'ok', attempts: 3 });
    expect(recs.find((r) => r.name === 'web__write_thing')).toMatchObject({ outcome: 'upstream_error', status: 502, attempts: 1 });
  });
});

describe('issue 17 §6: an HTTP upstream that forgets every session at its first call', () => {
  let server: ChildProcess;
  let port = 0;
  let broker: StartedBroker;
  beforeAll(async () => {
    server = spawn(process.execPath, [fixture('forgetful-http.mjs')], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = createInterface({ input: server.stdout! });
    port = await new Promise<number>((resolve, reject) => {
      lines.once('line', (l) => resolve(JSON.parse(l).port));
      server.once('exit', () => reject(new Error('fixture exited')));
    });
    broker = await startBroker({
      servers: { web: { type: 'http', url: `http://127.0.0.1:${port}/mcp` } },
      extra: { broker: { retry: { maxRetries: 2, baseDelayMs: 1 }, breaker: { threshold: 1, openMs: 60_000 }, restart: { initialDelayMs: 3_600_000, maxDelayMs: 3_600_000 } } },
    });
  });
  afterAll(async () => {
    await broker?.close();
    server?.kill();
  });
  const counts = async () => (await fetch(`http://127.0.0.1:${port}/counts`)).json() as Promise<Record<string, number>>;

  it('opens one new session per lost one, and a session lost before answering any call counts: the breaker opens', async () => {
    const read = await callTool(broker, 'web__read_thing');
    expect(read.outcome).toBe('upstream_error');
    expect(read.text).toContain('HTTP 404');
    // Three attempts, each on a session of its own: the first dial's and two renewals'.
    expect(await counts()).toEqual({ initialize: 4, forgotten: 3 });
    expect((await broker.records()).find((r) => r.name === 'web__read_thing')).toMatchObject({ outcome: 'upstream_error', attempts: 3, breaker: 'open' });
    expect((await callTool(broker, 'web__read_thing')).outcome).toBe('breaker_open');
  });
});
