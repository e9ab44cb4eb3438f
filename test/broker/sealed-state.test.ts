/**
 * The broker's one sealed-state codec (src/broker/sealed-state.ts) and the relay's use of it
 * (src/broker/relay-input.ts): a state opens only intact, unexpired (by the injected clock), with
 * the key of its own store and as the kind it was sealed as; a relay state opens only for the
 * call it was made for; keys in the broker's namespace are moved aside per upstream and restored.
 */
import { describe, expect, it } from 'vitest';
import { ApprovalStates } from '../../src/broker/approval-state.js';
import { openRelay, relayedKey, relayInputRequired, upstreamResponses } from '../../src/broker/relay-input.js';
import { SealedStates, SEALED_STATE_PREFIX, type RelayClaim } from '../../src/broker/sealed-state.js';
import type { CallerSession } from '../../src/broker/types.js';
import { ManualClock } from '../../src/shared/clock.js';
import { SqliteStore } from '../../src/store/sqlite.js';

function rig() {
  const clock = new ManualClock();
  const store = SqliteStore.open(':memory:');
  return { clock, store, states: new SealedStates({ store, clock }) };
}

const relay: RelayClaim = { principal: 'alice', server: 'up', method: 'tools/call', target: 'ask', argsDigest: 'd', state: 'asked:x', callId: 'c1', expiresAt: 0 };
const caller = (over: Partial<CallerSession> = {}): CallerSession => ({ sessionId: null, principal: 'alice', unit: 'modern:alice', era: 'modern', isLive: () => true, ...over });

describe('SealedStates', () => {
  it('opens what it sealed, as its kind, until its expiry by the broker clock', async () => {
    const { clock, states } = rig();
    const sealed = await states.seal('relay', { ...relay, expiresAt: clock.now() + 1000 });
    expect(sealed.startsWith(SEALED_STATE_PREFIX)).toBe(true);
    expect(await states.open(sealed)).toEqual({ ok: true, kind: 'relay', claim: { ...relay, expiresAt: clock.now() + 1000 } });
    await clock.advance(1000);
    expect(await states.open(sealed)).toEqual({ ok: false, why: 'expired' });
  });

  it('refuses any changed character, a cut state, another format, and a state of another store', async () => {
    const { clock, states } = rig();
    const sealed = await states.seal('relay', { ...relay, expiresAt: clock.now() + 1000 });
    const body = sealed.slice(SEALED_STATE_PREFIX.length);
    for (const i of [0, Math.floor(body.length / 2), body.length - 1]) {
      const bad = SEALED_STATE_PREFIX + body.slice(0, i) + (body[i] === 'A' ? 'B' : 'A') + body.slice(i + 1);
      expect(await states.open(bad)).toEqual({ ok: false, why: 'unreadable' });
    }
    for (const bad of [`${sealed}-TAMPERED`, sealed.slice(0, -3), 'mb1.' + body, '', 42, undefined, 'x'.repeat(20_000)]) {
      expect(await states.open(bad)).toEqual({ ok: false, why: 'unreadable' });
    }
    expect(await rig().states.open(sealed)).toEqual({ ok: false, why: 'unreadable' });
  });

  it('an approval state and a relay state never stand for each other', async () => {
    const { clock, store, states } = rig();
    const approvals = new ApprovalStates({ store, clock, ttlMs: 1000, sealed: states });
    const relayState = await states.seal('relay', { ...relay, expiresAt: clock.now() + 1000 });
    expect(await approvals.open(relayState, { principal: 'alice', tool: 'up__ask', args: {} })).toMatchObject({ ok: false, why: 'unreadable' });
    const approval = await approvals.issue({ principal: 'alice', tool: 'up__ask', args: {} }, 'c0');
    const binding = { principal: 'alice', server: 'up', method: 'tools/call', target: 'ask', args: {} };
    // An approval state carries no upstream state: the answers go on, with no requestState.
    expect(await openRelay(states, caller({ requestState: approval, inputResponses: { 'mcp-broker/approval': {}, answer: 1 } }), binding)).toEqual({
      kind: 'relay',
      input: { inputResponses: { answer: 1 } },
    });
    // A relay state without an approval in it approves nothing.
    expect(await approvals.redeemRelay(relayState, { principal: 'alice', server: 'up', method: 'tools/call', target: 'ask', args: {} })).toBe(false);
  });
});

describe('relay of input requests', () => {
  it("keeps an upstream's keys, moves one in the broker's namespace aside per upstream, and restores it on the retry", () => {
    expect(relayedKey('up', 'user_name')).toBe('user_name');
    expect(relayedKey('up', 'mcp-broker/approval')).toBe('mcp-broker/upstream/up/mcp-broker/approval');
    expect(
      upstreamResponses('up', {
        user_name: 1,
        'mcp-broker/approval': 2,
        'mcp-broker/upstream/up/mcp-broker/approval': 3,
        'mcp-broker/upstream/other/k': 4,
      }),
    ).toEqual({ user_name: 1, 'mcp-broker/approval': 3 });
  });

  it("seals the upstream's state for this call only: another principal, upstream, method, tool or arguments is refused", async () => {
    const { clock, states } = rig();
    const binding = { principal: 'alice', server: 'up', method: 'tools/call', target: 'ask', args: { q: 1 } };
    const result = await relayInputRequired(
      states,
      { resultType: 'input_required', inputRequests: { answer: { method: 'elicitation/create', params: {} } }, requestState: 'asked:x' },
      binding,
      { callId: 'c1', ttlMs: 1000 },
    );
    expect(result.requestState).not.toContain('asked');
    const retry = caller({ requestState: result.requestState, inputResponses: { answer: { action: 'accept' } } });
    expect(await openRelay(states, retry, binding)).toEqual({ kind: 'relay', input: { inputResponses: { answer: { action: 'accept' } }, requestState: 'asked:x' } });
    for (const other of [{ principal: 'bob' }, { server: 'up2' }, { method: 'prompts/get' }, { target: 'whoami' }, { args: { q: 2 } }]) {
      const opened = await openRelay(states, { ...retry, principal: other.principal ?? 'alice' }, { ...binding, ...other, principal: other.principal ?? 'alice' });
      expect(opened.kind).toBe('refused');
    }
    await clock.advance(1000);
    expect(await openRelay(states, retry, binding)).toMatchObject({ kind: 'refused', reason: expect.stringContaining('expired') });
  });
});
