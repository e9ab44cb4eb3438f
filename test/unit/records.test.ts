import fs, { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { afterAll, describe, expect, it } from 'vitest';
import { NdjsonRecordSink, type RecordSink } from '../../src/audit/records.js';
import { Broker } from '../../src/broker/broker.js';
import { invokeStage } from '../../src/broker/invoke.js';
import { recordStage } from '../../src/broker/record.js';
import type { Stage } from '../../src/broker/runner.js';
import { refuse, type CallerSession, type ToolTarget } from '../../src/broker/types.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';

const root = mkdtempSync(join(tmpdir(), 'mcp-broker-records-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshPath = () => join(root, `case-${++n}`, 'calls.ndjson');
const lines = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { i: number; pad?: string });

describe('NdjsonRecordSink', () => {
  it('group commit: appends that arrive during a write go out together, in order, each resolved once written', async () => {
    // Count event-loop turns: a sink writing one line per write needs a turn per line; group
    // commit resolves everything queued behind the first write in one go.
    let turn = 0;
    let spinning = true;
    const spin = () => {
      if (!spinning) return;
      turn++;
      setImmediate(spin);
    };
    spin();
    const path = freshPath();
    const sink = new NdjsonRecordSink({ path });
    const turns = await Promise.all(Array.from({ length: 200 }, (_, i) => sink.append({ i }).then(() => turn)));
    spinning = false;
    await sink.close();
    expect(lines(path).map((l) => l.i)).toEqual(Array.from({ length: 200 }, (_, i) => i));
    expect(new Set(turns).size).toBeLessThanOrEqual(5);
  });

  it('rotates past maxBytes, keeping maxFiles older files and dropping the oldest', async () => {
    const path = freshPath();
    const sink = new NdjsonRecordSink({ path, maxBytes: 300, maxFiles: 2 });
    const pad = 'x'.repeat(80); // each line is about 100 bytes: 3 fit in one file
    for (let i = 0; i < 20; i++) await sink.append({ i, pad });
    await sink.close();
    expect(existsSync(path)).toBe(true);
    expect(existsSync(`${path}.1`)).toBe(true);
    expect(existsSync(`${path}.2`)).toBe(true);
    expect(existsSync(`${path}.3`)).toBe(false);
    for (const p of [path, `${path}.1`, `${path}.2`]) expect(readFileSync(p).length).toBeLessThanOrEqual(300);
    const kept = [...lines(`${path}.2`), ...lines(`${path}.1`), ...lines(path)].map((l) => l.i);
    // The newest records, contiguous and in order, ending with the last one.
    expect(kept.at(-1)).toBe(19);
    for (let k = 1; k < kept.length; k++) expect(kept[k]).toBe(kept[k - 1]! + 1);
  });

  it('scrubs each record before it is written', async () => {
    const path = freshPath();
    const sink = new NdjsonRecordSink({ path, scrub: <T>(v: T) => JSON.parse(JSON.stringify(v).replaceAll('hunter2', '***')) as T });
    await sink.append({ i: 1, args: { password: 'hunter2' } });
    await sink.close();
    expect(readFileSync(path, 'utf8')).not.toContain('hunter2');
  });

  it('fails closed: an append that cannot be written rejects; the sink recovers once the file is writable', async () => {
    const path = freshPath();
    mkdirSync(path, { recursive: true }); // the file name is taken by a folder
    const sink = new NdjsonRecordSink({ path });
    await expect(sink.append({ i: 1 })).rejects.toThrow(/EISDIR|illegal operation/i);
    // Both must settle before the path is freed, or the second could land after the rm.
    const settled = await Promise.allSettled([sink.append({ i: 2 }), sink.append({ i: 3 })]);
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected']);
    rmSync(path, { recursive: true });
    await sink.append({ i: 4 });
    await sink.close();
    expect(lines(path).map((l) => l.i)).toEqual([4]);
    await expect(sink.append({ i: 5 })).rejects.toThrow(/closed/);
  });
});

describe('record stage through the broker', () => {
  const clock = new ManualClock();
  const session: CallerSession = { sessionId: 's1', principal: 'local', unit: 's1', isLive: () => true };
  const target: ToolTarget = { name: 'u__t', server: 'u', toolName: 't', state: 'active', source: 'upstream' };
  const upstreamResult: CallToolResult = { content: [{ type: 'text', text: 'the side effect happened' }], structuredContent: { a: 1 } };
  const dispatcher = { dispatch: async () => upstreamResult };
  const failing: RecordSink = { append: async () => Promise.reject(new Error('disk full')), close: async () => undefined };
  const request = (args: Record<string, unknown> = {}) => ({ name: 'u__t', args, signal: new AbortController().signal });
  const recordWith = (records: RecordSink) => recordStage({ records, clock, logger: silentLogger(), scrubArgs: (a) => a });

  it('writes exactly one record with the Contract fields before answering', async () => {
    const written: object[] = [];
    const sink: RecordSink = { append: async (r) => void written.push(r), close: async () => undefined };
    const broker = new Broker([recordWith(sink), invokeStage({ router: dispatcher })], clock);
    const answer = await broker.call(request({ q: 1 }), session, target);
    expect(answer.outcome).toBe('ok');
    expect(written).toHaveLength(1);
    expect(written[0]).toMatchObject({
      callId: answer.callId,
      sessionId: 's1',
      principal: 'local',
      unit: 's1',
      subject: 'u/t',
      name: 'u__t',
      outcome: 'ok',
      status: 200,
      attempts: 1,
      args: { q: 1 },
    });
    expect(written[0]).toHaveProperty('ts', new Date(clock.now()).toISOString());
    expect((written[0] as { bytesOut: number }).bytesOut).toBeGreaterThan(0);
    expect(answer.result.structuredContent).toEqual({ a: 1 });
  });

  it('a result whose record cannot be written is answered guard_error and withheld', async () => {
    const broker = new Broker([recordWith(failing), invokeStage({ router: dispatcher })], clock);
    const answer = await broker.call(request(), session, target);
    expect(answer.outcome).toBe('guard_error');
    expect(answer.status).toBe(500);
    expect(answer.record).toBeUndefined();
    expect(answer.result.isError).toBe(true);
    expect(JSON.stringify(answer.result)).not.toContain('the side effect happened');
    expect(answer.result.structuredContent).toBeUndefined();
    expect(answer.reason).toContain('record could not be written');
  });

  it('a refusal whose record cannot be written keeps its outcome', async () => {
    const deny: Stage = { name: 'judge', run: async (call) => refuse(call, 'denied', 'rule 1') };
    const broker = new Broker([recordWith(failing), deny, invokeStage({ router: dispatcher })], clock);
    const answer = await broker.call(request(), session, target);
    expect(answer.outcome).toBe('denied');
    expect(answer.result.isError).toBe(true);
  });
});
