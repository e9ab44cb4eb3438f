import { getEventListeners } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { followRecords } from '../../src/audit/follow.js';
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

describe('createLogger', () => {
  it('without a scrubber it crashed on its first line (hooks: undefined): now it logs', () => {
    const lines: string[] = [];
    const logger = createLogger({ level: 'info', stream: { write: (line: string) => void lines.push(line) } });
    expect(() => logger.info('a line')).not.toThrow();
    expect(JSON.parse(lines[0]!)).toMatchObject({ msg: 'a line' });
  });
});
