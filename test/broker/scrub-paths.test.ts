/**
 * Secrets around a call (issue 12 item 6), at the stage level: progress messages pass the scrub
 * stage on their way to the client, and the record (written, published, streamed) holds no
 * secret in the caller-given name, subject or unit.
 */
import { describe, expect, it } from 'vitest';
import type { RecordSink } from '../../src/audit/records.js';
import { recordStage } from '../../src/broker/record.js';
import { compose } from '../../src/broker/runner.js';
import { scrubStage } from '../../src/broker/scrub.js';
import type { ProgressUpdate } from '../../src/upstream/types.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { REDACTED, Scrubber } from '../../src/shared/scrub.js';
import { call, fakeInvoke, session, text } from './support.js';

const SECRET = 'planted-env-secret-51c0';
const scrubber = new Scrubber([SECRET]);

describe('secrets around a call', () => {
  it('issue 12: a progress message holding the secret reaches the client scrubbed', async () => {
    const seen: ProgressUpdate[] = [];
    const c = call({ request: { onProgress: (u) => seen.push(u) } });
    c.onProgress = c.request.onProgress;
    const run = compose([
      scrubStage({ scrubber }),
      fakeInvoke((inner) => {
        inner.onProgress?.({ progress: 1, total: 2, message: `halfway with ${SECRET}` });
        inner.onProgress?.({ progress: 2 });
        inner.outcome = 'ok';
        inner.result = text('done');
      }),
    ]);
    await run(c);
    expect(seen).toEqual([{ progress: 1, total: 2, message: `halfway with ${REDACTED}` }, { progress: 2 }]);
  });

  it('issue 12: an unknown tool name or a unit holding the secret is scrubbed in the record (name, subject, unit)', async () => {
    const written: object[] = [];
    const sink: RecordSink = { append: async (r) => void written.push(r), close: async () => undefined };
    const stage = recordStage({ records: sink, clock: new ManualClock(), logger: silentLogger(), scrubArgs: (a) => scrubber.value(a), scrubText: (t) => scrubber.text(t) });
    const c = call({ request: { name: `nope-${SECRET}` }, session: session({ unit: `unit-${SECRET}` }) });
    await compose([stage, fakeInvoke((inner) => ((inner.outcome = 'unregistered'), (inner.reason = `no tool named "nope-${SECRET}"`)))])(c);
    expect(JSON.stringify(written)).not.toContain(SECRET);
    expect(written[0]).toMatchObject({ name: `nope-${REDACTED}`, subject: `?/nope-${REDACTED}`, unit: `unit-${REDACTED}` });
    expect(c.record).toBe(written[0]);
  });
});
