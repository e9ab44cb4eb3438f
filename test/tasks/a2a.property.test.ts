/**
 * The A2A task-state mapping (seed 001_0e634786582ab9c8.txt): total and pure over
 * (status, stoppedBy), and the reversal's `lossy` flag holds exactly for the states that do not
 * survive the round trip.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { A2A_TASK_STATES, fromA2ATaskState, projectA2ATaskState, toA2ATaskState, type A2ATaskState } from '../../src/tasks/index.js';
import type { TaskStatus } from '../../src/store/index.js';

const STATUSES: readonly TaskStatus[] = ['running', 'completed', 'failed', 'parked', 'killed'];
const status = fc.constantFrom(...STATUSES);
const stoppedBy = fc.oneof(fc.constantFrom('user', 'parent', 'system', null, undefined), fc.string());
const state = fc.constantFrom(...A2A_TASK_STATES);

describe('A2A task states (seed 001)', () => {
  it('toA2ATaskState is total and pure: every (status, stoppedBy) gives one of the nine states, the same each time', () => {
    fc.assert(
      fc.property(status, stoppedBy, (s, by) => {
        const a = toA2ATaskState({ status: s, stoppedBy: by });
        expect(A2A_TASK_STATES).toContain(a);
        expect(toA2ATaskState({ status: s, stoppedBy: by })).toBe(a);
      }),
    );
  });

  it('the biconditional: lossy is false exactly when the state survives toA2ATaskState(fromA2ATaskState(s))', () => {
    fc.assert(
      fc.property(state, (s) => {
        const back = fromA2ATaskState(s);
        const survives = toA2ATaskState({ status: back.status }) === s;
        expect(back.lossy).toBe(!survives);
        if (back.lossy) expect(back.note.length).toBeGreaterThan(0);
      }),
    );
  });

  it('killed splits on attribution: user or parent is canceled, system, an unknown source or none is failed', () => {
    expect(toA2ATaskState({ status: 'killed', stoppedBy: 'user' })).toBe('canceled');
    expect(toA2ATaskState({ status: 'killed', stoppedBy: 'parent' })).toBe('canceled');
    fc.assert(
      fc.property(fc.oneof(fc.constantFrom('system', null, undefined), fc.string().filter((x) => x !== 'user' && x !== 'parent')), (by) => {
        expect(toA2ATaskState({ status: 'killed', stoppedBy: by })).toBe('failed');
      }),
    );
    expect(toA2ATaskState({ status: 'parked', stoppedBy: null })).toBe('input-required');
  });

  it('no row maps to submitted, rejected, auth-required or unknown', () => {
    const never: A2ATaskState[] = ['submitted', 'rejected', 'auth-required', 'unknown'];
    fc.assert(
      fc.property(status, stoppedBy, (s, by) => {
        expect(never).not.toContain(toA2ATaskState({ status: s, stoppedBy: by }));
      }),
    );
  });

  it('the read projection: a running row of another live instance is unknown; of a dead one, or any other row, the row mapping', () => {
    fc.assert(
      fc.property(status, stoppedBy, fc.boolean(), fc.boolean(), (s, by, own, live) => {
        const row = { status: s, stoppedBy: by as never, owner: own ? 'me' : 'other' };
        const projected = projectA2ATaskState(row, { instanceId: 'me', isLive: () => live });
        expect(projected).toBe(s === 'running' && !own && live ? 'unknown' : toA2ATaskState(row));
      }),
    );
  });
});
