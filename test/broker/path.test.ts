/** The whole call path, composed in the seed's order from the real stages, with an in-process dispatcher. */
import type { CallToolResult } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { RecordPublisher } from '../../src/audit/publisher.js';
import type { RecordSink } from '../../src/audit/records.js';
import { Broker } from '../../src/broker/broker.js';
import { Breakers, breakerStage } from '../../src/broker/breaker.js';
import { BudgetLedger, budgetStage } from '../../src/broker/budget.js';
import { deadlineStage } from '../../src/broker/deadline.js';
import { evaluateStage } from '../../src/broker/evaluate.js';
import { invokeStage } from '../../src/broker/invoke.js';
import { judgeStage } from '../../src/broker/judge.js';
import { orderStages } from '../../src/broker/path.js';
import { compilePolicy } from '../../src/broker/policy.js';
import { publishStage } from '../../src/broker/publish.js';
import { recordStage } from '../../src/broker/record.js';
import { retryStage } from '../../src/broker/retry.js';
import { scrubStage } from '../../src/broker/scrub.js';
import type { BrokerCall, CallerSession, CallRecord, ToolTarget } from '../../src/broker/types.js';
import { policySchema } from '../../src/config/schema.js';
import { BrokerError } from '../../src/shared/errors.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { Scrubber } from '../../src/shared/scrub.js';
import { SqliteStore } from '../../src/store/index.js';
import { session, target, text } from './support.js';

const SECRET = 'canary-upstream-5e6f';

function build(options: { policy?: unknown; budget?: number; budgetWindowMs?: number; caller?: CallerSession; answer: (call: BrokerCall) => Promise<CallToolResult> }) {
  const clock = new ManualClock();
  const scrubber = new Scrubber([SECRET]);
  const written: CallRecord[] = [];
  const records: RecordSink = { append: async (r) => void written.push(r as CallRecord), close: async () => undefined };
  const publisher = new RecordPublisher<CallRecord>();
  const published: CallRecord[] = [];
  publisher.subscribe((r) => void published.push(r));
  const policyConfig = policySchema.parse(options.policy ?? {});
  const ledger = new BudgetLedger();
  const breakers = new Breakers({ clock, threshold: 2, openMs: 1000 });
  const dispatched: string[] = [];
  /** Backoffs the retry stage waited, in ms. */
  const sleeps: number[] = [];
  const store = SqliteStore.open(':memory:');
  const known = new Map<string, ToolTarget>();
  const stages = orderStages({
    publish: publishStage({ publisher }),
    record: recordStage({ records, clock, logger: silentLogger(), scrubArgs: (a) => scrubber.value(a), scrubText: (t) => scrubber.text(t) }),
    evaluate: evaluateStage({ maxBytes: policyConfig.output.maxBytes, deny: policyConfig.output.deny }),
    scrub: scrubStage({ scrubber }),
    judge: judgeStage({
      // The registry: what callTool was handed (the judge resolves again after an approval).
      resolve: (name) => known.get(name),
      isReadOnly: (t) => t.definition?.annotations?.readOnlyHint === true,
      policy: compilePolicy(policyConfig),
      store,
      clock,
      askTimeoutMs: 1000,
      scrubArgs: (a) => scrubber.value(a),
    }),
    budget: budgetStage({ limitFor: () => options.budget ?? 100, ledger, windowMs: options.budgetWindowMs, now: () => clock.now() }),
    breaker: breakerStage(breakers),
    deadline: deadlineStage({ clock, timeoutFor: () => 10_000, extendOnProgress: false, maxTotalTimeoutMs: 60_000 }),
    retry: retryStage({ now: () => clock.now(), sleep: async (ms) => void sleeps.push(ms), maxRetries: 2, baseDelayMs: 0 }),
    invoke: invokeStage({
      router: {
        dispatch: async (c) => {
          dispatched.push(c.target!.name);
          return options.answer(c);
        },
      },
    }),
  });
  const broker = new Broker(stages, clock);
  const callTool = (t: ToolTarget, args: Record<string, unknown> = {}, caller = options.caller ?? session()) =>
    known.set(t.name, t) && broker.call({ name: t.name, args, signal: new AbortController().signal }, caller, t);
  return { callTool, written, published, dispatched, sleeps, ledger, breakers, store, clock };
}

const read = target('fx__read', { tool: { annotations: { readOnlyHint: true } } });
const write = target('fx__write');

