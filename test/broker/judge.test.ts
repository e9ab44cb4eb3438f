import { ProtocolError, SdkError, SdkErrorCode } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { ApprovalStates } from '../../src/broker/approval-state.js';
import { judgeStage, type JudgeDeps } from '../../src/broker/judge.js';
import { compilePolicy } from '../../src/broker/policy.js';
import { compose } from '../../src/broker/runner.js';
import { relayInputRequired, relayStage } from '../../src/broker/relay-input.js';
import { urlInputRequired } from '../../src/broker/url-input.js';
import { SealedStates } from '../../src/broker/sealed-state.js';
import type { BrokerCall, CallerSession, ToolTarget } from '../../src/broker/types.js';
import { policySchema } from '../../src/config/schema.js';
import { ManualClock } from '../../src/shared/clock.js';
import { Scrubber } from '../../src/shared/scrub.js';
import { EVERY_PRINCIPAL, SqliteStore } from '../../src/store/index.js';
import { call, fakeInvoke, session, target } from './support.js';

function setup(policy: unknown = {}, over: Partial<JudgeDeps> = {}) {
  const clock = new ManualClock();
  const store = SqliteStore.open(':memory:');
  const scrubber = new Scrubber(['planted-secret-value']);
  const known = new Map<string, ToolTarget>();
  const deps: JudgeDeps = {
    resolve: (name) => known.get(name),
    isReadOnly: (t) => t.definition?.annotations?.readOnlyHint === true,
    policy: compilePolicy(policySchema.parse(policy)),
    store,
    clock,
    askTimeoutMs: 5000,
    scrubArgs: (a) => scrubber.value(a),
    ...over,
  };
  const invoke = fakeInvoke();
  const path = compose([judgeStage(deps), invoke]);
  // The registry knows a target a call was handed (the judge resolves again after an approval).
  const run = (c: BrokerCall) => {
    if (c.target && !known.has(c.target.name)) known.set(c.target.name, c.target);
    return path(c);
  };
  return { clock, store, known, invoke, run, deps };
}

/** A session whose client declared elicitation and answers with `answer`. */
function asking(answer: (params: { message: string }) => Promise<{ action: 'accept' | 'decline' | 'cancel' }>) {
  const asked: string[] = [];
  const s: CallerSession = session({
    elicit: async (params, options) => {
      asked.push((params as { message: string }).message);
      expect(options.timeoutMs).toBe(5000);
      return answer(params as { message: string });
    },
  });
  return { s, asked };
}

