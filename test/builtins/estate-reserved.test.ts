/**
 * The broker's own files inside an estate root (`"root": "."` beside the default `./data`):
 * `broker.dataDir` and the records file with its lock and rotations are refused to every estate
 * tool, read or write, and not listed or searched (one principal read another's records and
 * stored state through `estate__read_file`).
 */
import { linkSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { brokerOwnPaths, EstateScope } from '../../src/builtins/estate/index.js';
import { MAX_RESERVED_BELOW } from '../../src/builtins/estate/scope.js';
import type { RouterOutcome } from '../../src/router/index.js';
import { makeEstate, type EstateFixture } from './estate-support.js';

let estate: EstateFixture;
beforeEach(() => {
  estate = makeEstate({
    operators: ['ops'],
    reserved: (root) => {
      mkdirSync(join(root, 'data'));
      writeFileSync(join(root, 'data', 'broker.sqlite'), 'STORE-OF-EVERY-PRINCIPAL');
      writeFileSync(join(root, 'calls.ndjson'), '{"principal":"alice","args":{"text":"ALICE-PRIVATE"}}\n');
      writeFileSync(join(root, 'calls.ndjson.1'), '{"principal":"alice","args":{"text":"ALICE-OLDER"}}\n');
      return brokerOwnPaths({ dataDir: join(root, 'data'), records: { path: join(root, 'calls.ndjson'), maxFiles: 3 } });
    },
  });
});
afterEach(async () => {
  await estate.close();
});

const refusal = (o: RouterOutcome) => (o.outcome === 'ok' ? JSON.stringify(o.result) : `${o.outcome}: ${o.message}`);

describe("the broker's own files inside the estate root", () => {
  it('are refused to read_file and stat, by name, under another spelling and through a symlink', async () => {
    const { symlinkSync } = await import('node:fs');
    symlinkSync('calls.ndjson', join(estate.root, 'records-link'));
    for (const [tool, path] of [
      ['estate__read_file', 'calls.ndjson'],
      ['estate__read_file', './calls.ndjson'],
      ['estate__read_file', 'calls.ndjson.1'],
      ['estate__read_file', 'records-link'],
      ['estate__read_file', 'data/broker.sqlite'],
      ['estate__stat', 'data'],
      ['estate__list_dir', 'data'],
      ['estate__search', 'data'],
    ] as const) {
      const answer = refusal(await estate.run(tool, { path, ...(tool === 'estate__search' ? { query: 'a' } : {}) }, 'bob'));
      expect(answer, `${tool} ${path}`).toContain("broker's own data");
      expect(answer).not.toMatch(/ALICE|STORE-OF/);
    }
  });

  it('a symlink to one of them is listed as any symlink is (one leaving the root too): name and type only, no target, no size; reading through it is refused', async () => {
    const { symlinkSync } = await import('node:fs');
    symlinkSync('calls.ndjson', join(estate.root, 'records-link'));
    symlinkSync('data/broker.sqlite', join(estate.root, 'store-link'));
    const listed = await estate.run('estate__list_dir', { path: '.' }, 'bob');
    const entries = (listed.outcome === 'ok' ? (listed.result.structuredContent as { entries: { name: string }[] }).entries : []).filter((e) =>
      ['records-link', 'store-link', 'link-out', 'abs-link', 'dangling'].includes(e.name),
    );
    expect(entries).toEqual(['abs-link', 'dangling', 'link-out', 'records-link', 'store-link'].map((name) => ({ name, type: 'symlink' })));
    expect(JSON.stringify(listed)).not.toMatch(/calls\.ndjson|broker\.sqlite|ALICE|STORE-OF/);
    for (const path of ['records-link', 'store-link']) expect(refusal(await estate.run('estate__read_file', { path }, 'bob'))).toContain("broker's own data");
  });

  it('are left out of list_dir and search; everything else is there', async () => {
    const listed = await estate.run('estate__list_dir', { path: '.' }, 'bob');
    const names = (listed.outcome === 'ok' ? (listed.result.structuredContent as { entries: { name: string }[] }).entries : []).map((e) => e.name);
    expect(names).toContain('a.txt');
    expect(names).not.toContain('data');
    expect(names).not.toContain('calls.ndjson');
    expect(names).not.toContain('calls.ndjson.1');
    const found = await estate.run('estate__search', { path: '.', query: 'principal' }, 'bob');
    expect(JSON.stringify(found)).not.toMatch(/ALICE|calls\.ndjson/);
  });

  it('a hard link to the records file under another name is not searched, and the files are found once per search (search skipped them by name only)', async () => {
    linkSync(join(estate.root, 'calls.ndjson'), join(estate.root, 'sub', 'deeper', 'notes.txt'));
    const found = vi.spyOn(EstateScope.prototype, 'reservedNow');
    try {
      const answer = await estate.run('estate__search', { path: '.', query: 'ALICE' }, 'bob');
      expect(answer.outcome).toBe('ok');
      expect(JSON.stringify(answer)).not.toMatch(/ALICE-PRIVATE|notes\.txt/);
      expect(found).toHaveBeenCalledTimes(1);
    } finally {
      found.mockRestore();
    }
    expect(refusal(await estate.run('estate__read_file', { path: 'sub/deeper/notes.txt' }, 'bob'))).toContain("broker's own data");
    const near = await estate.run('estate__search', { path: 'sub', query: 'charlie' }, 'bob');
    expect(JSON.stringify(near)).toContain('deeper/c.txt');
  });

  it('a hard link to the records file or to the store under another name is left out of list_dir, as the files themselves are (it was listed with its size)', async () => {
    linkSync(join(estate.root, 'calls.ndjson'), join(estate.root, 'sub', 'deeper', 'notes.txt'));
    linkSync(join(estate.root, 'data', 'broker.sqlite'), join(estate.root, 'sub', 'store.db'));
    const listing = async (path: string) => {
      const listed = await estate.run('estate__list_dir', { path }, 'bob');
      expect(listed.outcome, path).toBe('ok');
      return (listed.outcome === 'ok' ? listed.result.structuredContent : {}) as { entries: { name: string }[]; total: number };
    };
    expect(await listing('sub/deeper')).toMatchObject({ entries: [{ name: 'c.txt', type: 'file', size: 8 }], total: 1 });
    expect((await listing('sub')).entries.map((e) => e.name)).toEqual(['b.txt', 'deeper', 'up']);
    expect((await listing('.')).entries.map((e) => e.name)).not.toEqual(expect.arrayContaining(['calls.ndjson', 'calls.ndjson.1', 'data']));
  });

  it('a hard link to the store (a file in broker.dataDir) under another name is refused to read_file and stat, and not searched (it was read: only the folder was known)', async () => {
    linkSync(join(estate.root, 'data', 'broker.sqlite'), join(estate.root, 'sub', 'store.db'));
    expect(refusal(await estate.run('estate__read_file', { path: 'sub/store.db' }, 'bob'))).toContain("broker's own data");
    expect(refusal(await estate.run('estate__stat', { path: 'sub/store.db' }, 'bob'))).toContain("broker's own data");
    const found = await estate.run('estate__search', { path: '.', query: 'STORE-OF' }, 'bob');
    expect(found.outcome === 'ok' ? found.result.structuredContent : undefined).toMatchObject({ hits: [] });
    expect(JSON.stringify(found)).not.toMatch(/EVERY-PRINCIPAL|store\.db/);
  });

  it('a hard link to the store is refused when broker.dataDir holds more than MAX_RESERVED_BELOW other entries walked before it (the walk stopped short of the store: it was read)', async () => {
    const data = join(estate.root, 'data');
    // A folder of backups that readdir lists before the store, so the walk spends its budget there first.
    let bulk: string | undefined;
    for (let i = 0; i < 200 && !bulk; i++) {
      const name = `backups-${i}`;
      mkdirSync(join(data, name));
      const order = readdirSync(data);
      if (order.indexOf(name) < order.indexOf('broker.sqlite')) bulk = name;
      else rmdirSync(join(data, name));
    }
    expect(bulk).toBeDefined();
    for (let i = 0; i < MAX_RESERVED_BELOW; i++) writeFileSync(join(data, bulk!, `old-${i}.sqlite`), '');
    linkSync(join(data, 'broker.sqlite'), join(estate.root, 'sub', 'store.db'));
    expect(refusal(await estate.run('estate__read_file', { path: 'sub/store.db' }, 'bob'))).toContain("broker's own data");
  });

  it('other routes reach none of them: a symlinked folder holding a hard link, a link target with ".." in it, a symlink to broker.dataDir', async () => {
    const { symlinkSync } = await import('node:fs');
    linkSync(join(estate.root, 'calls.ndjson'), join(estate.root, 'sub', 'deeper', 'notes.txt'));
    symlinkSync('sub/deeper', join(estate.root, 'via-link'));
    symlinkSync('sub/deeper/../../calls.ndjson', join(estate.root, 'climb'));
    symlinkSync('sub/../data', join(estate.root, 'data-link'));
    symlinkSync('../data/broker.sqlite', join(estate.root, 'sub', 'store-up'));
    for (const [tool, path] of [
      ['estate__read_file', 'via-link/notes.txt'],
      ['estate__read_file', 'link-sub/deeper/notes.txt'],
      ['estate__read_file', 'climb'],
      ['estate__list_dir', 'data-link'],
      ['estate__search', 'data-link'],
      ['estate__read_file', 'data-link/broker.sqlite'],
      ['estate__read_file', 'sub/store-up'],
      ['estate__propose_change', 'via-link/notes.txt'],
      ['estate__propose_change', 'climb'],
      ['estate__propose_change', 'data-link/new.txt'],
    ] as const) {
      const args = tool === 'estate__search' ? { path, query: 'a' } : tool === 'estate__propose_change' ? { path, content: 'forged', rationale: 'test' } : { path };
      const answer = refusal(await estate.run(tool, args, 'ops'));
      expect(answer, `${tool} ${path}`).toContain("broker's own data");
      expect(answer).not.toMatch(/ALICE|STORE-OF/);
    }
    const listed = await estate.run('estate__list_dir', { path: 'via-link' }, 'bob');
    expect(listed.outcome === 'ok' ? listed.result.structuredContent : undefined).toMatchObject({ entries: [{ name: 'c.txt' }], total: 1 });
  });

  it('a name of theirs is refused the same whether it exists or not (a missing rotation answered "no such file", an existing one "broker\'s own data": an oracle for how far the records rotated)', async () => {
    const answers = new Set<string>();
    for (const path of ['calls.ndjson.1', 'calls.ndjson.2', 'calls.ndjson.9', 'calls.ndjson.lock', 'data/broker.sqlite-wal', 'data/nothing/here']) {
      for (const tool of ['estate__read_file', 'estate__stat']) {
        const answer = await estate.run(tool, { path }, 'bob');
        answers.add(refusal(answer));
      }
    }
    expect([...answers]).toHaveLength(1);
    expect([...answers][0]).toContain("broker's own data");
  });

  it('no proposal may write them, a rotation not made yet included; the records are unchanged', async () => {
    for (const path of ['calls.ndjson', 'calls.ndjson.2', 'calls.ndjson.lock', 'data/new.txt']) {
      const answer = refusal(await estate.run('estate__propose_change', { path, content: 'forged', rationale: 'test' }, 'ops'));
      expect(answer, path).toContain("broker's own data");
    }
    expect(readFileSync(join(estate.root, 'calls.ndjson'), 'utf8')).toContain('ALICE-PRIVATE');
  });
});
