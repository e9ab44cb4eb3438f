/**
 * A modern instance's `server/discover` surface (transports/discover-answer.ts) is judged once
 * and kept while the roster, the policy and the first dial's settling it was judged on are the
 * gateway's; any of them replaced (a reload, a catalog change, the dial settled) judges it again.
 * The stdio connection's answer was built once and kept through every reload.
 */
import { describe, expect, it } from 'vitest';
import type { PolicyConfig } from '../../src/config/schema.js';
import { DiscoverAnswer } from '../../src/transports/discover-answer.js';
import type { Roster } from '../../src/upstream/roster.js';
import type { ServedSurface, SurfaceBasis } from '../../src/upstream/surface.js';

/** A gateway whose basis the test replaces part by part; each judgement answers the next of `answers`. */
function gatewayWith(answers: ServedSurface[]) {
  const judged: string[] = [];
  let basis: SurfaceBasis = { roster: {} as Roster, policy: {} as PolicyConfig, settled: true };
  return {
    judged,
    replace: (part: Partial<SurfaceBasis>) => (basis = { ...basis, ...part }),
    surfaceBasis: () => ({ ...basis }),
    surface(principal: string): ServedSurface {
      judged.push(principal);
      return answers[judged.length - 1]!;
    },
  };
}

describe('DiscoverAnswer', () => {
  const both = { instructions: 'one: a\n\ntwo: b' };
  const one = { instructions: 'one: a' };

  it('judges the surface once while the roster and the policy are the ones it was judged on', () => {
    const gateway = gatewayWith([both]);
    const answer = new DiscoverAnswer(gateway, 'local');
    for (let i = 0; i < 5; i++) expect(answer.surface()).toBe(both);
    expect(gateway.judged).toEqual(['local']);
  });

  it('judges it again, once, when a reload replaces the policy, the roster is rebuilt, or the first dial settles', () => {
    const gateway = gatewayWith([both, one, both, one]);
    const answer = new DiscoverAnswer(gateway, 'local');
    gateway.replace({ policy: {} as PolicyConfig });
    expect(answer.surface()).toBe(one);
    expect(answer.surface()).toBe(one);
    gateway.replace({ roster: {} as Roster });
    expect(answer.surface()).toBe(both);
    gateway.replace({ settled: false });
    expect(answer.surface()).toBe(one);
    expect(answer.surface()).toBe(one);
    expect(gateway.judged).toEqual(['local', 'local', 'local', 'local']);
  });
});
