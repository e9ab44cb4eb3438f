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
    const sent: Record<string, string[]> = { a: [], a2: [], b: [] };
    const notifiers = new Map(Object.keys(sent).map((who) => [who, (n: ElicitationCompleteNotification) => void sent[who]!.push(n.params.elicitationId)]));
    const to = (who: 'a' | 'a2' | 'b') => notifiers.get(who)!;
    return { clock, sent, to, pending: new UrlElicitations(() => clock.now()) };
  };

  it('relays a completion once, to the session that got the elicitation', () => {
    const { pending, sent, to } = rig();
    pending.expect('e1', to('a'), 'alice');
    pending.expect('e2', to('b'), 'bob');
    expect(pending.complete('e1')).toBe('sent');
    expect(pending.complete('e1')).toBe('none');
    expect(pending.complete('unknown')).toBe('none');
    expect(sent).toEqual({ a: ['e1'], a2: [], b: [] });
  });

  it("relays a reused id's completion to each session of one principal that got it, and to none when several principals' sessions did (regression: the later relay took it)", () => {
    const { pending, sent, to } = rig();
    pending.expect('dup', to('a'), 'alice');
    pending.expect('dup', to('a2'), 'alice');
    pending.expect('dup', to('a'), 'alice');
    pending.expect('shared', to('a'), 'alice');
    pending.expect('shared', to('b'), 'bob');
    expect(pending.size).toBe(4);
    expect(pending.complete('dup')).toBe('sent');
    expect(pending.complete('shared')).toBe('ambiguous');
    expect(pending.complete('shared')).toBe('none');
    expect(sent).toEqual({ a: ['dup'], a2: ['dup'], b: [] });
  });

  it("forgets a declined elicitation for that session only", () => {
    const { pending, sent, to } = rig();
    pending.expect('e1', to('a'), 'alice');
    pending.expect('e1', to('a2'), 'alice');
    pending.forget('e1', to('a'));
    expect(pending.complete('e1')).toBe('sent');
    expect(sent).toEqual({ a: [], a2: ['e1'], b: [] });
  });

  it('forgets an elicitation after URL_ELICITATION_TTL_MS', () => {
    const { pending, sent, to, clock } = rig();
    pending.expect('e1', to('a'), 'alice');
    clock.advance(URL_ELICITATION_TTL_MS);
    pending.expect('e1', to('b'), 'bob');
    // The expired one no longer counts: bob's alone is waiting.
    expect(pending.complete('e1')).toBe('sent');
    expect(sent).toEqual({ a: [], a2: [], b: ['e1'] });
  });

  it('keeps at most MAX_PENDING_URL_ELICITATIONS, forgetting the oldest', () => {
    const { pending, to } = rig();
    for (let i = 0; i <= MAX_PENDING_URL_ELICITATIONS; i++) pending.expect(`e${i}`, to('a'), 'alice');
    expect(pending.size).toBe(MAX_PENDING_URL_ELICITATIONS);
    expect(pending.complete('e0')).toBe('none');
    expect(pending.complete(`e${MAX_PENDING_URL_ELICITATIONS}`)).toBe('sent');
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
