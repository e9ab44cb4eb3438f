/**
 * A modern upstream's requestState sealed inside ours (issue 14 §3): intact states open, any
 * tampering, another principal or tool, another key, or age past the TTL is refused.
 */
import { describe, expect, it } from 'vitest';
import { UpstreamStateSeal } from '../../src/upstream/upstream-state.js';

const call = { upstream: 'modern', toolName: 'ask', principal: 'alice' };

describe('UpstreamStateSeal', () => {
  it('opens what it sealed, with the upstream\'s state unchanged', async () => {
    const seal = new UpstreamStateSeal();
    const sealed = await seal.seal({ ...call, state: 'asked:colour?' });
    expect(await seal.open(sealed, call)).toEqual({ ...call, state: 'asked:colour?' });
  });

  it('refuses a state with any character changed', async () => {
    const seal = new UpstreamStateSeal();
    const sealed = await seal.seal({ ...call, state: 'x' });
    for (const i of [3, Math.floor(sealed.length / 2), sealed.length - 2]) {
      const c = sealed[i] === 'A' ? 'B' : 'A';
      const tampered = sealed.slice(0, i) + c + sealed.slice(i + 1);
      await expect(seal.open(tampered, call)).rejects.toMatchObject({ code: 'state_refused' });
    }
    await expect(seal.open('not a state', call)).rejects.toMatchObject({ code: 'state_refused' });
  });

  it('refuses a state re-pointed at another upstream or tool, or echoed by another principal', async () => {
    const seal = new UpstreamStateSeal();
    const sealed = await seal.seal({ ...call, state: 'x' });
    await expect(seal.open(sealed, { ...call, principal: 'mallory' })).rejects.toMatchObject({ code: 'state_refused' });
    await expect(seal.open(sealed, { ...call, toolName: 'delete_all' })).rejects.toMatchObject({ code: 'state_refused' });
    await expect(seal.open(sealed, { ...call, upstream: 'other' })).rejects.toMatchObject({ code: 'state_refused' });
    // A body forged with the same fields but signed by another key.
    const forged = await new UpstreamStateSeal().seal({ ...call, state: 'x' });
    await expect(seal.open(forged, call)).rejects.toMatchObject({ code: 'state_refused' });
  });

  it('refuses a state past its TTL', async () => {
    const seal = new UpstreamStateSeal({ ttlSeconds: -1 });
    const sealed = await seal.seal(call);
    await expect(seal.open(sealed, call)).rejects.toMatchObject({ code: 'state_refused', message: expect.stringContaining('expired') });
  });
});
