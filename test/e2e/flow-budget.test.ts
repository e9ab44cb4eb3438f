/**
 * Flows and the call budget end to end through the real CLI and the kv fixture: a flow's inverse
 * is never refused `budget_exhausted` (a flow that ran out can still roll back what landed), yet
 * it spends a call like any other, so an inverse is no uncharged call of any tool the caller
 * names. A unit with budget N makes at most N upstream calls, plus the inverses of steps that
 * were charged within it, whatever its flows (nested ones included). Upstream calls are counted
 * where they land: the fixture's own log (`FIXTURE_LOG`), one line per call it answered.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { fixtureEvents } from './broker-support.js';
import { fixture, nodeServer, startBroker, waitFor, type StartedBroker } from './helpers.js';

let broker: StartedBroker | undefined;
let dir: string | undefined;
afterEach(async () => {
  await broker?.close();
  broker = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** A broker over the kv fixture with `budgetPerUnit`; its upstream calls are logged to the returned file. */
async function kv(budgetPerUnit: number): Promise<string> {
  dir = mkdtempSync(join(tmpdir(), 'mcp-broker-flow-budget-'));
  const log = join(dir, 'kv.log');
  broker = await startBroker({ servers: { kv: nodeServer(fixture('kv.mjs'), { env: { FIXTURE_LOG: log } }) }, extra: { broker: { budgetPerUnit } } });
  return log;
}

interface Answer {
  success: boolean;
  flowId: string;
  steps: Array<{ id: string; outcome: string }>;
  rolledBack: Array<{ step: string; tool: string; outcome: string; applied: boolean }>;
}

async function flow(args: Record<string, unknown>): Promise<Answer> {
  const result = (await broker!.client.callTool({ name: 'broker__flow_run', arguments: args })) as CallToolResult;
  return result.structuredContent as unknown as Answer;
}

async function direct(key: string): Promise<string> {
  const r = (await broker!.client.callTool({ name: 'kv__put', arguments: { key, value: 1 } })) as CallToolResult;
  return (r._meta as Record<string, unknown>)['mcp-broker/outcome'] as string;
}

/** A step that writes `key`, whose declared inverse writes another key: a call of the caller's choosing, not an undo. */
const step = (id: string, key: string) => ({ id, tool: 'kv__put', args: { key, value: 1 }, inverse: { tool: 'kv__put', args: { key: `inverse-of-${key}`, value: 1 } } });
/** A step that fails on purpose with nothing sent (a reference that cannot be read: `invalid_arguments`, no budget spent). */
const boom = { id: 'boom', tool: 'kv__put', args: { key: 'never', value: '${steps.nope.result}' } };

/** Calls the kv upstream answered. */
const upstreamCalls = (log: string) => fixtureEvents(log).filter((e) => e.event === 'call').length;

