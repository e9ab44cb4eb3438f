/**
 * `tasks/list` (2025-11-25) and `GET /api/v1/tasks` page: both answered the newest 500 tasks and
 * no cursor (a `cursor` param was -32602 "unknown cursor"), so a principal with more than 500
 * tasks could never list the older ones. Now each answers `nextCursor` (absent on the last page)
 * that reads the next page, and a principal still sees only its own tasks on every page.
 *
 * A real HTTP broker (the CLI) over a real SQLite store, its rows written beforehand through the
 * store's own API: 505 tasks of alice, 3 of bob among them in time.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/client';
import { ResultSchema } from '@modelcontextprotocol/core';
import { SqliteStore, type TaskRow } from '../../src/store/index.js';
import { connectHttp, http, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const env = { ALICE_TOKEN: 'alice-token-0123456789abcdef', BOB_TOKEN: 'bob-token-0123456789abcdef00', OPS_TOKEN: 'ops-token-0123456789abcdef00' };
const auth = (token: string) => ({ authorization: `Bearer ${token}` });

const root = mkdtempSync(join(tmpdir(), 'mcp-broker-task-paging-'));
const dataDir = join(root, 'data');
const T0 = Date.now() - 3_600_000;
const at = (n: number) => new Date(T0 + n).toISOString();

function task(id: string, principal: string, createdAt: string, status: TaskRow['status']): TaskRow {
  return {
    id,
    status,
    stoppedBy: null,
    owner: 'gone',
    principal,
    unit: 's1',
    sessionId: 's1',
    subject: 'u/echo',
    name: 'u__echo',
    args: { text: id },
    argsRedacted: false,
    result: { content: [{ type: 'text', text: id }] },
    reason: status === 'failed' ? 'it failed' : null,
    callId: `c-${id}`,
    approvedBy: null,
    createdAt,
    updatedAt: createdAt,
    ttlMs: 86_400_000,
  };
}

/** Alice's 505 task ids newest first: 10 ms apart, except pairs that share a time (ordered by id then). */
const aliceIds: string[] = [];
/** Alice's failed ones (every fifth), newest first. */
const aliceFailed: string[] = [];
/** Bob's, newest first: one newer than all of alice's, one among them, one older than the cursor of alice's first page. */
const bobIds = ['b3', 'b2', 'b1'];
/** Every task, newest first, as an operator lists them. */
let everyId: string[] = [];

let broker: HttpBroker;
let alice: Awaited<ReturnType<typeof connectHttp>>;
let bob: Awaited<ReturnType<typeof connectHttp>>;

beforeAll(async () => {
  const store = SqliteStore.open(dataDir);
  const rows: TaskRow[] = [];
  for (let i = 0; i < 505; i++) {
    const id = `a${String(i).padStart(4, '0')}`;
    const status = i % 5 === 0 ? 'failed' : 'completed';
    rows.push(task(id, 'alice', at(Math.floor(i / 2) * 10), status));
  }
  rows.push(task('b1', 'bob', at(15), 'completed'), task('b2', 'bob', at(1_005), 'failed'), task('b3', 'bob', at(9_000), 'completed'));
  for (const row of rows) await store.addTask(row);
  await store.close();
  const newestFirst = [...rows].sort((x, y) => (x.createdAt === y.createdAt ? (x.id < y.id ? 1 : -1) : x.createdAt < y.createdAt ? 1 : -1));
  everyId = newestFirst.map((r) => r.id);
  aliceIds.push(...newestFirst.filter((r) => r.principal === 'alice').map((r) => r.id));
  aliceFailed.push(...newestFirst.filter((r) => r.principal === 'alice' && r.status === 'failed').map((r) => r.id));

  broker = await startHttpBroker({
    servers: {},
    extra: {
      broker: { dataDir },
      principals: { alice: { token: '${env:ALICE_TOKEN}' }, bob: { token: '${env:BOB_TOKEN}' }, ops: { token: '${env:OPS_TOKEN}', role: 'operator' } },
    },
    env,
  });
  alice = await connectHttp(broker.url, 'streamable', { token: env.ALICE_TOKEN });
  bob = await connectHttp(broker.url, 'streamable', { token: env.BOB_TOKEN });
}, 60_000);

afterAll(async () => {
  await alice?.close();
  await bob?.close();
  await broker?.close();
  rmSync(root, { recursive: true, force: true });
});

type McpPage = { tasks: Array<{ taskId: string }>; nextCursor?: string };
const list = (c: Client, params: Record<string, unknown>) => c.request({ method: 'tasks/list', params } as never, ResultSchema.loose(), { timeout: 20_000 }) as Promise<McpPage>;

/** Every page of `tasks/list` for `c`, from the first (or from `cursor`). */
async function mcpPages(c: Client, cursor?: string): Promise<McpPage[]> {
  const pages: McpPage[] = [];
  for (;;) {
    const page = await list(c, cursor === undefined ? {} : { cursor });
    pages.push(page);
    if (page.nextCursor === undefined) return pages;
    cursor = page.nextCursor;
  }
}

