import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseCallsQuery, queryCalls, type CallsQuery } from '../../src/transports/http/calls-query.js';
import { Scrubber } from '../../src/shared/scrub.js';

const record = (i: number, more: Record<string, unknown> = {}) =>
  JSON.stringify({
    ts: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
    callId: `c${i}`,
    sessionId: 's',
    principal: i % 2 ? 'alice' : 'bob',
    unit: 'u',
    subject: 'echo/echo',
    name: 'echo__echo',
    outcome: i % 3 === 0 ? 'denied' : 'ok',
    status: 200,
    durationMs: 1,
    attempts: 1,
    bytesOut: 1,
    args: {},
    ...more,
  });

/** A scrubber with no exact secret: the records here hold none of its patterns. */
const NONE = new Scrubber();

let dir: string | undefined;
afterEach(() => dir && rmSync(dir, { recursive: true, force: true }));

function q(partial: Partial<CallsQuery>): CallsQuery {
  return { outcomes: [], limit: 100, ...partial };
}

describe('parseCallsQuery', () => {
  it('parses outcome lists, tool, since and limit', () => {
    expect(parseCallsQuery({ outcome: 'ok,denied', tool: 'echo__echo', since: '2026-01-01T00:00:00Z', limit: '5' })).toEqual({
      outcomes: ['ok', 'denied'],
      tool: 'echo__echo',
      since: Date.parse('2026-01-01T00:00:00Z'),
      limit: 5,
    });
    expect(parseCallsQuery({ outcome: ['ok', 'timeout'], since: '1700000000000' })).toMatchObject({ outcomes: ['ok', 'timeout'], since: 1_700_000_000_000, limit: 100 });
  });

  it('refuses bad values', () => {
    expect(parseCallsQuery({ limit: '0' })).toHaveProperty('error');
    expect(parseCallsQuery({ limit: '1001' })).toHaveProperty('error');
    expect(parseCallsQuery({ limit: 'x' })).toHaveProperty('error');
    expect(parseCallsQuery({ since: 'last tuesday' })).toHaveProperty('error');
    expect(parseCallsQuery({ outcome: 'ok,bogus' })).toEqual({ error: expect.stringContaining('unknown outcome "bogus"') });
    // A repeated tool was taken as no filter at all: every record the caller may see.
    expect(parseCallsQuery({ tool: ['nothing-matches', 'nothing-either'] })).toEqual({ error: 'tool may be given once' });
    expect(parseCallsQuery({ since: ['1h', '2h'] })).toEqual({ error: 'since may be given once' });
    expect(parseCallsQuery({ limit: ['1', '2'] })).toEqual({ error: 'limit may be given once' });
  });

  it('reads since as a duration back, like `mcp-broker calls --since`', () => {
    const now = Date.parse('2026-11-30T03:00:00Z');
    expect(parseCallsQuery({ since: '15m' }, now)).toMatchObject({ since: now - 15 * 60_000 });
  });
});

describe('queryCalls', () => {
  it('reads rotated files oldest first, filters, keeps the newest `limit`, skips torn lines', async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-calls-'));
    const path = join(dir, 'calls.ndjson');
    writeFileSync(`${path}.2`, [1, 2, 3].map((i) => record(i)).join('\n') + '\n');
    writeFileSync(`${path}.1`, [4, 5, 6].map((i) => record(i)).join('\n') + '\n');
    writeFileSync(path, [7, 8, 9].map((i) => record(i)).join('\n') + '\n{"torn":');
    const all = await queryCalls(path, 5, q({}), NONE);
    expect(all.map((r) => r.callId)).toEqual(['c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8', 'c9']);
    expect((await queryCalls(path, 5, q({ limit: 2 }), NONE)).map((r) => r.callId)).toEqual(['c8', 'c9']);
    expect((await queryCalls(path, 5, q({ outcomes: ['denied'] }), NONE)).map((r) => r.callId)).toEqual(['c3', 'c6', 'c9']);
    expect((await queryCalls(path, 5, q({ principal: 'alice' }), NONE)).every((r) => r.principal === 'alice')).toBe(true);
    expect((await queryCalls(path, 5, q({ since: Date.UTC(2026, 0, 1, 0, 0, 8) }), NONE)).map((r) => r.callId)).toEqual(['c8', 'c9']);
    expect(await queryCalls(path, 5, q({ tool: 'other' }), NONE)).toEqual([]);
    expect((await queryCalls(path, 5, q({ tool: 'echo/echo' }), NONE)).length).toBe(9);
    // `tool` is a glob over the advertised name or the subject, as `mcp-broker calls --tool` (issue 18 §6).
    expect((await queryCalls(path, 5, q({ tool: 'echo__*' }), NONE)).length).toBe(9);
    expect((await queryCalls(path, 5, q({ tool: 'echo/*' }), NONE)).length).toBe(9);
    expect(await queryCalls(path, 5, q({ tool: 'other__*' }), NONE)).toEqual([]);
  });

  it('orders by the time calls started: a parked call, written when it settled, sits at its start', async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-calls-'));
    const path = join(dir, 'calls.ndjson');
    // c1 parked on an approval and settled last; c3 and its tie c3b keep the order written.
    writeFileSync(path, [record(2), record(3), record(1), record(3, { callId: 'c3b' })].join('\n') + '\n');
    expect((await queryCalls(path, 5, q({}), NONE)).map((r) => r.callId)).toEqual(['c1', 'c2', 'c3', 'c3b']);
    expect((await queryCalls(path, 5, q({ limit: 3 }), NONE)).map((r) => r.callId)).toEqual(['c2', 'c3', 'c3b']);
    expect((await queryCalls(path, 5, q({ limit: 1 }), NONE)).map((r) => r.callId)).toEqual(['c3b']);
  });

  it('answers each record scrubbed with the secrets of now and matches the filters against it as shown (regression: as written, a tool pattern told a hidden value)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-calls-'));
    const path = join(dir, 'calls.ndjson');
    const later = 'later-91d2c4e07b3a';
    // Written before `later` was a secret.
    writeFileSync(path, [record(1, { name: `nope-${later}`, subject: `?/nope-${later}`, args: { text: later } }), record(2)].join('\n') + '\n');
    const scrubber = new Scrubber([later]);
    const all = await queryCalls(path, 5, q({}), scrubber);
    expect(JSON.stringify(all)).not.toContain(later);
    expect(all[0]).toMatchObject({ name: 'nope-[REDACTED]', subject: '?/nope-[REDACTED]', args: { text: '[REDACTED]' } });
    expect(await queryCalls(path, 5, q({ tool: 'nope-l*' }), scrubber)).toEqual([]);
    expect(await queryCalls(path, 5, q({ tool: '?/nope-l*' }), scrubber)).toEqual([]);
    expect((await queryCalls(path, 5, q({ tool: 'nope-*' }), scrubber)).map((r) => r.callId)).toEqual(['c1']);
    expect((await queryCalls(path, 5, q({ tool: 'nope-?REDACTED?' }), scrubber)).map((r) => r.callId)).toEqual(['c1']);
    // The visibility rule reads the record as written: alice still sees her own.
    expect((await queryCalls(path, 5, q({ principal: 'alice' }), scrubber)).map((r) => r.callId)).toEqual(['c1']);
  });

  it('answers nothing when there is no records file', async () => {
    expect(await queryCalls(join(tmpdir(), 'no-such-dir-xyz', 'calls.ndjson'), 5, q({}), NONE)).toEqual([]);
  });
});
