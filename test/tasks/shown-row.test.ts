/**
 * A stored task row as a reader is shown it (`scrubbedTaskRow`): its `name`, `subject` and
 * `principal` were shown as stored, unscrubbed, where the call's record shows its `name` and
 * `subject` scrubbed again with the secrets of now; and its reason, cut as its call's record's
 * is, kept the start of a secret that ran across the cut. Rows are matched by the principal as
 * stored (a principal's own rows), never as shown. A real Scrubber; a real engine on an
 * in-memory store and a manual clock.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_REASON_CHARS } from '../../src/broker/failure.js';
import type { CallRecord } from '../../src/broker/types.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { REDACTED, Scrubber } from '../../src/shared/scrub.js';
import { SqliteStore, type TaskRow } from '../../src/store/index.js';
import { scrubbedTaskRow, TaskEngine } from '../../src/tasks/index.js';

const LATER = 'later-5c0e7b19a4d2';
const OWNER = `team-${LATER}`;
const AT = '2026-12-01T10:00:00.000Z';

function row(over: Partial<TaskRow> = {}): TaskRow {
  return {
    id: 'p1', status: 'parked', stoppedBy: null, owner: 'gone', principal: OWNER, unit: `u-${LATER}`, sessionId: 's1',
    subject: `fx/tool-${LATER}`, name: `fx__tool-${LATER}`, args: { text: 'hello' }, argsRedacted: false, result: null,
    reason: 'policy says ask', callId: '', approvedBy: null, recordOwed: true, createdAt: AT, updatedAt: AT, ttlMs: 60_000,
    ...over,
  };
}

describe('scrubbedTaskRow', () => {
  it('shows name, subject, unit and principal scrubbed with the secrets of now (regression: shown as stored)', () => {
    const shown = scrubbedTaskRow(new Scrubber([LATER]), row());
    expect(shown).toMatchObject({ name: `fx__tool-${REDACTED}`, subject: `fx/tool-${REDACTED}`, unit: `u-${REDACTED}`, principal: `team-${REDACTED}` });
    expect(JSON.stringify(shown)).not.toContain(LATER);
  });

  it('keeps ids, times, states, owner and approvedBy as stored', () => {
    const stored = row({ id: `id-${LATER}`, callId: `c-${LATER}`, sessionId: `s-${LATER}`, owner: `i-${LATER}`, approvedBy: `ops-${LATER}`, createdAt: LATER, updatedAt: LATER });
    const shown = scrubbedTaskRow(new Scrubber([LATER]), stored);
    for (const key of ['id', 'callId', 'sessionId', 'owner', 'approvedBy', 'createdAt', 'updatedAt', 'status', 'stoppedBy', 'ttlMs'] as const) expect(shown[key]).toBe(stored[key]);
  });

  it('drops the start of a secret that ran across the cut of a reason cut as its record is (regression: shown)', () => {
    // The reason as the scrub stage cut it: 300 characters, `...` last, the secret's first 8 characters before it.
    const reason = `${'r'.repeat(MAX_REASON_CHARS - 3 - 8)}${LATER.slice(0, 8)}...`;
    expect(reason).toHaveLength(MAX_REASON_CHARS);
    const shown = scrubbedTaskRow(new Scrubber([LATER]), row({ reason })).reason!;
    expect(shown.endsWith('...')).toBe(true);
    expect(shown).not.toContain(LATER.slice(0, 4));
    // An uncut reason is scrubbed as it is.
    expect(scrubbedTaskRow(new Scrubber([LATER]), row({ reason: `why ${LATER}` })).reason).toBe(`why ${REDACTED}`);
  });

  it('is the row itself when nothing changes', () => {
    const stored = row({ principal: 'alice', unit: 'u', subject: 'fx/tool', name: 'fx__tool' });
    expect(scrubbedTaskRow(new Scrubber([LATER]), stored)).toBe(stored);
  });
});

describe('TaskEngine rows shown scrubbed', () => {
  let engine: TaskEngine | undefined;
  afterEach(async () => engine?.stop());

  it("matches a principal's own rows by the principal as stored, shows them scrubbed, and records from the row as stored", async () => {
    const clock = new ManualClock(Date.parse(AT));
    const store = SqliteStore.open(':memory:');
    const scrubber = new Scrubber([LATER]);
    const records: CallRecord[] = [];
    engine = new TaskEngine({
      store,
      clock,
      logger: silentLogger(),
      run: () => new Promise(() => undefined),
      record: async (r) => void records.push(r),
      scrubArgs: (a) => a,
      shown: (r) => scrubbedTaskRow(scrubber, r),
      ttlMs: 60_000,
      maxTtlMs: 120_000,
      askMode: () => 'park',
    });
    await store.addTask(row());
    const told: TaskRow[] = [];
    engine.on('status', (r: TaskRow) => told.push(r));

    expect(await engine.get('p1', OWNER)).toMatchObject({ id: 'p1', principal: `team-${REDACTED}`, name: `fx__tool-${REDACTED}` });
    expect((await engine.list(OWNER)).items.map((r) => [r.id, r.principal])).toEqual([['p1', `team-${REDACTED}`]]);
    // The value shown is no principal's: it matches nothing; nor does another principal.
    for (const other of [`team-${REDACTED}`, 'bob']) {
      expect(await engine.get('p1', other)).toBeUndefined();
      expect((await engine.list(other)).items).toEqual([]);
      await expect(engine.cancel('p1', other)).rejects.toThrow(/no task/);
    }

    const cancelled = await engine.cancel('p1', OWNER);
    expect(cancelled).toMatchObject({ id: 'p1', status: 'killed', principal: `team-${REDACTED}` });
    expect(told.length).toBeGreaterThan(0);
    for (const r of told) expect(JSON.stringify(r)).not.toContain(LATER);
    // The record the cancelled parked row owed: its principal as stored (what records are matched by).
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ principal: OWNER, outcome: 'cancelled' });
  });
});