type ApiPage = { tasks: Array<{ id: string; principal: string; status: string }>; nextCursor?: string };

/** Every page of `GET /api/v1/tasks[?query]` with `token`. */
async function apiPages(token: string, query: Record<string, string> = {}): Promise<ApiPage[]> {
  const pages: ApiPage[] = [];
  let cursor: string | undefined;
  for (;;) {
    const search = new URLSearchParams({ ...query, ...(cursor !== undefined && { cursor }) });
    const res = await http(`${broker.url}/api/v1/tasks?${search}`, { headers: auth(token) });
    expect(res.status).toBe(200);
    const page = res.body as ApiPage;
    pages.push(page);
    if (page.nextCursor === undefined) return pages;
    cursor = page.nextCursor;
  }
}

describe('tasks/list (2025-11-25) pages', () => {
  it('505 tasks of alice were cut at the newest 500: now two pages (500, 5) list each of hers once, newest first, none of bob\'s, the last with no nextCursor', async () => {
    const pages = await mcpPages(alice.client);
    expect(pages.map((p) => p.tasks.length)).toEqual([500, 5]);
    expect(pages[0]!.nextCursor).toEqual(expect.any(String));
    expect(pages[1]).not.toHaveProperty('nextCursor');
    expect(pages.flatMap((p) => p.tasks.map((t) => t.taskId))).toEqual(aliceIds);
  });

  it('bob sees only his 3 on one page; a cursor of alice\'s list names a position only: on bob\'s it reads his older tasks, never hers', async () => {
    const pages = await mcpPages(bob.client);
    expect(pages).toHaveLength(1);
    expect(pages[0]!.tasks.map((t) => t.taskId)).toEqual(bobIds);
    expect(pages[0]).not.toHaveProperty('nextCursor');

    const aliceCursor = (await list(alice.client, {})).nextCursor!;
    const after = await list(bob.client, { cursor: aliceCursor });
    expect(after.tasks.map((t) => t.taskId)).toEqual(['b1']);
    expect(after).not.toHaveProperty('nextCursor');
  });

  it('a cursor no page gave, or one that is not a string, is -32602 naming the cursor', async () => {
    const bad = ['nope!', '', Buffer.from('["only one"]').toString('base64url'), Buffer.from('{"a":1}').toString('base64url'), 42];
    for (const cursor of bad) {
      await expect(list(alice.client, { cursor })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining('cursor') });
    }
  });
});

describe('GET /api/v1/tasks pages', () => {
  it('alice reads her 505 in two pages (500, 5) through ?cursor=, each once, none of bob\'s; bob his 3 on one page', async () => {
    const pages = await apiPages(env.ALICE_TOKEN);
    expect(pages.map((p) => p.tasks.length)).toEqual([500, 5]);
    expect(pages[1]).not.toHaveProperty('nextCursor');
    expect(pages.flatMap((p) => p.tasks.map((t) => t.id))).toEqual(aliceIds);
    expect(pages.flatMap((p) => p.tasks.map((t) => t.principal)).every((p) => p === 'alice')).toBe(true);

    const bobs = await apiPages(env.BOB_TOKEN);
    expect(bobs).toHaveLength(1);
    expect(bobs[0]!.tasks.map((t) => t.id)).toEqual(bobIds);
    expect(bobs[0]).not.toHaveProperty('nextCursor');
  });

  it('an operator reads all 508 in two pages (500, 8); ?status= filters every page', async () => {
    const pages = await apiPages(env.OPS_TOKEN);
    expect(pages.map((p) => p.tasks.length)).toEqual([500, 8]);
    expect(pages.flatMap((p) => p.tasks.map((t) => t.id))).toEqual(everyId);

    const failed = await apiPages(env.ALICE_TOKEN, { status: 'failed' });
    expect(failed.flatMap((p) => p.tasks.map((t) => t.id))).toEqual(aliceFailed);
    const completed = await apiPages(env.OPS_TOKEN, { status: 'completed' });
    expect(completed.flatMap((p) => p.tasks.map((t) => t.status)).every((s) => s === 'completed')).toBe(true);
    expect(completed.flatMap((p) => p.tasks).length).toBe(everyId.length - aliceFailed.length - 1);
  });

  it('a cursor no page gave, or cursor given twice, is 400 bad_request naming the cursor', async () => {
    const url = `${broker.url}/api/v1/tasks`;
    for (const query of ['cursor=nope!', 'cursor=', `cursor=${Buffer.from('["only one"]').toString('base64url')}`, 'cursor=a&cursor=b']) {
      const res = await http(`${url}?${query}`, { headers: auth(env.ALICE_TOKEN) });
      expect(res.status, query).toBe(400);
      expect(res.body, query).toMatchObject({ error: { code: 'bad_request', message: expect.stringContaining('cursor') } });
    }
  });
});
