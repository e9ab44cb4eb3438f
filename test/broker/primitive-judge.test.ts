import { ProtocolError, SdkError, SdkErrorCode } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import type { RecordSink } from '../../src/audit/records.js';
import { compilePolicy } from '../../src/broker/policy.js';
import { ShuttingDown } from '../../src/broker/deadline.js';
import { ApprovalStates } from '../../src/broker/approval-state.js';
import { HeldStates } from '../../src/broker/held-state.js';
import { relayInputRequired } from '../../src/broker/relay-input.js';
import { SealedStates } from '../../src/broker/sealed-state.js';
import { POLICY_REFUSED_CODE, PrimitiveGuard, type PrimitiveGuardDeps, type PrimitiveRequest } from '../../src/broker/primitive-judge.js';
import type { CallRecord } from '../../src/broker/types.js';
import { shownRecord } from '../../src/broker/record.js';
import { REDACTED, Scrubber } from '../../src/shared/scrub.js';
import { policySchema } from '../../src/config/schema.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { SqliteStore } from '../../src/store/index.js';
import { session } from './support.js';

/** A records sink that keeps lines in memory, or fails every append. */
function sink(fails = false): RecordSink & { lines: CallRecord[] } {
  const lines: CallRecord[] = [];
  return {
    lines,
    append: async (r) => {
      if (fails) throw new Error('EISDIR: illegal operation on a directory');
      lines.push(r as CallRecord);
    },
    close: async () => undefined,
  };
}

function guardDeps(records: RecordSink, policy: unknown = {}, published: CallRecord[] = []): PrimitiveGuardDeps {
  return {
    policy: compilePolicy(policySchema.parse(policy)),
    prefixOf: (server) => (server === 'evil' || server === 'good' ? server : undefined),
    records,
    publisher: { publish: (r: CallRecord) => published.push(r) } as never,
    clock: new ManualClock(),
    logger: silentLogger(),
    scrubArgs: (a) => a,
    scrubText: (t) => t,
    askTimeoutMs: 1000,
  };
}

function guard(policy: unknown = {}, records = sink()) {
  const published: CallRecord[] = [];
  const g = new PrimitiveGuard(guardDeps(records, policy, published));
  return { g, records, published };
}

const read = (over: Partial<PrimitiveRequest> = {}): PrimitiveRequest => ({
  kind: 'resource',
  server: 'evil',
  type: 'resource',
  name: 'evil://doc',
  ownName: 'evil://doc',
  args: {},
  signal: new AbortController().signal,
  ...over,
});

const rejection = (p: Promise<unknown>) => p.then(() => { throw new Error('expected a rejection'); }, (e: ProtocolError) => e);

