/**
 * `TaskEngine.decide` told its `status` listeners (`notifications/tasks/status`, task listens) the
 * row as stored, where every other status event carries the row as readers are shown it
 * (`TaskEngineDeps.shown`): an approved row keeps the reason it parked with, stored before a
 * reload may have made part of it a secret. A real engine on an in-memory store and a manual clock.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { Scrubber } from '../../src/shared/scrub.js';
import { SqliteStore, type TaskRow } from '../../src/store/index.js';
import { scrubbedTaskRow, TaskEngine } from '../../src/tasks/index.js';

const LATER = 'later-3a9f0c6d21e8';

let engine: TaskEngine | undefined;
afterEach(async () => engine?.stop());

describe('TaskEngine.decide', () => {
  it("tells status listeners the decided row as readers are shown it (regression: the row as stored, its parked reason unscrubbed)", async () => {
    const clock = new ManualClock();
    const store = SqliteStore.open(':memory:');
    // The value became a secret after the row was stored.
    const scrubber = new Scrubber([LATER]);
    engine = new TaskEngine({
      store,
      clock,
      logger: silentLogger(),
      run: () => new Promise(() => undefined),
      scrubArgs: (a) => a,
      shown: (row) => scrubbedTaskRow(scrubber, row),
      ttlMs: 60_000,
      maxTtlMs: 120_000,
      askMode: () => 'park',
    });
    const at = new Date(clock.now()).toISOString();
    await store.addTask({
      id: 'p1', status: 'parked', stoppedBy: null, owner: 'gone', principal: 'alice', unit: 'u', sessionId: '', subject: 'u/echo', name: 'u__echo',
      args: { text: LATER }, argsRedacted: false, result: null, reason: `waiting for approval: policy.rules[0] (u__echo, zz-${LATER}) says ask`,
      callId: '', approvedBy: null, createdAt: at, updatedAt: at, ttlMs: 60_000,
    });
    const told: TaskRow[] = [];
    engine.on('status', (row: TaskRow) => told.push(row));
    await engine.decide('p1', { approve: true, by: 'ops' });
    expect(told.length).toBeGreaterThan(0);
    expect(told[0]).toMatchObject({ id: 'p1', status: 'parked', approvedBy: 'ops' });
    for (const row of told) expect(JSON.stringify(row)).not.toContain(LATER);
  });
});