describe('flow inverses and the budget', () => {
  it('a failing flow buys no uncharged calls: its inverses spend, so the same flow run again is refused budget_exhausted', async () => {
    const log = await kv(6);
    // Each run: the flow call and two steps charged, a step that fails on purpose, two inverses.
    const plan = (tag: string) => ({ steps: [step('a', `${tag}-a`), step('b', `${tag}-b`), boom], rollback_on_failure: true });
    const first = await flow(plan('one'));
    expect(first.steps.map((s) => [s.id, s.outcome])).toEqual([['a', 'ok'], ['b', 'ok'], ['boom', 'invalid_arguments']]);
    expect(first.rolledBack.map((r) => [r.step, r.outcome, r.applied])).toEqual([['b', 'ok', true], ['a', 'ok', true]]);
    // 5 of 6 spent (the flow, a, b, and both inverses): the second run's flow call takes the last.
    const second = await flow(plan('two'));
    expect(second.steps.map((s) => [s.id, s.outcome])).toEqual([['a', 'budget_exhausted']]);
    expect(second.rolledBack).toEqual([]);
    expect(await direct('after')).toBe('budget_exhausted');
    // Upstream calls: a, b and their two inverses, within the budget of 6 (without the charge: 8, and still not exhausted).
    expect(upstreamCalls(log)).toBe(4);
    const records = await broker!.records();
    expect(records.filter((r) => r.name !== 'broker__flow_run' && r.outcome === 'ok')).toHaveLength(4);
  });

  it('after a rollback the unit has that much less left', async () => {
    await kv(5);
    const rolled = await flow({ steps: [step('a', 'a'), boom], rollback_on_failure: true });
    expect(rolled.rolledBack.map((r) => [r.step, r.outcome])).toEqual([['a', 'ok']]);
    // Spent 3 (the flow, a, a's inverse): 2 left.
    expect([await direct('x'), await direct('y'), await direct('z')]).toEqual(['ok', 'ok', 'budget_exhausted']);
  });

  it('a rollback past the limit still runs in full, and leaves the unit exhausted', async () => {
    const log = await kv(4);
    const answer = await flow({ steps: [step('a', 'a'), step('b', 'b'), step('c', 'c'), step('d', 'd')], rollback_on_failure: true });
    // The flow, a, b and c spend the 4; d is refused; the three inverses run past the limit all the same.
    expect(answer.steps.map((s) => [s.id, s.outcome])).toEqual([['a', 'ok'], ['b', 'ok'], ['c', 'ok'], ['d', 'budget_exhausted']]);
    expect(answer.rolledBack.map((r) => [r.step, r.outcome, r.applied])).toEqual([['c', 'ok', true], ['b', 'ok', true], ['a', 'ok', true]]);
    expect(await direct('after')).toBe('budget_exhausted');
    // N (4: the flow and 3 steps, 3 of them upstream) plus the inverses of the 3 steps charged within it.
    expect(upstreamCalls(log)).toBe(6);
    // Warned once, at d's refusal: the inverses past the limit after it do not warn again.
    const exhausted = () => broker!.stderr().split('\n').filter((l) => l.includes('"event":"budget_exhausted"'));
    expect(await waitFor(() => exhausted()[0], 'the budget_exhausted warning')).not.toContain('ran past it');
    expect(exhausted()).toHaveLength(1);
  });

  it('an inverse that runs past the limit logs the one-time budget_exhausted warning, and the records show it ran', async () => {
    await kv(4);
    // The flow, a, b and a step that fails once sent (a key that cannot be removed: tool_error) spend
    // the 4, no call refused; b's inverse takes the unit past its limit.
    const sticky = { id: 'sticky', tool: 'kv__delete', args: { key: 'sticky' } };
    const answer = await flow({ steps: [step('a', 'a'), step('b', 'b'), sticky], rollback_on_failure: true });
    expect(answer.steps.map((s) => [s.id, s.outcome])).toEqual([['a', 'ok'], ['b', 'ok'], ['sticky', 'tool_error']]);
    expect(answer.rolledBack.map((r) => [r.step, r.outcome])).toEqual([['b', 'ok'], ['a', 'ok']]);
    const exhausted = () => broker!.stderr().split('\n').filter((l) => l.includes('budget_exhausted'));
    const line = await waitFor(() => exhausted()[0], 'the budget_exhausted warning');
    expect(line).toMatch(/has spent its budget of 4 calls: a flow's inverse ran past it \(a rollback is never refused\)/);
    expect(JSON.parse(line)).toMatchObject({ event: 'budget_exhausted', used: 5, limit: 4 });
    const inverses = (await broker!.records()).filter((r) => (r.flow as { phase?: string } | undefined)?.phase === 'rollback');
    expect(inverses.map((r) => [r.name, r.outcome, r.attempts])).toEqual([['kv__put', 'ok', 1], ['kv__put', 'ok', 1]]);
    // The refusal that follows is not warned of again.
    expect(await direct('after')).toBe('budget_exhausted');
    await waitFor(async () => (await broker!.records()).some((r) => r.outcome === 'budget_exhausted'), "the refusal's record");
    expect(exhausted()).toHaveLength(1);
  });

  it('a nested flow as an inverse is charged, and its own steps are refused past the limit (only their inverses still run)', async () => {
    const log = await kv(4);
    // a's inverse is a flow: its steps are steps, refused once the unit is exhausted; its own rollback runs.
    const inner = { tool: 'broker__flow_run', args: { steps: [step('x1', 'x1'), step('x2', 'x2'), step('x3', 'x3')], rollback_on_failure: true } };
    const answer = await flow({ steps: [{ ...step('a', 'a'), inverse: inner }, boom], rollback_on_failure: true });
    expect(answer.rolledBack.map((r) => [r.step, r.tool, r.outcome, r.applied])).toEqual([['a', 'broker__flow_run', 'tool_error', false]]);
    const records = await broker!.records();
    const inverseFlow = records.find((r) => r.name === 'broker__flow_run' && (r.flow as { phase?: string } | undefined)?.phase === 'rollback')!;
    const innerSteps = records.filter((r) => (r.flow as { id?: string } | undefined)?.id === inverseFlow.callId);
    // Spent: the flow, a, the inverse flow, x1 (4); x2 is refused; x1's inverse runs past the limit.
    expect(innerSteps.map((r) => [r.args && (r.args as { key?: string }).key, r.outcome, (r.flow as { phase?: string }).phase ?? 'step'])).toEqual([
      ['x1', 'ok', 'step'],
      ['x2', 'budget_exhausted', 'step'],
      ['inverse-of-x1', 'ok', 'rollback'],
    ]);
    // Upstream: a, x1 and x1's inverse (without the charge: a, x1, x2 and both their inverses, 5 of 4).
    expect(upstreamCalls(log)).toBe(3);
    expect(await direct('after')).toBe('budget_exhausted');
  });

  it('an inverse refused before it is sent neither takes a unit nor gives one back', async () => {
    const log = await kv(5);
    // A step whose inverse cannot be sent (its reference cannot be read: `invalid_arguments`, nothing sent).
    const unsendable = (id: string) => ({ id, tool: 'kv__put', args: { key: id, value: 1 }, inverse: { tool: 'kv__put', args: { key: '${steps.nope.result}' } } });
    const under = await flow({ steps: [unsendable('a'), boom], rollback_on_failure: true });
    expect(under.rolledBack.map((r) => [r.step, r.outcome])).toEqual([['a', 'invalid_arguments']]);
    // Spent 2 (the flow, a), so exactly 3 are left: the flow, b and c take them and d is refused.
    const over = await flow({ steps: [unsendable('b'), unsendable('c'), unsendable('d')], rollback_on_failure: true });
    expect(over.steps.map((s) => [s.id, s.outcome])).toEqual([['b', 'ok'], ['c', 'ok'], ['d', 'budget_exhausted']]);
    // Past the limit, the two unsendable inverses give back nothing they did not take: the unit stays exhausted.
    expect(over.rolledBack.map((r) => [r.step, r.outcome])).toEqual([['c', 'invalid_arguments'], ['b', 'invalid_arguments']]);
    expect(await direct('after')).toBe('budget_exhausted');
    expect(upstreamCalls(log)).toBe(3);
  });
});
