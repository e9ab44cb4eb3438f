/**
 * A call record as a reader is shown it (broker/record.ts `shownRecord`): the fields the record
 * stage scrubs scrubbed again with the scrubber's secrets of now; the broker's own as written.
 */
import { describe, expect, it } from 'vitest';
import { RECORD_NAME_MAX_CHARS, cutName, shownName, shownRecord } from '../../src/broker/record.js';
import { cutReason } from '../../src/broker/failure.js';
import type { CallRecord } from '../../src/broker/types.js';
import { REDACTED, Scrubber } from '../../src/shared/scrub.js';

const LATER = 'later-5c0e8d21f7a9';

const written = (more: Partial<CallRecord> = {}): CallRecord => ({
  ts: '2026-01-02T10:00:00.000Z',
  callId: '0f6c3f0e-8d1c-4b55-9a7e-2d4c1b9e7a10',
  sessionId: 'session-4b55',
  principal: 'alice',
  unit: `api:alice`,
  subject: `fx/tool-${LATER}`,
  name: `fx__tool-${LATER}`,
  outcome: 'tool_error',
  status: 200,
  durationMs: 3,
  attempts: 1,
  bytesOut: 10,
  reason: `the upstream said ${LATER}`,
  args: { text: LATER, nested: [{ note: `with ${LATER} inside` }], count: 3 },
  stripped: [`arg-${LATER}`],
  flow: { id: 'flow-1', step: `step-${LATER}` },
  ...more,
});