describe('PrimitiveGuard (primitive-judge.ts)', () => {
  it('an allowed read is forwarded, then recorded and published with its kind', async () => {
    const { g, records, published } = guard();
    const answer = await g.serve(read(), session({ principal: 'alice' }), async () => ({ contents: [{ uri: 'evil://doc', text: 'x' }] }));
    expect(answer).toEqual({ contents: [{ uri: 'evil://doc', text: 'x' }] });
    expect(records.lines).toHaveLength(1);
    expect(records.lines[0]).toMatchObject({ kind: 'resource', subject: 'evil/evil://doc', name: 'evil://doc', outcome: 'ok', status: 200, attempts: 1, principal: 'alice' });
    expect(records.lines[0]!.bytesOut).toBeGreaterThan(0);
    expect(published).toEqual(records.lines);
  });

  it('a denied read never runs forward, is recorded denied and answered JSON-RPC -32003 naming the outcome', async () => {
    const { g, records } = guard({ rules: [{ tools: ['evil__*'], principals: ['bob'], action: 'deny' }] });
    let forwarded = 0;
    const err = await rejection(g.serve(read(), session({ principal: 'bob' }), async () => ++forwarded));
    expect(forwarded).toBe(0);
    expect(err).toBeInstanceOf(ProtocolError);
    expect(err.code).toBe(POLICY_REFUSED_CODE);
    expect(err.message).toContain('denied: policy.rules[0]');
    expect(err.message).not.toContain('evil://doc');
    const data = err.data as Record<string, string>;
    expect(data['mcp-broker/outcome']).toBe('denied');
    expect(records.lines[0]).toMatchObject({ callId: data['mcp-broker/callId'], outcome: 'denied', status: 403, attempts: 0, kind: 'resource' });
  });

  it('a read whose record cannot be written is refused guard_error (-32603) and its answer withheld', async () => {
    const { g, published } = guard({}, sink(true));
    const err = await rejection(g.serve(read(), session(), async () => ({ contents: [{ uri: 'evil://doc', text: 'secret' }] })));
    expect(err.code).toBe(-32603);
    expect((err.data as Record<string, string>)['mcp-broker/outcome']).toBe('guard_error');
    expect(err.message).not.toContain('secret');
    expect(published).toEqual([]);
  });

  it('a refused request whose record cannot be written keeps its refusal', async () => {
    const { g } = guard({ default: 'deny' }, sink(true));
    const err = await rejection(g.serve(read(), session(), async () => 'never'));
    expect(err.code).toBe(POLICY_REFUSED_CODE);
    expect((err.data as Record<string, string>)['mcp-broker/outcome']).toBe('denied');
  });

  it('ask without elicitation is approval_required at once; with it, accept serves and decline refuses', async () => {
    const policy = { rules: [{ prompts: ['evil__greet'], action: 'ask' }] };
    const greet = read({ kind: 'prompt', type: 'prompt', name: 'evil__greet', ownName: 'greet', args: { who: 'ada' } });
    let forwarded = 0;
    const forward = async () => ({ messages: [], n: ++forwarded });

    const plain = guard(policy);
    const err = await rejection(plain.g.serve(greet, session(), forward));
    expect(err.code).toBe(POLICY_REFUSED_CODE);
    expect((err.data as Record<string, string>)['mcp-broker/outcome']).toBe('approval_required');
    expect(forwarded).toBe(0);

    const asked: string[] = [];
    const answers = ['accept', 'decline'] as const;
    let i = 0;
    const elicit = async (params: { message: string }) => (asked.push(params.message), { action: answers[i++]! });
    const withElicit = guard(policy);
    const caller = session({ elicit: elicit as never });
    expect(await withElicit.g.serve(greet, caller, forward)).toMatchObject({ n: 1 });
    const declined = await rejection(withElicit.g.serve(greet, caller, forward));
    expect((declined.data as Record<string, string>)['mcp-broker/outcome']).toBe('approval_required');
    expect(forwarded).toBe(1);
    expect(asked[0]).toContain('"evil__greet" (evil/greet)');
    expect(asked[0]).not.toContain('ada');
    expect(withElicit.records.lines.map((r) => [r.kind, r.outcome])).toEqual([
      ['prompt', 'ok'],
      ['prompt', 'approval_required'],
    ]);
  });

  it("an asked request of a modern caller answering its upstream's input requests: a refused relay or held state is invalid_arguments -32602, never asked; a held state of the request approved at its first round goes on, one allowed outright then is approval_required; a relay state's approval serves once", async () => {
    const clock = new ManualClock();
    const store = SqliteStore.open(':memory:');
    const sealed = new SealedStates({ store, clock });
    const records = sink();
    const g = new PrimitiveGuard({
      ...guardDeps(records, { rules: [{ prompts: ['evil__greet'], action: 'ask' }] }),
      clock,
      approvalStates: new ApprovalStates({ store, clock, ttlMs: 5000, sealed }),
    });
    const greet = read({ kind: 'prompt', type: 'prompt', name: 'evil__greet', ownName: 'greet', args: { who: 'ada' } });
    let forwarded = 0;
    const forward = async () => ({ messages: [], n: ++forwarded });
    const asked: string[] = [];
    const retry = (requestState: string, over: Partial<PrimitiveRequest> = {}) =>
      g.serve({ ...greet, ...over }, session({ era: 'modern', requestState, inputResponses: { answer: {} }, elicit: (async (p: { message: string }) => (asked.push(p.message), { action: 'accept' })) as never }), forward);
    const relayed = await relayInputRequired(sealed, { inputRequests: {} }, { principal: 'local', server: 'evil', method: 'prompts/get', target: 'greet', args: { who: 'ada' } }, { callId: 'c-0', ttlMs: 5000, approved: true });
    const relay = relayed.requestState!;
    // The held state of a request approved at its first round; one of a request allowed outright then (the policy asks since a reload).
    const held = await new HeldStates(sealed).issue({ principal: 'local', tool: 'prompts/get:evil/greet', args: { who: 'ada' } }, 'h-1', 1, clock.now() + 5000, true);
    const unapproved = await new HeldStates(sealed).issue({ principal: 'local', tool: 'prompts/get:evil/greet', args: { who: 'ada' } }, 'h-2', 1, clock.now() + 5000);
    for (const [state, over, why] of [
      [`${relay.slice(0, -4)}AAAA`, {}, 'does not verify'],
      [relay, { args: { who: 'bob' } }, 'made for another call'],
      [`${held.slice(0, -4)}AAAA`, {}, 'does not verify'],
      [held, { args: { who: 'bob' } }, 'arguments differ'],
    ] as const) {
      const err = await rejection(retry(state, over));
      expect(err.code).toBe(-32602);
      expect(err.message).toContain(why);
      expect((err.data as Record<string, string>)['mcp-broker/outcome']).toBe('invalid_arguments');
    }
    expect(forwarded).toBe(0);
    // The held request's retry joins it: not asked; the relay state's approval serves once.
    expect(await retry(held)).toMatchObject({ n: 1 });
    const notApproved = await rejection(retry(unapproved));
    expect(notApproved.code).toBe(POLICY_REFUSED_CODE);
    expect(notApproved.message).toContain('not approved when it started');
    expect(await retry(relay)).toMatchObject({ n: 2 });
    const replay = await rejection(retry(relay));
    expect(replay.code).toBe(POLICY_REFUSED_CODE);
    expect(replay.message).toContain('used already');
    expect(asked).toEqual([]);
    expect(records.lines.map((r) => [r.outcome, r.attempts])).toEqual([
      ...Array(4).fill(['invalid_arguments', 0]),
      ['ok', 1],
      ['approval_required', 0],
      ['ok', 1],
      ['approval_required', 0],
    ]);
    store.close();
  });

  it('a request whose judgement fails (the store behind its states closed) is refused guard_error -32603 and recorded', async () => {
    const clock = new ManualClock();
    const store = SqliteStore.open(':memory:');
    const sealed = new SealedStates({ store, clock });
    const records = sink();
    const g = new PrimitiveGuard({
      ...guardDeps(records, { rules: [{ prompts: ['evil__greet'], action: 'ask' }] }),
      clock,
      approvalStates: new ApprovalStates({ store, clock, ttlMs: 5000, sealed }),
    });
    const greet = read({ kind: 'prompt', type: 'prompt', name: 'evil__greet', ownName: 'greet', args: { who: 'ada' } });
    const relayed = await relayInputRequired(sealed, { inputRequests: {} }, { principal: 'local', server: 'evil', method: 'prompts/get', target: 'greet', args: { who: 'ada' } }, { callId: 'c-0', ttlMs: 5000, approved: true });
    store.close();
    let forwarded = 0;
    const err = await rejection(g.serve(greet, session({ era: 'modern', requestState: relayed.requestState!, inputResponses: { answer: {} } }), async () => ++forwarded));
    expect(forwarded).toBe(0);
    expect(err).toBeInstanceOf(ProtocolError);
    expect(err.code).toBe(-32603);
    expect((err.data as Record<string, string>)['mcp-broker/outcome']).toBe('guard_error');
    expect(records.lines.map((r) => [r.outcome, r.attempts])).toEqual([['guard_error', 0]]);
    expect(records.lines[0]!.reason).toMatch(/^judge failed: /);
  });

  it("an upstream's own error passes on as it came and is recorded by its outcome", async () => {
    const { g, records } = guard();
    const upstream = new ProtocolError(-32002, 'Resource not found');
    expect(await rejection(g.serve(read(), session(), async () => Promise.reject(upstream)))).toBe(upstream);
    const timeout = new ProtocolError(-32001, 'Request timed out');
    expect(await rejection(g.serve(read(), session(), async () => Promise.reject(timeout)))).toBe(timeout);
    const sdkTimeout = new SdkError(SdkErrorCode.RequestTimeout, 'Request timed out');
    expect(await rejection(g.serve(read(), session(), async () => Promise.reject(sdkTimeout)))).toBe(sdkTimeout);
    const invalid = new ProtocolError(-32602, 'bad uri');
    expect(await rejection(g.serve(read(), session(), async () => Promise.reject(invalid)))).toBe(invalid);
    expect(records.lines.map((r) => r.outcome)).toEqual(['upstream_error', 'timeout', 'timeout', 'invalid_arguments']);
  });

  it('a read held for shutdown and cut off by it is recorded cancelled with the shutdown as its reason, then refused -32603 naming the outcome', async () => {
    const records = sink();
    const held: Array<(reason: unknown) => void> = [];
    const g = new PrimitiveGuard({ ...guardDeps(records), hold: (_running, abort) => void held.push(abort) });
    const answer = rejection(g.serve(read(), session(), () => new Promise(() => undefined)));
    await Promise.resolve();
    expect(held).toHaveLength(1);
    held[0]!(new ShuttingDown('stdin closed and broker.drainTimeoutMs (500 ms) passed before the call finished'));
    const err = await answer;
    expect(err.code).toBe(-32603);
    expect(err.message).toBe('cancelled: stdin closed and broker.drainTimeoutMs (500 ms) passed before the call finished');
    expect(err.data).toMatchObject({ 'mcp-broker/outcome': 'cancelled', 'mcp-broker/callId': records.lines[0]!.callId });
    expect(records.lines).toHaveLength(1);
    expect(records.lines[0]).toMatchObject({ outcome: 'cancelled', status: 499, attempts: 1, reason: 'stdin closed and broker.drainTimeoutMs (500 ms) passed before the call finished' });
  });

  it('lists: visible unless the action for the principal is deny', () => {
    const { g } = guard({ rules: [{ tools: ['evil__*'], principals: ['bob'], action: 'deny' }, { resources: ['good://secret'], action: 'deny' }] });
    expect(g.visible('bob', { server: 'evil', type: 'prompt', name: 'evil__greet' })).toBe(false);
    expect(g.visible('alice', { server: 'evil', type: 'prompt', name: 'evil__greet' })).toBe(true);
    expect(g.visible('alice', { server: 'good', type: 'resource', name: 'good://secret' })).toBe(false);
    expect(g.visible('alice', { server: 'good', type: 'resource', name: 'good://doc' })).toBe(true);
    expect(g.visible('alice', { server: 'unknown', type: 'resource', name: 'x://y' })).toBe(false);
  });
});

describe('PrimitiveGuard and a secret added while its record is written', () => {
  it('publishes the record as shown (scrubbed again) and writes it as built (regression: published as built)', async () => {
    const later = `later-${'5d1b'.repeat(4)}`;
    const scrubber = new Scrubber();
    const written: CallRecord[] = [];
    // The append is where a reload can come between building the record and publishing it.
    const records: RecordSink = {
      append: async (r) => {
        written.push(structuredClone(r as CallRecord));
        scrubber.addSecrets([later]);
      },
      close: async () => undefined,
    };
    const published: CallRecord[] = [];
    const g = new PrimitiveGuard({
      ...guardDeps(records, {}, published),
      scrubArgs: (a) => scrubber.value(a),
      scrubText: (t) => scrubber.text(t),
      shown: { generation: () => scrubber.generation, record: (r) => shownRecord(scrubber, r) },
    });
    await g.serve(read({ name: `evil://${later}`, ownName: `evil://${later}` }), session({ principal: 'alice' }), async () => ({ contents: [] }));
    expect(written[0]!.name).toContain(later);
    expect(published).toHaveLength(1);
    expect(published[0]!.name).toBe(`evil://${REDACTED}`);
  });
});