describe('the call path in seed order', () => {
  it('deny never reaches the upstream, is recorded and published, and spends no budget', async () => {
    const p = build({ policy: { rules: [{ tools: ['fx__write'], action: 'deny' }] }, answer: async () => text('ok') });
    const answer = await p.callTool(write);
    expect(answer).toMatchObject({ outcome: 'denied', status: 403 });
    expect(answer.result.isError).toBe(true);
    expect(p.dispatched).toEqual([]);
    expect(p.written).toHaveLength(1);
    expect(p.published).toEqual(p.written);
    expect(p.ledger.used('s-1')).toBe(0);
  });

  it("an upstream result whose _meta is null is answered with the broker's _meta, not a failure", async () => {
    const p = build({ answer: async () => ({ content: [{ type: 'text', text: 'ok' }], _meta: null }) as unknown as CallToolResult });
    const answer = await p.callTool(read);
    expect(answer.outcome).toBe('ok');
    expect(answer.result.content).toEqual([{ type: 'text', text: 'ok' }]);
    expect(answer.result._meta).toMatchObject({ 'mcp-broker/outcome': 'ok', 'mcp-broker/callId': answer.callId });
    expect(p.written).toHaveLength(1);
  });

  it('scrub runs before evaluate, record and publish: no secret in the answer, the record or the published record', async () => {
    const p = build({ policy: { output: { deny: [SECRET] } }, answer: async () => text(`value ${SECRET}`, { structuredContent: { v: SECRET } }) });
    const answer = await p.callTool(read, { q: SECRET });
    expect(answer.outcome).toBe('ok'); // evaluate saw the scrubbed text, so the deny pattern did not match
    expect(JSON.stringify(answer.result)).not.toContain(SECRET);
    expect(JSON.stringify(p.written)).not.toContain(SECRET);
    expect(JSON.stringify(p.published)).not.toContain(SECRET);
  });

  it('retries of a read tool are one call for the budget and one failure for the breaker', async () => {
    const p = build({
      answer: async () => {
        throw new BrokerError('transport_error', 'HTTP 503', { data: { httpStatus: 503 } });
      },
    });
    const first = await p.callTool(read);
    expect(first.outcome).toBe('upstream_error');
    expect(first.record?.attempts).toBe(3);
    expect(first.record?.breaker).toBe('closed');
    expect(p.ledger.used('s-1')).toBe(1);
    const second = await p.callTool(read);
    expect(second.record?.breaker).toBe('open');
    const third = await p.callTool(read);
    expect(third.outcome).toBe('breaker_open');
    expect(p.dispatched).toHaveLength(6);
    expect(p.ledger.used('s-1')).toBe(2); // the breaker's refusal gave its budget back
  });

  it('a call refused unsent after its sessionless unit renewed gives nothing back to the new window (regression: its refund took a call off the new window, one call over the budget)', async () => {
    let unsent!: () => void;
    const held = new Promise<void>((r) => (unsent = r));
    let dispatched!: () => void;
    const inFlight = new Promise<void>((r) => (dispatched = r));
    const api = session({ sessionId: 'api-1', principal: 'alice', unit: 'api:alice', sessionless: true });
    const p = build({
      budget: 2,
      budgetWindowMs: 5_000,
      caller: api,
      answer: async (c) => {
        if ((c.request.args as { hold?: boolean }).hold !== true) return text('ok');
        dispatched();
        await held;
        throw new BrokerError('upstream_unavailable', 'upstream "fx" is not connected (reconnecting)');
      },
    });
    // Charged to the first window, and still in flight (nothing sent yet) when that window ends.
    const slow = p.callTool(write, { hold: true });
    await inFlight;
    expect(p.ledger.used('api:alice')).toBe(1);
    await p.clock.advance(5_000);
    expect((await p.callTool(write)).outcome).toBe('ok'); // the second window's first call
    unsent();
    const refused = await slow;
    expect(refused).toMatchObject({ outcome: 'upstream_error', attempts: 0 });
    expect(p.ledger.used('api:alice')).toBe(1);
    const outcomes = [(await p.callTool(write)).outcome, (await p.callTool(write)).outcome];
    expect(outcomes).toEqual(['ok', 'budget_exhausted']);
  });

  it('issue 17 §6: a lost upstream session (HTTP 404) is no breaker failure; a read is retried on the new session, a write is not', async () => {
    const lost = () => new BrokerError('session_lost', 'upstream "fx" no longer knows our session (HTTP 404); a new session is open; the request was not processed', { data: { httpStatus: 404 } });
    const p = build({
      answer: async (c) => {
        if (c.target!.name === 'fx__write' || c.attempts === 1) throw lost();
        return text('ok');
      },
    });
    // Threshold 2: three lost sessions in a row would open the breaker if they counted.
    for (let i = 0; i < 3; i++) {
      const answer = await p.callTool(write);
      expect(answer.outcome).toBe('upstream_error');
      expect(answer.record).toMatchObject({ attempts: 1, breaker: 'closed' });
      expect(answer.reason).toMatch(/not processed; not retried: the tool is not read-only$/);
    }
    const answer = await p.callTool(read);
    expect(answer.outcome).toBe('ok');
    expect(answer.record).toMatchObject({ attempts: 2, breaker: 'closed' });
    expect(p.sleeps).toEqual([0]); // the new session is open already: no backoff
  });

  it('issue 17 §6: a session lost again before it answered any call (upstream_session_lost) counts against the breaker', async () => {
    const p = build({
      answer: async () => {
        throw new BrokerError('upstream_session_lost', 'upstream "fx" no longer knows our session again before answering any call (HTTP 404)', { data: { httpStatus: 404 } });
      },
    });
    expect((await p.callTool(write)).record?.breaker).toBe('closed');
    expect((await p.callTool(write)).record?.breaker).toBe('open');
  });

  it('a write tool is tried once', async () => {
    const p = build({
      answer: async () => {
        throw new BrokerError('transport_error', 'HTTP 503', { data: { httpStatus: 503 } });
      },
    });
    const answer = await p.callTool(write);
    expect(answer.record?.attempts).toBe(1);
  });

  it('tool_error passes the body intact with the outcome in _meta', async () => {
    const verdict = { success: false, error: 'locked', items: [1] };
    const body = text(JSON.stringify(verdict), { structuredContent: verdict });
    const p = build({ answer: async () => body });
    const answer = await p.callTool(write);
    expect(answer.outcome).toBe('tool_error');
    expect(answer.result.content).toEqual(body.content);
    expect(answer.result.structuredContent).toEqual(verdict);
    expect(answer.result._meta?.['mcp-broker/outcome']).toBe('tool_error');
  });

  it('a result over policy.output.maxBytes is withheld', async () => {
    const p = build({ answer: async () => text('ok'), policy: { output: { maxBytes: 10 } } });
    expect((await p.callTool(write)).outcome).toBe('withheld');
  });

  it('a guard that throws (the store is gone) is guard_error: refused, fail closed, still recorded', async () => {
    const p = build({ answer: async () => text('ok') });
    await p.store.close();
    const answer = await p.callTool(write);
    expect(answer).toMatchObject({ outcome: 'guard_error', status: 500 });
    expect(answer.reason).toMatch(/^judge failed/);
    expect(p.dispatched).toEqual([]);
    expect(p.written).toHaveLength(1);
  });

  it('requireApproval: the human is asked before budget and deadline, so a slow "yes" is not a timeout', async () => {
    let clock!: ManualClock;
    let asked!: () => void;
    const prompted = new Promise<void>((resolve) => (asked = resolve));
    const caller = session({ elicit: async () => (asked(), await clock.sleep(15_000), { action: 'accept' as const }) });
    const p = build({ caller, answer: async () => text('ran') });
    clock = p.clock;
    const gated = target('fx__gated', { requireApproval: true });
    const pending = p.callTool(gated);
    await prompted;
    await clock.advance(15_000); // longer than the 10 s deadline of the call
    const answer = await pending;
    expect(answer.outcome).toBe('ok');
    expect(p.dispatched).toEqual(['fx__gated']);
  });

  it('requireApproval: a declined call never reaches the tool, spends no budget and is not a breaker failure', async () => {
    const caller = session({ elicit: async () => ({ action: 'decline' as const }) });
    const p = build({ caller, answer: async () => text('ran') });
    const gated = target('fx__gated', { requireApproval: true });
    for (let i = 0; i < 3; i++) expect((await p.callTool(gated)).outcome).toBe('approval_required');
    expect(p.dispatched).toEqual([]);
    expect(p.ledger.used('s-1')).toBe(0);
    expect(p.written.map((r) => r.attempts)).toEqual([0, 0, 0]);
  });

  it('an approval from a caller that is gone by then runs nothing: cancelled, before budget and deadline', async () => {
    const caller = session({
      elicit: async () => ({ action: 'accept' as const }),
      ping: async () => Promise.reject(new Error('connection closed')),
    });
    const p = build({ caller, answer: async () => text('ran'), policy: { default: 'ask' } });
    for (const t of [target('fx__gated', { requireApproval: true }), target('fx__asked')]) {
      const answer = await p.callTool(t);
      expect(answer.outcome).toBe('cancelled');
      expect(answer.reason).toContain('connection closed before');
    }
    expect(p.dispatched).toEqual([]);
    expect(p.written.map((r) => r.attempts)).toEqual([0, 0]);
    expect(p.ledger.used('s-1')).toBe(0);
  });
});

