/**
 * Held-request states (broker/held-state.ts): sealed by the broker's one codec (kind `held`,
 * the store's one key), bound to principal, tool, arguments and expiry by the injected clock;
 * told apart by their kind before opening; no state of another kind opens as one, nor one as
 * another kind.
 */
import { describe, expect, it } from 'vitest';
import { ApprovalStates } from '../../src/broker/approval-state.js';
import { HELD_STATE_PREFIX, HeldStates, isHeldState } from '../../src/broker/held-state.js';
import { openRelay } from '../../src/broker/relay-input.js';
import { kindOf, SealedStates } from '../../src/broker/sealed-state.js';
import { ManualClock } from '../../src/shared/clock.js';
import { SqliteStore } from '../../src/store/index.js';

function rig() {
  const store = SqliteStore.open(':memory:');
  const clock = new ManualClock();
  const sealed = new SealedStates({ store, clock });
  return { store, clock, sealed, states: new HeldStates(sealed) };
}

const binding = { principal: 'alice', tool: 'conf__test_sampling', args: { prompt: 'p' } };

describe('held-request states', () => {
  it('opens for the same principal, tool and arguments before expiry, with the held call and round', async () => {
    const { states, clock } = rig();
    const state = await states.issue(binding, 'held-1', 2, clock.now() + 1000);
    expect(state.startsWith(HELD_STATE_PREFIX)).toBe(true);
    expect(isHeldState(state)).toBe(true);
    expect(kindOf(state)).toBe('held');
    const opened = await states.open(state, { principal: 'alice', tool: 'conf__test_sampling', args: { prompt: 'p' } });
    expect(opened).toMatchObject({ ok: true, claim: { heldId: 'held-1', round: 2 } });
  });

  it('refuses an altered, foreign, other-tool, other-arguments or expired state', async () => {
    const { states, clock } = rig();
    const state = await states.issue(binding, 'held-1', 1, clock.now() + 1000);
    const flip = state.slice(0, -2) + (state.at(-2) === 'A' ? 'B' : 'A') + state.at(-1);
    expect(await states.open(flip, binding)).toMatchObject({ ok: false, why: 'unreadable' });
    expect(await states.open(state, { ...binding, principal: 'bob' })).toMatchObject({ ok: false, why: 'principal' });
    expect(await states.open(state, { ...binding, tool: 'conf__test_elicitation' })).toMatchObject({ ok: false, why: 'tool' });
    expect(await states.open(state, { ...binding, args: { prompt: 'q' } })).toMatchObject({ ok: false, why: 'arguments' });
    await clock.advance(1000);
    expect(await states.open(state, binding)).toMatchObject({ ok: false, why: 'expired' });
  });

  it("an approval state is not a held-request state, and another store's key does not open it", async () => {
    const { store, clock, states } = rig();
    const approval = await new ApprovalStates({ store, clock, ttlMs: 1000 }).issue(binding, 'call-1');
    expect(isHeldState(approval)).toBe(false);
    expect(await states.open(approval, binding)).toMatchObject({ ok: false, why: 'unreadable' });
    const elsewhere = await rig().states.issue(binding, 'held-1', 1, clock.now() + 1000);
    expect(await states.open(elsewhere, binding)).toMatchObject({ ok: false, why: 'unreadable' });
  });

  it('is sealed under the store\'s one sealed-state key: a codec over the same store opens it', async () => {
    const { store, clock, states } = rig();
    const state = await states.issue(binding, 'held-1', 1, clock.now() + 1000);
    const again = new HeldStates(new SealedStates({ store, clock }));
    expect(await again.open(state, binding)).toMatchObject({ ok: true, claim: { heldId: 'held-1', round: 1 } });
  });

  it('opens only as its kind: an expired approval is unreadable here, a held state opens as no approval or relay', async () => {
    const { store, clock, sealed, states } = rig();
    const approvals = new ApprovalStates({ store, clock, ttlMs: 1000, sealed });
    const approval = await approvals.issue(binding, 'call-1');
    await clock.advance(1000);
    expect(await states.open(approval, binding)).toMatchObject({ ok: false, why: 'unreadable' });
    const held = await states.issue(binding, 'held-1', 1, clock.now() + 1000);
    expect(await approvals.open(held, binding)).toMatchObject({ ok: false, why: 'unreadable' });
    const relayBinding = { principal: 'alice', server: 'conf', method: 'tools/call', target: 'test_sampling', args: binding.args };
    expect(await approvals.redeemRelay(held, relayBinding)).toBe(false);
    const retry = { sessionId: null, principal: 'alice', unit: 'modern:alice', era: 'modern' as const, isLive: () => true, requestState: held, inputResponses: { answer: 1 } };
    expect(await openRelay(sealed, retry, relayBinding)).toMatchObject({ kind: 'refused', reason: expect.stringContaining('does not verify') });
  });

  it('a state relabelled as another kind opens as neither', async () => {
    const { store, clock, sealed, states } = rig();
    const held = await states.issue(binding, 'held-1', 1, clock.now() + 1000);
    const asApproval = held.replace(HELD_STATE_PREFIX, 'mb3.approval.');
    expect(kindOf(asApproval)).toBe('approval');
    expect(await sealed.open(asApproval)).toEqual({ ok: false, why: 'unreadable' });
    const approval = await new ApprovalStates({ store, clock, ttlMs: 1000, sealed }).issue(binding, 'call-1');
    const asHeld = approval.replace('mb3.approval.', HELD_STATE_PREFIX);
    expect(isHeldState(asHeld)).toBe(true);
    expect(await states.open(asHeld, binding)).toMatchObject({ ok: false, why: 'unreadable' });
  });
});
