/**
 * A task's held input requests (src/tasks/inputs.ts, the tasks extension's inputRequests and
 * tasks/update): each key is minted once and never reused, an answer for a key that is not
 * outstanding is ignored, a partial answer leaves the rest listed, and a call that ends drops
 * its requests.
 */
import { describe, expect, it } from 'vitest';
import { TaskInputs } from '../../src/tasks/index.js';

const elicit = (message: string) => ({ method: 'elicitation/create', params: { message } });

describe('TaskInputs', () => {
  it('lists outstanding requests by key; answers resolve them one by one; unknown and answered keys are ignored', async () => {
    const inputs = new TaskInputs();
    const signal = new AbortController().signal;
    const first = inputs.ask('t1', elicit('one'), signal);
    const second = inputs.ask('t1', elicit('two'), signal);
    const pending = inputs.pending('t1')!;
    const [a, b] = Object.keys(pending);
    expect(pending[a!]).toEqual(elicit('one'));
    expect(a).not.toBe(b);

    expect(inputs.answer('t1', { [a!]: { action: 'accept', content: { n: 1 } }, unknown: { action: 'accept' } })).toBe(1);
    await expect(first).resolves.toEqual({ action: 'accept', content: { n: 1 } });
    expect(Object.keys(inputs.pending('t1')!)).toEqual([b]);
    expect(inputs.answer('t1', { [a!]: { action: 'decline' } })).toBe(0); // already answered

    inputs.answer('t1', { [b!]: { action: 'decline' } });
    await expect(second).resolves.toEqual({ action: 'decline' });
    expect(inputs.pending('t1')).toBeUndefined();
    // A later request never gets a key used before.
    void inputs.ask('t1', elicit('three'), signal);
    expect(Object.keys(inputs.pending('t1')!)).not.toContain(a);
    expect(Object.keys(inputs.pending('t1')!)).not.toContain(b);
  });

  it("a call that ends drops its requests (rejects with the signal's reason); another task's are untouched; non-object answers are ignored", async () => {
    const inputs = new TaskInputs();
    const ending = new AbortController();
    const held = inputs.ask('t1', elicit('one'), ending.signal);
    void inputs.ask('t2', elicit('other'), new AbortController().signal);
    const [key] = Object.keys(inputs.pending('t1')!);
    expect(inputs.answer('t1', { [key!]: 'yes' })).toBe(0);
    ending.abort(new Error('cancelled'));
    await expect(held).rejects.toThrow('cancelled');
    expect(inputs.pending('t1')).toBeUndefined();
    expect(Object.keys(inputs.pending('t2')!)).toHaveLength(1);
  });
});
