/**
 * A call record as a reader is shown it (audit/scrubbed-record.ts): every field scrubbed with the
 * scrubber's secrets of now, as the record stage scrubbed them when it was written.
 */
import { describe, expect, it } from 'vitest';
import { scrubbedCallRecord, scrubbedRecordFields } from '../../src/audit/scrubbed-record.js';
import { RECORD_NAME_MAX_CHARS, cutName } from '../../src/broker/record.js';
import { cutReason } from '../../src/broker/failure.js';
import { REDACTED, Scrubber } from '../../src/shared/scrub.js';

const LATER = 'later-5c0e8d21f7a9';

const written = (more: Record<string, unknown> = {}) => ({
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

describe('scrubbedCallRecord', () => {
  it('scrubs every field with the secrets of now, keeping the shape and the fields that hold none', () => {
    const record = written();
    const shown = scrubbedCallRecord(new Scrubber([LATER]), record);
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

  it('keeps the session id, though its field name names a credential, and redacts a credential-named argument whole', () => {
    const record = written({ args: { api_key: 'plain-value', text: 'hello' } });
    const shown = scrubbedCallRecord(new Scrubber(), record);
    expect(shown.sessionId).toBe('session-4b55');
    expect(shown.args).toEqual({ api_key: REDACTED, text: 'hello' });
  });

  it('returns the record itself when nothing changes', () => {
    const record = written({ name: 'fx__tool', subject: 'fx/tool', reason: 'no', args: { text: 'x' }, stripped: ['a'], flow: { id: 'f', step: 's' } });
    expect(scrubbedCallRecord(new Scrubber([LATER]), record)).toBe(record);
  });

  it('drops the start of a secret that ran across the cut of a name or a reason as written', () => {
    // Cut as the record stage cuts them, the secret unknown then: its first 8 characters stand before the mark.
    const name = cutName(`${'n'.repeat(RECORD_NAME_MAX_CHARS - 9)}${LATER}`);
    const reason = cutReason(`${'r'.repeat(292)}${LATER}`);
    expect(name).toContain(LATER.slice(0, 8));
    expect(reason).toContain(LATER.slice(0, 5));
    const shown = scrubbedCallRecord(new Scrubber([LATER]), written({ name, subject: name, reason }));
    expect(shown.name).toBe(`${'n'.repeat(RECORD_NAME_MAX_CHARS - 9)}…`);
    expect(shown.subject).toBe(shown.name);
    expect(shown.reason).toBe(`${'r'.repeat(292)}...`);
  });
});

describe('scrubbedRecordFields', () => {
  it('scrubs the fields named and leaves the others as written', () => {
    const record = written();
    const some = scrubbedRecordFields(new Scrubber([LATER]), record, ['name', 'absent']);
    expect(some.name).toBe(`fx__tool-${REDACTED}`);
    expect(some.subject).toBe(record.subject);
    expect(some.args).toBe(record.args);
    expect(some).not.toHaveProperty('absent');
  });
});
