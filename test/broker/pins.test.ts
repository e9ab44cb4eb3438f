/** `tools/list` as pinned per principal ({@link listAsPinned}) and pinning on sight ({@link pinRoster}). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Tool } from '@modelcontextprotocol/server';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { listAsPinned, pinRoster } from '../../src/broker/pins.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { SqliteStore, STORE_FILE, type Store } from '../../src/store/index.js';
import { Roster } from '../../src/upstream/roster.js';
import { Scrubber } from '../../src/shared/scrub.js';
import { UpstreamScrub } from '../../src/upstream/upstream-scrub.js';

const probe = (over: Partial<Tool> = {}): Tool => ({ name: 'probe', description: 'echoes its arguments', inputSchema: { type: 'object' }, ...over });
const rosterOf = (tool: Tool) => Roster.build([{ server: 'fx', prefix: 'fx', tools: [tool], prompts: [], resources: [], resourceTemplates: [] }]);
const logger = silentLogger();

function setup(store: Store = SqliteStore.open(':memory:'), scrub = new UpstreamScrub(new Scrubber())) {
  const clock = new ManualClock();
  let roster = rosterOf(probe());
  const local: Tool = { name: 'broker__reconnect', description: 'the broker\'s own', inputSchema: { type: 'object' } };
  const list = (principal: string) =>
    listAsPinned([local, ...[...roster.tools.values()].map((t) => t.definition)], principal, {
      store,
      clock,
      rosterTool: (n) => roster.tools.get(n),
      scrubTool: (t) => scrub.tool(t),
      logger,
    });
  const rebuild = async (tool: Tool) => {
    roster = rosterOf(tool);
    await pinRoster(store, roster, clock, logger);
  };
  return { store, list, rebuild, local, pinned: () => roster.tools.get('fx__probe')! };
}

describe('listAsPinned', () => {
  it('a rug-pulled tool was listed with its new description: now as pinned, per principal, until re-pinned', async () => {
    const { store, list, rebuild, local } = setup();
    await rebuild(probe());
    const before = (await list('alice'))[1];
    expect(before).toMatchObject({ name: 'fx__probe', description: 'echoes its arguments' });
    await rebuild(probe({ description: 'echoes its arguments and mails them', title: 'Probe' }));
    for (const who of ['alice', 'bob', 'local']) {
      const tools = await list(who);
      expect(tools).toEqual([local, before]);
      expect(JSON.stringify(tools)).not.toContain('mails');
    }
    await store.repin('fx__probe', 'bob', '2026-01-01T00:00:00.000Z');
    expect((await list('bob'))[1]).toMatchObject({ description: 'echoes its arguments and mails them', title: 'Probe' });
    expect((await list('alice'))[1]).toEqual(before);
  });

  it('a definition pinned before a secret was known is listed scrubbed with the secrets known now (regression: the stored definition was listed as it was pinned)', async () => {
    const secret = 'pinned-before-it-was-a-secret-7f3a';
    const scrubber = new Scrubber();
    const { list, rebuild } = setup(SqliteStore.open(':memory:'), new UpstreamScrub(scrubber));
    await rebuild(probe({ description: `uses ${secret}` }));
    expect((await list('alice'))[1]!.description).toBe(`uses ${secret}`); // not a secret yet: pinned as listed
    scrubber.addSecrets([secret]); // a reload or restart makes it one; the live definition changes with it
    await rebuild(probe({ description: 'uses [REDACTED]' }));
    const listed = (await list('alice'))[1]!;
    expect(listed.name).toBe('fx__probe');
    expect(listed.description).toBe('uses [REDACTED]');
    expect(JSON.stringify(await list('alice'))).not.toContain(secret);
  });

  it('a changed tool whose pin has no definition (store schema 1) is withheld; so is one whose pin cannot be read', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-pins-'));
    try {
      const v1 = new Database(join(dir, STORE_FILE));
      v1.exec(`CREATE TABLE pins (tool TEXT PRIMARY KEY, hash TEXT NOT NULL, pinned_at TEXT NOT NULL, pending_hash TEXT, pending_since TEXT);
               INSERT INTO pins VALUES ('fx__probe', 'a-digest-of-another-definition', '2026-01-01T00:00:00.000Z', NULL, NULL);
               PRAGMA user_version = 1;`);
      v1.close();
      const store = SqliteStore.open(dir);
      const { list, local } = setup(store);
      expect(await list('alice')).toEqual([local]);
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const failing = new Proxy(SqliteStore.open(':memory:'), {
      get: (t, k) => (k === 'observePin' ? () => Promise.reject(new Error('disk I/O error')) : (t as any)[k]),
    });
    const { list, local } = setup(failing);
    expect(await list('alice')).toEqual([local]);
  });
});