describe('shownRecord', () => {
  it('scrubs every field with the secrets of now, keeping the shape and the fields that hold none', () => {
    const record = written();
    const shown = shownRecord(new Scrubber([LATER]), record);
    expect(JSON.stringify(shown)).not.toContain(LATER);
    expect(shown).toEqual({
      ...record,
      subject: `fx/tool-${REDACTED}`,
      name: `fx__tool-${REDACTED}`,
      reason: `the upstream said ${REDACTED}`,
      args: { text: REDACTED, nested: [{ note: `with ${REDACTED} inside` }], count: 3 },
      stripped: [`arg-${REDACTED}`],
      flow: { id: 'flow-1', step: `step-${REDACTED}` },
    });
    // Never modified: the record as read stays as written.
    expect(record.name).toBe(`fx__tool-${LATER}`);
    expect(Object.keys(shown)).toEqual(Object.keys(record));
  });

  it("scrubs an estate proposal's path again, its id and action as written (regression: shown as written)", () => {
    const record = written({ proposal: { id: `prop_${LATER}`, action: 'applied', path: `notes/${LATER}.md` } });
    expect(shownRecord(new Scrubber([LATER]), record).proposal).toEqual({ id: `prop_${LATER}`, action: 'applied', path: `notes/${REDACTED}.md` });
    expect(record.proposal!.path).toBe(`notes/${LATER}.md`);
    const clean = written({ name: 'fx__tool', subject: 'fx/tool', reason: 'no', args: {}, stripped: [], flow: undefined, proposal: { id: 'prop_1', action: 'proposed', path: 'notes/a.md' } });
    expect(shownRecord(new Scrubber([LATER]), clean)).toBe(clean);
  });

  it('redacts a credential-named argument whole', () => {
    const record = written({ args: { api_key: 'plain-value', text: 'hello' } });
    expect(shownRecord(new Scrubber(), record).args).toEqual({ api_key: REDACTED, text: 'hello' });
  });

  it("leaves the broker's own fields as written, a short secret inside an id or a time included (regression: the call id a reader looks up changed)", () => {
    const record = written({ principal: 'alice-4b55', traceId: 'trace-4b55', spanId: 'span-4b55' });
    // '4b55' is in the call id, the session id, the principal and the trace ids; '2026' in the time; 'outcome' names a field.
    const shown = shownRecord(new Scrubber(['4b55', '2026', 'outcome']), record);
    for (const key of ['ts', 'callId', 'sessionId', 'principal', 'outcome', 'traceId', 'spanId'] as const) expect(shown[key]).toBe(record[key]);
    expect(Object.keys(shown)).toEqual(Object.keys(record));
  });

  it('shows a reason with "..." inside as it was, when it was not cut (regression: the start of a secret before any "..." was dropped)', () => {
    const reason = 'upstream said: retrying 4... then gave up';
    expect(shownRecord(new Scrubber(['4f2a-secret']), written({ reason })).reason).toBe(reason);
    const name = 'fx__ab…c';
    expect(shownRecord(new Scrubber(['b-secret']), written({ name })).name).toBe(name);
  });

  it('returns the record itself when nothing changes', () => {
    const record = written({ name: 'fx__tool', subject: 'fx/tool', reason: 'no', args: { text: 'x' }, stripped: ['a'], flow: { id: 'f', step: 's' } });
    expect(shownRecord(new Scrubber([LATER]), record)).toBe(record);
  });

  it('drops the start of a secret that ran across the cut of a name or a reason as written', () => {
    // Cut as the record stage cuts them, the secret unknown then: its first 8 characters stand before the mark.
    const name = cutName(`${'n'.repeat(RECORD_NAME_MAX_CHARS - 9)}${LATER}`);
    const reason = cutReason(`${'r'.repeat(292)}${LATER}`);
    expect(name).toContain(LATER.slice(0, 8));
    expect(reason).toContain(LATER.slice(0, 5));
    const shown = shownRecord(new Scrubber([LATER]), written({ name, subject: name, reason }));
    expect(shown.name).toMatch(/^n+…$/);
    expect(shown.subject).toBe(shown.name);
    expect(shown.reason).toMatch(/^r+\.\.\.$/);
  });

  it('drops as much before a cut whatever the characters are (regression: only a start of a secret was dropped, so a reader of their own records learnt a secret a character at a time)', () => {
    const scrubber = new Scrubber([LATER, 'opsTOKEN-Zq81mX04vR7']);
    // Two probes a caller could plant, cut alike: one ends in a start of a secret, one does not.
    const probe = (tail: string) => shownRecord(scrubber, written({ reason: cutReason(`${'r'.repeat(297 - tail.length)}${tail}${'x'.repeat(50)}`) })).reason!;
    for (const [hit, miss] of [['opsTOKEN-Z', 'opsTOKEN-Y'], ['l', 'q'], ['later-5c0e', 'later-5c0f']] as const) {
      expect(probe(hit).length).toBe(probe(miss).length);
    }
    // Nothing dropped without an exact secret known.
    const uncut = cutReason('r'.repeat(400));
    expect(shownRecord(new Scrubber(), written({ reason: uncut })).reason).toBe(uncut);
  });
  it('shows a line that is no whole record as it is (regression: a line put in the file by hand made GET /api/v1/calls answer 500)', () => {
    const planted = { callId: 'planted', ts: '2026-01-02T10:00:00.000Z', principal: 'local', outcome: 'ok' } as unknown as CallRecord;
    expect(shownRecord(new Scrubber([LATER]), planted)).toBe(planted);
    const odd = { ...planted, name: 7, unit: null, stripped: 'x', flow: 'y', reason: 1 } as unknown as CallRecord;
    expect(shownRecord(new Scrubber([LATER]), odd)).toBe(odd);
    for (const proposal of ['z', { path: 7 }, null]) {
      const other = { ...planted, proposal } as unknown as CallRecord;
      expect(shownRecord(new Scrubber([LATER]), other)).toBe(other);
    }
  });
});

describe('shownName', () => {
  it('is the name shownRecord shows', () => {
    const scrubber = new Scrubber([LATER]);
    expect(shownName(scrubber, `fx__tool-${LATER}`)).toBe(shownRecord(scrubber, written()).name);
  });
});
