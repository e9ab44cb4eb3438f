import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { NdjsonRecordSink, type RecordSink } from '../../src/audit/records.js';
import { RECORD_NAME_MAX_CHARS, recordStage, shownRecord } from '../../src/broker/record.js';
import { compose } from '../../src/broker/runner.js';
import { refuse } from '../../src/broker/types.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { REDACTED, Scrubber } from '../../src/shared/scrub.js';
import { call, fakeInvoke, target, text } from './support.js';

const root = mkdtempSync(join(tmpdir(), 'mcp-broker-record-stage-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const scrubber = new Scrubber(['planted-9c1d']);

function stage(records: RecordSink) {
  return recordStage({ records, clock: new ManualClock(), logger: silentLogger(), scrubArgs: (a) => scrubber.value(a), scrubText: (t) => scrubber.text(t) });
}

const failing: RecordSink = { append: async () => Promise.reject(new Error('EISDIR: illegal operation on a directory')), close: async () => undefined };

describe('record stage', () => {
  it('writes one scrubbed record per call before the answer', async () => {
    const path = join(root, 'one', 'calls.ndjson');
    const sink = new NdjsonRecordSink({ path });
    const run = compose([stage(sink), fakeInvoke((c) => refuse(c, 'upstream_error', 'failed near planted-9c1d'))]);
    const c = call({ target: target(), request: { args: { password: 'hunter22', note: 'planted-9c1d' } } });
    await run(c);
    await sink.close();
    const lines = readFileSync(path, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(1);
    const rec = JSON.parse(lines[0]!);
    expect(rec).toMatchObject({ outcome: 'upstream_error', status: 502, attempts: 1, subject: 'fx/echo', name: 'fx__echo', principal: 'local' });
    expect(lines[0]).not.toContain('hunter22');
    expect(lines[0]).not.toContain('planted-9c1d');
    expect(c.record).toEqual(rec);
  });

  it('fail closed: a result whose record cannot be written is guard_error, withheld, and says the side effect may have happened', async () => {
    const run = compose([stage(failing), fakeInvoke((c) => ((c.outcome = 'ok'), (c.result = text('done'))))]);
    const c = call({ target: target() });
    await run(c);
    expect(c.outcome).toBe('guard_error');
    expect(c.result).toBeUndefined();
    expect(c.bytesOut).toBe(0);
    expect(c.reason).toContain('could not be written');
    expect(c.reason).toContain('the upstream side effect may have happened');
    expect(c.record).toBeUndefined();
  });

  it("the sink's error in the guard_error reason goes to the caller scrubbed and cut (it is set outside the scrub stage)", async () => {
    const leaky: RecordSink = { append: async () => Promise.reject(new Error(`cannot write ${'d'.repeat(400)} near planted-9c1d`)), close: async () => undefined };
    const run = compose([stage(leaky), fakeInvoke((c) => ((c.outcome = 'ok'), (c.result = text('done'))))]);
    const c = call({ target: target() });
    await run(c);
    expect(c.outcome).toBe('guard_error');
    expect(c.reason).toContain('could not be written');
    expect(c.reason).not.toContain('planted-9c1d');
    expect(c.reason!.length).toBeLessThanOrEqual(300);
  });

  it('a refusal whose record cannot be written keeps its outcome (a deny is never re-labelled)', async () => {
    const run = compose([stage(failing), fakeInvoke((c) => refuse(c, 'denied', 'policy says no'))]);
    const c = call({ target: target() });
    await run(c);
    expect(c.outcome).toBe('denied');
  });

  it('an approval question (input_required) whose record cannot be written is not sent: the plain refusal is', async () => {
    const question = { resultType: 'input_required', inputRequests: { approve: { method: 'elicitation/create', params: {} } }, requestState: 'sealed' };
    const run = compose([stage(failing), fakeInvoke((c) => (refuse(c, 'approval_required', 'policy says ask'), (c.inputRequired = question as never)))]);
    const c = call({ target: target() });
    await run(c);
    expect(c.outcome).toBe('approval_required');
    expect(c.inputRequired).toBeUndefined();
  });

  it('a name megabytes long is recorded cut at RECORD_NAME_MAX_CHARS, after scrubbing', async () => {
    const path = join(root, 'long', 'calls.ndjson');
    const sink = new NdjsonRecordSink({ path });
    const run = compose([stage(sink), fakeInvoke((c) => refuse(c, 'unregistered', 'no such tool'))]);
    await run(call({ request: { name: `${'n'.repeat(RECORD_NAME_MAX_CHARS - 5)}planted-9c1d${'n'.repeat(1_000_000)}` } }));
    await sink.close();
    const rec = JSON.parse(readFileSync(path, 'utf8'));
    expect(rec.name).toHaveLength(RECORD_NAME_MAX_CHARS);
    expect(rec.name.endsWith('…')).toBe(true);
    expect(rec.name).not.toContain('plant');
    expect(rec.subject.length).toBeLessThanOrEqual(RECORD_NAME_MAX_CHARS);
  });

  it('carries the breaker state', async () => {
    const path = join(root, 'breaker', 'calls.ndjson');
    const sink = new NdjsonRecordSink({ path });
    const run = compose([stage(sink), fakeInvoke((c) => ((c.notes.breaker = 'open'), refuse(c, 'upstream_error', 'x')))]);
    await run(call({ target: target() }));
    await sink.close();
    expect(JSON.parse(readFileSync(path, 'utf8'))).toMatchObject({ breaker: 'open' });
  });

  it("writes an estate proposal's path scrubbed (regression: written as the caller gave it)", async () => {
    const path = join(root, 'proposal', 'calls.ndjson');
    const sink = new NdjsonRecordSink({ path });
    const proposal = { id: 'prop_0a1b2c', action: 'proposed' as const, path: 'notes/planted-9c1d.md' };
    const run = compose([stage(sink), fakeInvoke((c) => ((c.notes.proposal = proposal), (c.outcome = 'ok'), (c.result = text('stored'))))]);
    const c = call({ target: target() });
    await run(c);
    await sink.close();
    const line = readFileSync(path, 'utf8');
    expect(JSON.parse(line)).toMatchObject({ proposal: { id: 'prop_0a1b2c', action: 'proposed', path: `notes/${REDACTED}.md` } });
    expect(line).not.toContain('planted-9c1d');
    // The call's own note is left as the tool set it.
    expect(proposal.path).toBe('notes/planted-9c1d.md');
  });

  it('rotates at maxBytes keeping maxFiles, through the stage', async () => {
    const dir = join(root, 'rotate');
    mkdirSync(dir);
    const path = join(dir, 'calls.ndjson');
    const sink = new NdjsonRecordSink({ path, maxBytes: 1024, maxFiles: 2 });
    const run = compose([stage(sink), fakeInvoke()]);
    for (let i = 0; i < 30; i++) await run(call({ target: target(), request: { args: { i, pad: 'p'.repeat(100) } } }));
    await sink.close();
    expect(readdirSync(dir).sort()).toEqual(['calls.ndjson', 'calls.ndjson.1', 'calls.ndjson.2']);
    const all = ['calls.ndjson.2', 'calls.ndjson.1', 'calls.ndjson'].flatMap((f) =>
      readFileSync(join(dir, f), 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { args: { i: number } }).args.i),
    );
    expect(all.at(-1)).toBe(29);
    for (let k = 1; k < all.length; k++) expect(all[k]).toBe(all[k - 1]! + 1);
    for (const f of readdirSync(dir)) expect(readFileSync(join(dir, f)).length).toBeLessThanOrEqual(1024);
  });
});

describe('record stage and a secret added while the record is written', () => {
  it('hands on the record as shown (scrubbed again) and leaves the file as written (regression: published and streamed as built)', async () => {
    const later = `later-${'7e3a'.repeat(4)}`;
    const own = new Scrubber();
    const written: object[] = [];
    // The append is where a reload can come between building the record and publishing it.
    const sink: RecordSink = {
      append: async (record) => {
        written.push(structuredClone(record));
        own.addSecrets([later]);
      },
      close: async () => undefined,
    };
    const run = compose([
      recordStage({
        records: sink,
        clock: new ManualClock(),
        logger: silentLogger(),
        scrubArgs: (a) => own.value(a),
        scrubText: (t) => own.text(t),
        shown: { generation: () => own.generation, record: (r) => shownRecord(own, r) },
      }),
      fakeInvoke((c) => refuse(c, 'upstream_error', `failed near ${later}`)),
    ]);
    const c = call({ target: target(), request: { args: { note: later } } });
    await run(c);
    expect(JSON.stringify(written)).toContain(later);
    expect(JSON.stringify(c.record)).not.toContain(later);
    expect(c.record).toMatchObject({ reason: `failed near ${REDACTED}`, args: { note: REDACTED } });
  });
});
