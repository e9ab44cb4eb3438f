import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/shared/clock.js';
import {
  elicitationIdsOf,
  MAX_PENDING_URL_ELICITATIONS,
  supportsFormElicitation,
  supportsUrlElicitation,
  URL_ELICITATION_TTL_MS,
  UrlElicitations,
  type ElicitationCompleteNotification,
} from '../../src/upstream/url-elicitations.js';

describe('UrlElicitations', () => {
  const rig = () => {
    const clock = new ManualClock();
    const sent: Record<string, string[]> = { a: [], b: [] };
    const to = (who: 'a' | 'b') => (n: ElicitationCompleteNotification) => sent[who]!.push(n.params.elicitationId);
    return { clock, sent, to, pending: new UrlElicitations(() => clock.now()) };
  };

  it('relays a completion once, to the session that got the elicitation', () => {
    const { pending, sent, to } = rig();
    pending.expect('e1', to('a'));
    pending.expect('e2', to('b'));
    expect(pending.complete('e1')).toBe(true);
    expect(pending.complete('e1')).toBe(false);
    expect(pending.complete('unknown')).toBe(false);
    expect(sent).toEqual({ a: ['e1'], b: [] });
  });

  it('forgets an elicitation after URL_ELICITATION_TTL_MS', () => {
    const { pending, sent, to, clock } = rig();
    pending.expect('e1', to('a'));
    clock.advance(URL_ELICITATION_TTL_MS);
    expect(pending.complete('e1')).toBe(false);
    expect(sent.a).toEqual([]);
  });

  it('keeps at most MAX_PENDING_URL_ELICITATIONS, forgetting the oldest', () => {
    const { pending, to } = rig();
    for (let i = 0; i <= MAX_PENDING_URL_ELICITATIONS; i++) pending.expect(`e${i}`, to('a'));
    expect(pending.size).toBe(MAX_PENDING_URL_ELICITATIONS);
    expect(pending.complete('e0')).toBe(false);
    expect(pending.complete(`e${MAX_PENDING_URL_ELICITATIONS}`)).toBe(true);
  });
});

describe('elicitation modes a client declared', () => {
  it.each([
    [undefined, false, false],
    [{}, false, false],
    [{ elicitation: {} }, true, false],
    [{ elicitation: { form: {} } }, true, false],
    [{ elicitation: { url: {} } }, false, true],
    [{ elicitation: { form: {}, url: {} } }, true, true],
  ])('%j: form %s, url %s', (caps, form, url) => {
    expect(supportsFormElicitation(caps)).toBe(form);
    expect(supportsUrlElicitation(caps)).toBe(url);
  });

  it('reads the elicitationIds of a -32042 error data, skipping malformed entries', () => {
    expect(elicitationIdsOf({ elicitations: [{ mode: 'url', elicitationId: 'x' }, { mode: 'url' }, null, { elicitationId: 3 }] })).toEqual(['x']);
    expect(elicitationIdsOf(undefined)).toEqual([]);
    expect(elicitationIdsOf({ elicitations: 'no' })).toEqual([]);
  });
});
