/**
 * What an estate call costs in looking up the broker's own files: `broker.dataDir` was walked
 * (up to MAX_RESERVED_BELOW entries, one `lstat` each) on every call, ~0.4 s a call with 10,000
 * files in it. The set is now kept while the folders it was read from are unchanged (identity,
 * mtime and ctime of each), and read again when one changes, so a hard link made after it was
 * kept, a rotation, or a file added below dataDir is still caught.
 */
import { linkSync, mkdirSync, renameSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { brokerOwnPaths, EstateScope } from '../../src/builtins/estate/index.js';
import type { RouterOutcome } from '../../src/router/index.js';
import { makeEstate, type EstateFixture } from './estate-support.js';

/** Every `readdir` the estate makes, by the path it was given. */
const readdirs: string[] = [];
/** Runs once, right after the next `stat` of exactly this path answers. */
let afterStat: { path: string; run: () => void } | undefined;
vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof fsp>();
  const readdir = (path: Parameters<typeof real.readdir>[0], ...rest: unknown[]) => {
    readdirs.push(String(path));
    return (real.readdir as (...a: unknown[]) => unknown)(path, ...rest);
  };
  const stat = async (path: Parameters<typeof real.stat>[0], ...rest: unknown[]) => {
    const answer = await (real.stat as (...a: unknown[]) => Promise<unknown>)(path, ...rest);
    if (afterStat && String(path) === afterStat.path) {
      const { run } = afterStat;
      afterStat = undefined;
      run();
    }
    return answer;
  };
  return { ...real, readdir, stat, default: { ...real, readdir, stat } };
});

let estate: EstateFixture;
let data: string;
let logs: string;
/** Sets the folders the reserved set is read from an hour back, as folders untouched for a while are. */
const settle = () => {
  const old = new Date(Date.now() - 3_600_000);
  for (const folder of [data, join(data, 'backups'), logs]) utimesSync(folder, old, old);
};
beforeEach(() => {
  estate = makeEstate({
    reserved: (root) => {
      data = join(root, '..', 'data');
      logs = join(root, '..', 'logs');
      mkdirSync(join(data, 'backups'), { recursive: true });
      mkdirSync(logs);
      writeFileSync(join(data, 'broker.sqlite'), 'STORE-OF-EVERY-PRINCIPAL');
      for (let i = 0; i < 500; i++) writeFileSync(join(data, 'backups', `old-${i}.sqlite`), `OLD-STORE-${i}`);
      writeFileSync(join(logs, 'calls.ndjson'), '{"principal":"alice","args":{"text":"ALICE-PRIVATE"}}\n');
      return brokerOwnPaths({ dataDir: data, records: { path: join(logs, 'calls.ndjson'), maxFiles: 3 } });
    },
  });
  settle();
});
afterEach(async () => {
  await estate.close();
});

const refusal = (o: RouterOutcome) => (o.outcome === 'ok' ? JSON.stringify(o.result) : `${o.outcome}: ${o.message}`);
const idOf = (s: { dev: number; ino: number }) => `${s.dev}:${s.ino}`;
const walksOfData = () => readdirs.filter((p) => p.startsWith(data)).length;

describe("the broker's own files, looked up once while their folders are unchanged", () => {
  it('a second estate call does not walk broker.dataDir again (each call walked it: ~0.4 s with 10,000 files)', async () => {
    expect((await estate.run('estate__read_file', { path: 'a.txt' }, 'bob')).outcome).toBe('ok');
    const first = walksOfData();
    expect(first).toBeGreaterThan(0);
    for (let i = 0; i < 5; i++) expect((await estate.run('estate__read_file', { path: 'a.txt' }, 'bob')).outcome).toBe('ok');
    expect(walksOfData()).toBe(first);
    // A folder changed below dataDir: walked again, once.
    writeFileSync(join(data, 'backups', 'new.sqlite'), 'NEW-STORE');
    settle();
    await estate.run('estate__read_file', { path: 'a.txt' }, 'bob');
    const again = walksOfData();
    expect(again).toBeGreaterThan(first);
    await estate.run('estate__read_file', { path: 'a.txt' }, 'bob');
    expect(walksOfData()).toBe(again);
  });

  it('a hard link made after the set was kept is still refused (identities, not names)', async () => {
    await estate.run('estate__list_dir', { path: '.' }, 'bob');
    linkSync(join(data, 'broker.sqlite'), join(estate.root, 'store.db'));
    linkSync(join(logs, 'calls.ndjson'), join(estate.root, 'sub', 'notes.txt'));
    expect(refusal(await estate.run('estate__read_file', { path: 'store.db' }, 'bob'))).toContain("broker's own data");
    expect(refusal(await estate.run('estate__read_file', { path: 'sub/notes.txt' }, 'bob'))).toContain("broker's own data");
  });

  it('a records file rotated, and a file added below dataDir, after the set was kept: a hard link to the new ones is refused', async () => {
    await estate.run('estate__list_dir', { path: '.' }, 'bob');
    renameSync(join(logs, 'calls.ndjson'), join(logs, 'calls.ndjson.1'));
    writeFileSync(join(logs, 'calls.ndjson'), '{"principal":"alice","args":{"text":"ALICE-NEWER"}}\n');
    writeFileSync(join(data, 'backups', 'fresh.sqlite'), 'FRESH-STORE');
    linkSync(join(logs, 'calls.ndjson'), join(estate.root, 'new-records.txt'));
    linkSync(join(data, 'backups', 'fresh.sqlite'), join(estate.root, 'fresh.db'));
    for (const path of ['new-records.txt', 'fresh.db']) {
      expect(refusal(await estate.run('estate__read_file', { path }, 'bob')), path).toContain("broker's own data");
    }
    const found = await estate.run('estate__search', { path: '.', query: 'ALICE-NEWER' }, 'bob');
    expect(found.outcome === 'ok' ? found.result.structuredContent : undefined).toMatchObject({ hits: [] });
  });

  it('a reserved file replaced while the set is read is not kept with its old identity (its folder was marked after the file was looked at)', async () => {
    const records = join(logs, 'calls.ndjson');
    const scope = new EstateScope(estate.root, [records]);
    // The records file rotated right after its identity was taken, its folder then untouched for an hour.
    afterStat = {
      path: records,
      run: () => {
        renameSync(records, join(logs, 'calls.ndjson.1'));
        writeFileSync(records, 'ALICE-NEWER\n');
        settle();
      },
    };
    await scope.reservedNow();
    expect(afterStat).toBeUndefined();
    expect((await scope.reservedNow()).ids.has(idOf(statSync(records)))).toBe(true);
  });
});