describe('judge stage', () => {
  it('unknown, disabled and gone tools are unregistered and never reach invoke', async () => {
    const { run, invoke, known } = setup();
    const c1 = call({ request: { name: 'nope' } });
    await run(c1);
    expect(c1).toMatchObject({ outcome: 'unregistered' });
    known.set('fx__off', target('fx__off', { state: 'disabled' }));
    known.set('fx__old', target('fx__old', { state: 'gone' }));
    for (const name of ['fx__off', 'fx__old']) {
      const c = call({ request: { name } });
      await run(c);
      expect(c.outcome).toBe('unregistered');
    }
    expect(invoke.reached).toBe(0);
  });

  it('issue 18: a tool of an upstream that is not running is upstream_error with the registry\'s reason and never reaches invoke', async () => {
    const { run, invoke, known } = setup();
    const reason = 'upstream "fx" is not running: exited with code 1 before it was ready: Error: Cannot find module \'…/missing-file.js\'';
    known.set('fx__any', target('fx__any', { state: 'down', reason }));
    const c = call({ request: { name: 'fx__any' } });
    await run(c);
    expect(c).toMatchObject({ outcome: 'upstream_error', reason });
    expect(invoke.reached).toBe(0);
  });

  it('with a store that answers at once, an allowed call goes on within the same turn (issue 6)', async () => {
    const { store, deps } = setup({ firstUse: 'ask' });
    await store.markUsed('fx__echo', 'local', '2026-01-01T00:00:00.000Z');
    let reached = false;
    const c = call({ target: target() });
    const running = judgeStage(deps).run(c, async () => {
      reached = true;
    });
    // Over HTTP a turn given up before the upstream write is spent on the SDK's response setup.
    expect(reached).toBe(true);
    await running;
    expect(c.outcome).toBeUndefined();
    // A store that answers with thenables (not only native promises) is still awaited: same
    // verdicts, one turn later.
    const thenable = <T>(value: T) => ({ then: (resolve: (v: T) => unknown) => Promise.resolve(value).then(resolve) });
    const slow = new Proxy(store, {
      get: (t, k) => (['observePin', 'getApproval', 'hasUsed'].includes(String(k)) ? (...a: unknown[]) => thenable((t as any)[k](...a)) : (t as any)[k]),
    });
    let later = false;
    const c2 = call({ target: target() });
    const second = judgeStage({ ...deps, store: slow }).run(c2, async () => {
      later = true;
    });
    expect(later).toBe(false);
    await second;
    expect(later).toBe(true);
    expect(c2.outcome).toBeUndefined();
    // A revoked approval is honoured through the thenable store too.
    await store.setApproval({ tool: 'fx__echo', principal: 'local', decision: 'revoked', at: '2026-01-01T00:00:00.000Z', by: 'test' });
    const c3 = call({ target: target() });
    await compose([judgeStage({ ...deps, store: slow }), fakeInvoke()])(c3);
    expect(c3.outcome).toBe('approval_required');
  });

  it('a store read that rejects, or throws after another read began, fails the call closed', async () => {
    const { store, deps: base } = setup();
    const rejecting = new Proxy(store, {
      get: (t, k) => (k === 'getApproval' ? () => Promise.reject(new Error('disk I/O error')) : (t as any)[k]),
    });
    const c1 = call({ target: target() });
    const invoke = fakeInvoke();
    await compose([judgeStage({ ...base, store: rejecting }), invoke])(c1);
    expect(c1.outcome).toBe('guard_error');
    expect(c1.reason).toContain('disk I/O error');
    const unheard: unknown[] = [];
    const onUnhandled = (reason: unknown) => unheard.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const mixed = new Proxy(store, {
        get: (t, k) =>
          k === 'observePin'
            ? () => Promise.reject(new Error('pin read failed'))
            : k === 'getApproval'
              ? () => {
                  throw new Error('approval read failed');
                }
              : (t as any)[k],
      });
      const c2 = call({ target: target() });
      await compose([judgeStage({ ...base, store: mixed }), invoke])(c2);
      expect(c2.outcome).toBe('guard_error');
      expect(c2.reason).toContain('approval read failed');
      await new Promise((r) => setImmediate(r));
      expect(unheard).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    expect(invoke.reached).toBe(0);
  });

  it('deny never reaches invoke', async () => {
    const { run, invoke } = setup({ rules: [{ tools: ['fx__*'], action: 'deny' }] });
    const c = call({ target: target() });
    await run(c);
    expect(c.outcome).toBe('denied');
    expect(c.reason).toContain('policy.rules[0]');
    expect(invoke.reached).toBe(0);
  });

  it('pins a tool on first sight; a changed definition is unregistered "changed" until re-pinned', async () => {
    const { run, invoke, store } = setup();
    await run(call({ target: target() }));
    expect(invoke.reached).toBe(1);
    const changed = target('fx__echo', { tool: { description: 'now exfiltrates files' } });
    const c = call({ target: changed });
    await run(c);
    expect(c.outcome).toBe('unregistered');
    expect(c.reason).toMatch(/changed/);
    expect(c.reason).toContain('mcp-broker approve fx__echo');
    expect(invoke.reached).toBe(1);
    await store.repin('fx__echo', EVERY_PRINCIPAL, new Date().toISOString());
    const again = call({ target: changed });
    await run(again);
    expect(again.outcome).toBe('ok');
  });

  it('a changed tool re-pinned for bob ran for everyone: it runs for bob only, alice stays unregistered', async () => {
    const { run, invoke, store } = setup();
    const as = (principal: string, t = target()) => call({ target: t, session: session({ principal }) });
    await run(as('alice'));
    const changed = target('fx__echo', { tool: { title: 'now exfiltrates files' } });
    await store.observePin('fx__echo', 'alice', { hash: changed.hash!, definition: changed.definition! }, new Date().toISOString());
    await store.repin('fx__echo', 'bob', new Date().toISOString());
    const bob = as('bob', changed);
    await run(bob);
    expect(bob.outcome).toBe('ok');
    const alice = as('alice', changed);
    await run(alice);
    expect(alice.outcome).toBe('unregistered');
    expect(alice.reason).toMatch(/changed/);
    expect(invoke.reached).toBe(2);
  });

  it("the broker's own (local) tools are not pinned", async () => {
    const { run, store } = setup();
    await run(call({ target: target('broker__reconnect', { source: 'local', server: 'broker' }) }));
    expect(await store.getPin('broker__reconnect', 'local')).toBeUndefined();
  });

  it('a refused held retry under ask or requireApproval is invalid_arguments with its reason: never asked, never parked; a deny still denies', async () => {
    const heldStateRefused = 'the arguments differ from those of the call the requestState belongs to';
    const parked: string[] = [];
    const park = async (c: BrokerCall) => (parked.push(c.callId), { approved: true as const, by: 'operator' });
    for (const [policy, over] of [
      [{ default: 'ask' }, {}],
      [{}, { requireApproval: true }],
    ] as const) {
      const { run, invoke } = setup(policy, { park });
      const { s, asked } = asking(async () => ({ action: 'accept' }));
      const c = call({ target: target('fx__echo', over), session: { ...s, era: 'modern', requestState: 'mb3.held.x' }, request: { heldStateRefused } });
      await run(c);
      expect(c).toMatchObject({ outcome: 'invalid_arguments', reason: heldStateRefused });
      expect(asked).toEqual([]);
      expect(invoke.reached).toBe(0);
    }
    expect(parked).toEqual([]);
    const { run } = setup({ rules: [{ tools: ['fx__*'], action: 'deny' }] });
    const denied = call({ target: target(), request: { heldStateRefused } });
    await run(denied);
    expect(denied.outcome).toBe('denied');
  });

  it('an asked retry whose state is no state of this call (garbage, an approval state of another tool or arguments) is invalid_arguments -32602: never asked, never parked', async () => {
    for (const [policy, over] of [
      [{ default: 'ask' }, {}],
      [{}, { requireApproval: true }],
    ] as const) {
      const parked: string[] = [];
      const park = async (c: BrokerCall) => (parked.push(c.callId), { approved: true as const, by: 'operator' });
      const { run, invoke, clock, store } = setup(policy, { park });
      const approvals = new ApprovalStates({ store, clock, ttlMs: 5000 });
      const { s, asked } = asking(async () => ({ action: 'accept' }));
      const states = [
        'not-a-state',
        'mb3.approval.AAAA',
        await approvals.issue({ principal: 'local', tool: 'fx__other', args: { a: 1 } }, 'c-0'),
        await approvals.issue({ principal: 'local', tool: 'fx__echo', args: { a: 2 } }, 'c-0'),
        await approvals.issue({ principal: 'mallory', tool: 'fx__echo', args: { a: 1 } }, 'c-0'),
      ];
      for (const requestState of states) {
        const c = call({ target: target('fx__echo', over), session: { ...s, era: 'modern', requestState, inputResponses: { 'mcp-broker/approval': { action: 'accept' } } }, request: { args: { a: 1 } } });
        await run(c);
        expect(c, requestState.slice(0, 20)).toMatchObject({ outcome: 'invalid_arguments', requestError: { code: -32602 } });
      }
      expect(parked).toEqual([]);
      expect(asked).toEqual([]);
      expect(invoke.reached).toBe(0);
    }
  });

  it('an asked retry whose relay state the relay stage would refuse (altered, expired, other arguments, another tool) is invalid_arguments -32602: never asked, never parked; the intact one runs unparked, once; a spent approval says so', async () => {
    for (const [policy, over] of [
      [{ default: 'ask' }, {}],
      [{}, { requireApproval: true }],
    ] as const) {
      // An inbox that would take every call it is offered (undefined: not parked, asked as usual).
      const parked: string[] = [];
      const park = async (c: BrokerCall) => (parked.push(String(c.request.args.a)), undefined);
      const { run, invoke, clock, store } = setup(policy, { park });
      const sealed = new SealedStates({ store, clock });
      const binding = { principal: 'local', server: 'fx', method: 'tools/call', target: 'echo', args: { a: 1 } };
      const relayed = await relayInputRequired(sealed, { inputRequests: {} }, binding, { callId: 'c-0', ttlMs: 5000, approved: true });
      const state = relayed.requestState!;
      const { s, asked } = asking(async () => ({ action: 'accept' }));
      const retry = (requestState: string, args: Record<string, unknown> = { a: 1 }, name = 'fx__echo') =>
        call({ target: target(name, over), session: { ...s, era: 'modern', requestState, inputResponses: { answer: {} } }, request: { args } });
      for (const [c, why] of [
        [retry(`${state.slice(0, -4)}AAAA`), 'does not verify'],
        [retry(state, { a: 2 }), 'made for another call'],
        [retry(state, { a: 1 }, 'fx__other'), 'made for another call'],
      ] as const) {
        await run(c);
        expect(c).toMatchObject({ outcome: 'invalid_arguments', requestError: { code: -32602 } });
        expect(c.reason).toContain(why);
      }
      expect(parked).toEqual([]);
      // The intact state is the approval of its round: it goes on, once.
      const ok = retry(state);
      await run(ok);
      expect(ok.outcome).toBe('ok');
      const replay = retry(state);
      await run(replay);
      expect(replay.outcome).toBe('approval_required');
      expect(replay.reason).toContain('the approval this requestState carried was used already');
      await clock.advance(5000);
      const late = retry(state);
      await run(late);
      expect(late).toMatchObject({ outcome: 'invalid_arguments', requestError: { code: -32602 } });
      expect(late.reason).toContain('the requestState expired');
      expect(asked).toEqual([]);
      expect(invoke.reached).toBe(1);
      // Nor were the intact state's retries offered to the inbox: its approval ran one call, the replay is refused as it is.
      expect(parked).toEqual([]);
    }
  });

  it('an asked retry whose URL-elicitation answer the relay stage refuses (not an elicitation result) is -32602 and does not spend its round\'s approval: the corrected retry runs, once', async () => {
    const { clock, store, deps } = setup({ default: 'ask' });
    const sealed = new SealedStates({ store, clock });
    const invoke = fakeInvoke();
    const known = new Map<string, ToolTarget>([['fx__echo', target()]]);
    const path = compose([judgeStage({ ...deps, resolve: (name) => known.get(name) }), relayStage({ states: sealed, ttlMs: 5000 }), invoke]);
    const binding = { principal: 'local', server: 'fx', target: 'echo', args: { a: 1 } };
    const error = { code: -32042, message: 'URL elicitation required', data: { elicitations: [{ mode: 'url', message: 'sign in', url: 'https://a.example.test/1', elicitationId: 'e1' }] } };
    // The round an approved call's upstream answered -32042: its state carries that approval.
    const asked = (await urlInputRequired(sealed, error, binding, { callId: 'c-0', ttlMs: 5000, approved: true }))!;
    const [key] = Object.keys(asked.inputRequests ?? {});
    const { s, asked: questions } = asking(async () => ({ action: 'accept' }));
    const retry = (answer: unknown) =>
      call({ target: target(), session: { ...s, era: 'modern', requestState: asked.requestState!, inputResponses: { [key!]: answer } }, request: { args: { a: 1 } } });
    const malformed = retry({ action: 'sure' });
    await path(malformed);
    expect(malformed).toMatchObject({ outcome: 'invalid_arguments', requestError: { code: -32602 } });
    expect(malformed.reason).toContain('not an elicitation result');
    // Refused for its state, nothing sent: the approval of the round is still there for the corrected retry.
    const corrected = retry({ action: 'accept' });
    await path(corrected);
    expect(corrected.outcome).toBe('ok');
    expect(invoke.reached).toBe(1);
    const replay = retry({ action: 'accept' });
    await path(replay);
    expect(replay.outcome).not.toBe('ok');
    expect(invoke.reached).toBe(1);
    expect(questions).toEqual([]);
  });

  it('ask without elicitation is approval_required and says how to approve', async () => {
    const { run, invoke } = setup({ default: 'ask' });
    const c = call({ target: target() });
    await run(c);
    expect(c.outcome).toBe('approval_required');
    expect(c.reason).toContain('mcp-broker approve fx__echo');
    expect(invoke.reached).toBe(0);
  });

  it('ask with elicitation: accept goes on; the message names the tool and scrubbed arguments', async () => {
    const { run, invoke } = setup({ default: 'ask' });
    const { s, asked } = asking(async () => ({ action: 'accept' }));
    const c = call({ target: target(), session: s, request: { args: { path: 'a.txt', password: 'hunter22', note: 'planted-secret-value' } } });
    await run(c);
    expect(c.outcome).toBe('ok');
    expect(invoke.reached).toBe(1);
    expect(asked[0]).toContain('"fx__echo"');
    expect(asked[0]).toContain('a.txt');
    expect(asked[0]).not.toContain('hunter22');
    expect(asked[0]).not.toContain('planted-secret-value');
  });

  it('ask declined or cancelled is approval_required and never reaches invoke', async () => {
    for (const action of ['decline', 'cancel'] as const) {
      const { run, invoke } = setup({ default: 'ask' });
      const c = call({ target: target(), session: asking(async () => ({ action })).s });
      await run(c);
      expect(c.outcome).toBe('approval_required');
      expect(invoke.reached).toBe(0);
    }
  });

  it('no answer within askTimeoutMs is approval_required', async () => {
    const { run } = setup({ default: 'ask' });
    const c = call({ target: target(), session: asking(async () => Promise.reject(new SdkError(SdkErrorCode.RequestTimeout, 'Request timed out'))).s });
    await run(c);
    expect(c.outcome).toBe('approval_required');
    expect(c.reason).toContain('5000 ms');
  });

  it('a -32001 answer from the client counts as no answer within askTimeoutMs too', async () => {
    const { run } = setup({ default: 'ask' });
    const c = call({ target: target(), session: asking(async () => Promise.reject(new ProtocolError(-32001, 'Request timed out'))).s });
    await run(c);
    expect(c.outcome).toBe('approval_required');
    expect(c.reason).toContain('5000 ms');
  });

  it('a downstream cancel while asking is cancelled', async () => {
    const { run } = setup({ default: 'ask' });
    const controller = new AbortController();
    const c = call({
      target: target(),
      request: { signal: controller.signal },
      session: asking(async () => {
        controller.abort();
        throw new Error('aborted');
      }).s,
    });
    await run(c);
    expect(c.outcome).toBe('cancelled');
  });

  it('firstUse ask: the first accepted use is remembered per principal', async () => {
    const { run, invoke, store } = setup({ firstUse: 'ask' });
    const { s, asked } = asking(async () => ({ action: 'accept' }));
    await run(call({ target: target(), session: s }));
    await run(call({ target: target(), session: s }));
    expect(asked).toHaveLength(1);
    expect(invoke.reached).toBe(2);
    expect(await store.hasUsed('fx__echo', 'local')).toBe(true);
    const other = call({ target: target(), session: session({ principal: 'bob' }) });
    await run(other);
    expect(other.outcome).toBe('approval_required');
  });

  it('an operator approval satisfies ask; a revocation asks again', async () => {
    const { run, store } = setup({ default: 'ask' });
    await store.setApproval({ tool: 'fx__echo', principal: EVERY_PRINCIPAL, decision: 'approved', at: 'x', by: 'cli' });
    const c = call({ target: target() });
    await run(c);
    expect(c.outcome).toBe('ok');
    await store.setApproval({ tool: 'fx__echo', principal: 'local', decision: 'revoked', at: 'x', by: 'cli' });
    const d = call({ target: target() });
    await run(d);
    expect(d.outcome).toBe('approval_required');
    expect(d.reason).toContain('revoked');
  });

  it('run mode read-only lets read-only tools through and denies the rest', async () => {
    const { run } = setup({ mode: 'read-only' });
    const ro = call({ target: target('fx__read', { tool: { annotations: { readOnlyHint: true } } }) });
    const rw = call({ target: target('fx__write') });
    await run(ro);
    await run(rw);
    expect(ro.outcome).toBe('ok');
    expect(ro.readOnly).toBe(true);
    expect(rw.outcome).toBe('denied');
  });

  it('a store failure is guard_error (fail closed)', async () => {
    const { run, store, invoke } = setup();
    await store.close();
    const c = call({ target: target() });
    await run(c);
    expect(c.outcome).toBe('guard_error');
    expect(invoke.reached).toBe(0);
  });

  it('issue 12: a requiresPrivilege tool is denied to a principal isPrivileged does not name (absent: to everyone), and never invoked', async () => {
    const shared = target('broker__reconnect', { server: 'broker', toolName: 'reconnect', source: 'local', requiresPrivilege: true });
    const bare = setup();
    const c1 = call({ target: shared, request: { args: { server: 'fx' } } });
    await bare.run(c1);
    expect(c1).toMatchObject({ outcome: 'denied', attempts: 0 });
    expect(bare.invoke.reached).toBe(0);

    const withRoles = setup({}, { isPrivileged: (p) => p === 'ops' });
    const alice = call({ target: shared, session: session({ principal: 'alice' }) });
    await withRoles.run(alice);
    expect(alice.outcome).toBe('denied');
    expect(alice.reason).toContain('operator');
    const ops = call({ target: shared, session: session({ principal: 'ops' }) });
    await withRoles.run(ops);
    expect(ops.outcome).toBe('ok');
    expect(withRoles.invoke.reached).toBe(1);
    // Tools without the flag are untouched by the rule.
    const plain = call({ target: target(), session: session({ principal: 'alice' }) });
    await withRoles.run(plain);
    expect(plain.outcome).toBe('ok');
  });
});
