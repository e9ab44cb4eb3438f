import { getEventListeners } from 'node:events';
import { appendFileSync, mkdtempSync, renameSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { followRecords, RecordsFollower } from '../../src/audit/follow.js';
import { createLogger } from '../../src/shared/logger.js';

describe('followRecords', () => {
  it('calls --follow added an abort listener on every poll (MaxListenersExceededWarning): now one at most', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-follow-'));
    try {
      const path = join(dir, 'calls.ndjson');
      writeFileSync(path, '');
      const stop = new AbortController();
      let polls = 0;
      const seen: unknown[] = [];
      const done = followRecords(path, (r) => seen.push(r), { signal: stop.signal, pollMs: 1 });
      while (polls < 30) {
        await new Promise((r) => setTimeout(r, 2));
        polls++;
        expect(getEventListeners(stop.signal, 'abort').length).toBeLessThanOrEqual(1);
      }
      writeFileSync(path, '{"callId":"c1"}\n');
      await new Promise<void>((resolve) => {
        const check = () => (seen.length ? resolve() : setTimeout(check, 2));
        check();
      });
      stop.abort();
      await done;
      expect(seen).toEqual([{ callId: 'c1' }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('RecordsFollower (one look at a time, as calls --follow polls)', () => {
  const withDir = (fn: (dir: string) => void) => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-follow-'));
    try {
      fn(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  it('a rotation between two looks: what the old file got before it moved is read, then the new file from its start', () => {
    withDir((dir) => {
      const path = join(dir, 'calls.ndjson');
      writeFileSync(path, '{"n":1}\n');
      const follower = new RecordsFollower<{ n: number }>(path, 0);
      const seen: number[] = [];
      follower.poll((r) => seen.push(r.n));
      expect(seen).toEqual([1]);
      // The sink appends a batch, then rotates (rename, a new file at the path) before the next look.
      appendFileSync(path, '{"n":2}\n{"n":3}\n');
      renameSync(path, `${path}.1`);
      writeFileSync(path, '{"n":4}\n');
      follower.poll((r) => seen.push(r.n));
      appendFileSync(path, '{"n":5}\n');
      follower.poll((r) => seen.push(r.n));
      follower.close();
      expect(seen).toEqual([1, 2, 3, 4, 5]);
    });
  });

  it('a truncation in place (copytruncate) starts again at the beginning of the file', () => {
    withDir((dir) => {
      const path = join(dir, 'calls.ndjson');
      writeFileSync(path, '{"n":1}\n{"n":2}\n');
      const follower = new RecordsFollower<{ n: number }>(path, 0);
      const seen: number[] = [];
      follower.poll((r) => seen.push(r.n));
      truncateSync(path, 0);
      appendFileSync(path, '{"n":3}\n');
      follower.poll((r) => seen.push(r.n));
      follower.close();
      expect(seen).toEqual([1, 2, 3]);
    });
  });

  it('a line whose character is split across two writes is decoded whole (it was two U+FFFD)', () => {
    withDir((dir) => {
      const path = join(dir, 'calls.ndjson');
      writeFileSync(path, '');
      const follower = new RecordsFollower<{ t: string }>(path);
      const seen: string[] = [];
      const e = Buffer.from('é');
      appendFileSync(path, Buffer.concat([Buffer.from('{"t":"h'), e.subarray(0, 1)]));
      follower.poll((r) => seen.push(r.t));
      expect(seen).toEqual([]);
      appendFileSync(path, Buffer.concat([e.subarray(1), Buffer.from('llo"}\n')]));
      follower.poll((r) => seen.push(r.t));
      follower.close();
      expect(seen).toEqual(['héllo']);
    });
  });

  it('starts at the size it is given, and at the end of the file by default', () => {
    withDir((dir) => {
      const path = join(dir, 'calls.ndjson');
      writeFileSync(path, '{"n":1}\n{"n":2}\n');
      const fromEnd = new RecordsFollower<{ n: number }>(path);
      const fromSecond = new RecordsFollower<{ n: number }>(path, 8);
      appendFileSync(path, '{"n":3}\n');
      const a: number[] = [];
      const b: number[] = [];
      fromEnd.poll((r) => a.push(r.n));
      fromSecond.poll((r) => b.push(r.n));
      fromEnd.close();
      fromSecond.close();
      expect(a).toEqual([3]);
      expect(b).toEqual([2, 3]);
    });
  });
});

describe('createLogger', () => {
  it('without a scrubber it crashed on its first line (hooks: undefined): now it logs', () => {
    const lines: string[] = [];
    const logger = createLogger({ level: 'info', stream: { write: (line: string) => void lines.push(line) } });
    expect(() => logger.info('a line')).not.toThrow();
    expect(JSON.parse(lines[0]!)).toMatchObject({ msg: 'a line' });
  });
});
