/**
 * The approval inbox pages (`listParked`): with more parked calls than a page (500), the older
 * ones could be neither seen nor decided from `broker__approvals_list` or `mcp-broker approvals
 * list`; now each answers a `nextCursor` (absent on the last page) that reads the next page.
 * All over a real SQLite store.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { approvalsTools } from '../../src/builtins/approvals.js';
import type { BrokerCall, CallerSession } from '../../src/broker/types.js';
import { approvalsListCommand } from '../../src/commands/approvals.js';
import { parseConfig } from '../../src/config/load.js';
import { ToolRouter } from '../../src/router/index.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { SqliteStore, type TaskRow } from '../../src/store/index.js';
import { decideParked } from '../../src/tasks/index.js';
import { Registry } from '../../src/upstream/registry.js';
import { runCli } from '../e2e/broker-support.js';

const T0 = 1_700_000_000_000;
const at = (n: number) => new Date(T0 + n).toISOString();
const root = mkdtempSync(join(tmpdir(), 'mcp-broker-inbox-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function parked(id: string, over: Partial<TaskRow> = {}): TaskRow {
  return {
    id,
    status: 'parked',
    stoppedBy: null,
    owner: 'i1',
    principal: 'alice',
    unit: 's1',
    sessionId: 's1',
    subject: 'u/echo',
    name: 'u__echo',
    args: { text: id },
    argsRedacted: false,
    result: null,
    reason: 'policy says ask',
    callId: `c-${id}`,
    approvedBy: null,
    createdAt: at(0),
    updatedAt: at(0),
    ttlMs: 3_600_000,
    ...over,
  };
}

/** `count` parked calls, one a millisecond apart, `p0000` the oldest. */
async function fill(store: SqliteStore, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = `p${String(i).padStart(4, '0')}`;
    await store.addTask(parked(id, { createdAt: at(i) }));
    ids.push(id);
  }
  return ids.reverse(); // newest first
}

/** `broker__approvals_list` through the router, as `local`. */
function inboxTool(store: SqliteStore, pageSize?: number) {
  const router = new ToolRouter(new Registry(silentLogger()), new ManualClock());
  router.register(approvalsTools({ tasks: () => undefined, store: () => store, clock: new ManualClock(T0), ...(pageSize !== undefined && { pageSize }) }), { server: 'broker' });
  let seq = 0;
  return async (args: Record<string, unknown>) => {
    const session: CallerSession = { sessionId: 's', principal: 'local', unit: 's', isLive: () => true };
    const signal = new AbortController().signal;
    const call: BrokerCall = { callId: `c${++seq}`, request: { name: 'broker__approvals_list', args, signal }, session, startedAt: 0, signal, attempts: 0, bytesOut: 0, notes: {} };
    const [outcome] = await router.dispatchBatch([call]);
    return outcome!;
  };
}

type Page = { approvals: Array<{ id: string }>; nextCursor?: string };
const pageOf = (outcome: Awaited<ReturnType<ReturnType<typeof inboxTool>>>): Page => {
  if (outcome.outcome !== 'ok') throw new Error(`not ok: ${JSON.stringify(outcome)}`);
  return outcome.result.structuredContent as Page;
};

function io() {
  const out = { stdout: '', stderr: '' };
  return { out, io: { stdout: { write: (t: string) => (out.stdout += t) }, stderr: { write: (t: string) => (out.stderr += t) } } };
}

