/**
 * `estate__list_dir` checked each entry's identity against the broker's own files with one
 * `lstat`, then took the size shown from a second one: an entry replaced in between by a hard
 * link to the records file was listed with the records file's size. The size now comes from the
 * `lstat` that was checked.
 */
import { linkSync, renameSync, statSync, writeFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { brokerOwnPaths } from '../../src/builtins/estate/index.js';
import { makeEstate, type EstateFixture } from './estate-support.js';

/** Runs once, right after the next `lstat` of a path ending in `/race.txt` answers. */
let afterRaceLstat: (() => void) | undefined;
vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof fsp>();
  const lstat = async (path: Parameters<typeof real.lstat>[0], ...rest: unknown[]) => {
    const answer = await (real.lstat as (...a: unknown[]) => Promise<unknown>)(path, ...rest);
    if (String(path).endsWith('/race.txt') && afterRaceLstat) {
      const swap = afterRaceLstat;
      afterRaceLstat = undefined;
      swap();
    }
    return answer;
  };
  return { ...real, lstat, default: { ...real, lstat } };
});

let estate: EstateFixture;
beforeEach(() => {
  estate = makeEstate({
    reserved: (root) => {
      writeFileSync(join(root, 'calls.ndjson'), `${'{"principal":"alice","args":{"text":"ALICE-PRIVATE"}}\n'.repeat(37)}`);
      writeFileSync(join(root, 'race.txt'), 'harmless');
      return brokerOwnPaths({ dataDir: join(root, '..', 'data'), records: { path: join(root, 'calls.ndjson'), maxFiles: 3 } });
    },
  });
});
afterEach(async () => {
  await estate.close();
});

it("an entry swapped for a hard link to the records file while list_dir runs is not shown with the records file's size (it was)", async () => {
  const records = join(estate.root, 'calls.ndjson');
  afterRaceLstat = () => {
    linkSync(records, join(estate.root, 'race.tmp'));
    renameSync(join(estate.root, 'race.tmp'), join(estate.root, 'race.txt'));
  };
  const listed = await estate.run('estate__list_dir', { path: '.' }, 'bob');
  expect(afterRaceLstat).toBeUndefined(); // the swap happened
  expect(listed.outcome).toBe('ok');
  const entry = (listed.outcome === 'ok' ? (listed.result.structuredContent as { entries: { name: string; size?: number }[] }).entries : []).find((e) => e.name === 'race.txt');
  expect(entry?.size).not.toBe(statSync(records).size);
  expect(entry).toEqual({ name: 'race.txt', type: 'file', size: 'harmless'.length });
});
