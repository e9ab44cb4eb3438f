/**
 * Held-request states (broker/held-state.ts): sealed under the store's key, bound to principal,
 * tool, arguments and expiry by the injected clock; an approval state never opens as one.
 */
import { describe, expect, it } from 'vitest';
import { ApprovalStates } from '../../src/broker/approval-state.js';
import { HELD_STATE_PREFIX, HeldStates, isHeldState } from '../../src/broker/held-state.js';
import { ManualClock } from '../../src/shared/clock.js';
import { SqliteStore } from '../../src/store/index.js';

function rig() {
  const store = SqliteStore.open(':memory:');
  const clock = new ManualClock();
  return { store, clock, states: new HeldStates({ store, clock }) };
}

const binding = { principal: 'alice', tool: 'conf__test_sampling', args: { prompt: 'p' } };

describe('held-request states', () => {
  it('opens for the same principal, tool and arguments before expiry, with the held call and round', async () => {
    const { states, clock } = rig();
    const state = await states.issue(binding, 'held-1', 2, clock.now() + 1000);
    expect(state.startsWith(HELD_STATE_PREFIX)).toBe(true);
    expect(isHeldState(state)).toBe(true);
    const opened = await states.open(state, { principal: 'alice', tool: 'conf__test_sampling', args: { prompt: 'p' } });
    expect(opened).toMatchObject({ ok: true, claim: { kind: 'held', heldId: 'held-1', round: 2 } });
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
});