describe('the approval inbox pages', () => {
  it('broker__approvals_list with 502 parked calls answered the newest 500 and no cursor: now a nextCursor reads the 2 oldest, each call once', async () => {
    const store = SqliteStore.open(':memory:');
    const ids = await fill(store, 502);
    const run = inboxTool(store);
    const first = pageOf(await run({}));
    expect(first.approvals.map((a) => a.id)).toEqual(ids.slice(0, 500));
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = pageOf(await run({ cursor: first.nextCursor }));
    expect(second.approvals.map((a) => a.id)).toEqual(['p0001', 'p0000']);
    expect(second).not.toHaveProperty('nextCursor');
    await store.close();
  });

  it('pages in (createdAt, id) order with ties at one time, skip no row and repeat none when a row is decided between pages, and list only undecided parked calls', async () => {
    const store = SqliteStore.open(':memory:');
    // Five parked calls at one time (inserted out of id order), two older; and rows that are not in the inbox.
    for (const id of ['t3', 't1', 't5', 't2', 't4']) await store.addTask(parked(id, { createdAt: at(10) }));
    await store.addTask(parked('old2', { createdAt: at(5), principal: 'bob' }));
    await store.addTask(parked('old1', { createdAt: at(1) }));
    await store.addTask(parked('approved', { createdAt: at(7), approvedBy: 'cli' }));
    await store.addTask(parked('running', { createdAt: at(8), status: 'running' }));
    await store.addTask(parked('expired', { createdAt: at(-100), ttlMs: 1 }));
    const run = inboxTool(store, 2);
    const seen: string[] = [];
    let page = pageOf(await run({}));
    const pages: string[][] = [];
    for (;;) {
      pages.push(page.approvals.map((a) => a.id));
      seen.push(...page.approvals.map((a) => a.id));
      if (pages.length === 1) await decideParked(store, 't5', { approve: false, by: 'cli' }, T0); // already read: the next pages do not move
      if (!page.nextCursor) break;
      page = pageOf(await run({ cursor: page.nextCursor }));
    }
    expect(pages).toEqual([['t5', 't4'], ['t3', 't2'], ['t1', 'old2'], ['old1']]);
    expect(new Set(seen).size).toBe(seen.length);
    await store.close();
  });

  it('a cursor no page gave is invalid_arguments and lists nothing', async () => {
    const store = SqliteStore.open(':memory:');
    await fill(store, 3);
    const run = inboxTool(store, 2);
    for (const cursor of ['nope!', '', Buffer.from('["only one"]').toString('base64url'), Buffer.from('{"a":1}').toString('base64url')]) {
      expect(await run({ cursor })).toMatchObject({ outcome: 'error', code: 'invalid_arguments', message: expect.stringContaining('not a cursor this list gave') });
    }
    await store.close();
  });

  it('mcp-broker approvals list prints the next cursor after the page (table and --json), and --cursor reads the next page', async () => {
    const store = SqliteStore.open(':memory:');
    await fill(store, 3);
    const config = parseConfig({}, { baseDir: root });
    let r = io();
    expect(await approvalsListCommand(config, { store, now: T0, pageSize: 2 }, r.io)).toBe(0);
    const lines = r.out.stdout.trim().split('\n');
    expect(lines.slice(1, 3).map((l) => l.split(/\s{2,}/)[0])).toEqual(['p0002', 'p0001']);
    const footer = /^2 parked calls on this page; next page: --cursor (\S+)$/.exec(lines.at(-1)!);
    expect(footer).not.toBeNull();
    r = io();
    expect(await approvalsListCommand(config, { store, now: T0, pageSize: 2, cursor: footer![1] }, r.io)).toBe(0);
    expect(r.out.stdout.trim().split('\n').slice(1)).toEqual([expect.stringMatching(/^p0000\s/), '1 parked call']);

    r = io();
    expect(await approvalsListCommand(config, { store, now: T0, pageSize: 2, json: true }, r.io)).toBe(0);
    const json = r.out.stdout.trim().split('\n').map((l) => JSON.parse(l) as { id?: string; nextCursor?: string });
    expect(json.map((j) => j.id)).toEqual(['p0002', 'p0001', undefined]);
    expect(json[2]).toEqual({ nextCursor: footer![1] });
    r = io();
    expect(await approvalsListCommand(config, { store, now: T0, pageSize: 2, json: true, cursor: json[2]!.nextCursor }, r.io)).toBe(0);
    expect(r.out.stdout.trim().split('\n').map((l) => JSON.parse(l).id)).toEqual(['p0000']);

    r = io();
    expect(await approvalsListCommand(config, { store, now: T0, cursor: 'garbage' }, r.io)).toBe(2);
    expect(r.out.stdout).toBe('');
    expect(r.out.stderr).toBe('mcp-broker: --cursor is not a cursor approvals list printed (pass back its next cursor as it came)\n');
    await store.close();
  });

  it('the CLI takes --cursor: 502 parked calls are read in two pages of `approvals list --json`, and a bad cursor is exit 2', async () => {
    const dir = mkdtempSync(join(root, 'cli-'));
    const dataDir = join(dir, 'data');
    const store = SqliteStore.open(dataDir);
    const now = Date.now();
    const ids: string[] = [];
    for (let i = 0; i < 502; i++) {
      const id = `p${String(i).padStart(4, '0')}`;
      await store.addTask(parked(id, { createdAt: new Date(now - 60_000 + i).toISOString() }));
      ids.unshift(id);
    }
    await store.close();
    const configPath = join(dir, 'servers.json');
    writeFileSync(configPath, JSON.stringify({ mcpServers: {}, broker: { dataDir } }));
    const first = await runCli(['approvals', 'list', '--config', configPath, '--json']);
    expect(first).toMatchObject({ code: 0, stderr: '' });
    const lines = first.stdout.trim().split('\n').map((l) => JSON.parse(l) as { id?: string; nextCursor?: string });
    expect(lines.slice(0, 500).map((l) => l.id)).toEqual(ids.slice(0, 500));
    const cursor = lines[500]?.nextCursor;
    expect(cursor).toEqual(expect.any(String));
    const second = await runCli(['approvals', 'list', '--config', configPath, '--json', '--cursor', cursor!]);
    expect(second).toMatchObject({ code: 0, stderr: '' });
    expect(second.stdout.trim().split('\n').map((l) => JSON.parse(l).id)).toEqual(['p0001', 'p0000']);
    const bad = await runCli(['approvals', 'list', '--config', configPath, '--cursor', 'garbage']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--cursor is not a cursor approvals list printed');
  });
});
