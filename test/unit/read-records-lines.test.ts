/**
 * `readRecords` (audit/query.ts) ends a line at `\n` only, as the records writer does. It read
 * through `node:readline`, which on Node 24 also ends a line at U+2028 and U+2029 (Node 20 does
 * not): JSON leaves both raw in a string, so on Node 24 a record whose tool name (a caller's
 * choice) held one came apart into pieces that do not parse and was skipped, hidden from `calls`
 * and `GET /api/v1/calls` (CI's Node 24 run: test/e2e/cli-tables.test.ts found "no calls match").
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readRecords } from '../../src/audit/query.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function all(text: string): Promise<Record<string, unknown>[]> {
  const dir = mkdtempSync(join(tmpdir(), 'read-records-'));
  dirs.push(dir);
  const file = join(dir, 'calls.ndjson');
  writeFileSync(file, text);
  const read: Record<string, unknown>[] = [];
  for await (const record of readRecords([file])) read.push(record);
  return read;
}

describe('readRecords lines', () => {
  it('a record holding U+2028, U+2029, U+0085, VT and FF in a string is one record (regression: split on Node 24)', async () => {
    const odd = 'ec\u2028ho\u2029x\u0085y\u000bz\u000c';
    const text = [{ n: 1, name: odd }, { n: 2, name: 'plain' }].map((r) => JSON.stringify(r) + '\n').join('');
    expect(text).toContain('\u2028');
    expect(await all(text)).toEqual([
      { n: 1, name: odd },
      { n: 2, name: 'plain' },
    ]);
  });

  it('a line longer than a read chunk, a CRLF line, a torn last line and blank lines: each whole record once, the torn one skipped', async () => {
    const long = 'x'.repeat(300_000);
    const text = `${JSON.stringify({ n: 1, long })}\n\n${JSON.stringify({ n: 2 })}\r\n${JSON.stringify({ n: 3, long })}\n{"n":4,"torn`;
    const read = await all(text);
    expect(read.map((r) => r.n)).toEqual([1, 2, 3]);
    expect(read[0]!.long).toBe(long);
    expect(read[2]!.long).toBe(long);
  });
});
