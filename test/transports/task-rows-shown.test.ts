/**
 * Task rows over HTTP (`GET /api/v1/tasks`, `GET /api/v1/tasks/:id`, the status page's approval
 * inbox) showed a row's `name`, `subject` and `principal` as stored after a secret was added
 * (a reload), where the call's record shows them scrubbed again. They are shown scrubbed with the
 * secrets of now, and a principal's own rows are still found by the principal as stored: here a
 * principal whose very name holds the value made a secret. A real gateway serving HTTP in this
 * process, over its SQLite store.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { REDACTED } from '../../src/shared/scrub.js';
import type { TaskRow } from '../../src/store/index.js';
import { serveInProcess, type InProcessHttp } from './in-process.js';

const LATER = `later-${randomBytes(8).toString('hex')}`;
const OWNER = `team-${LATER}`;
const OWNER_TOKEN = randomBytes(16).toString('hex');
const BOB = randomBytes(16).toString('hex');
const OP = randomBytes(16).toString('hex');

describe('task rows over HTTP, after a secret was added', () => {
  let served: InProcessHttp | undefined;
  afterEach(async () => served?.close());

  it("shows name, subject and principal scrubbed with the secrets of now, and finds a principal's own rows as stored", async () => {
    served = await serveInProcess({
      mcpServers: {},
      principals: { [OWNER]: { token: OWNER_TOKEN }, bob: { token: BOB }, op: { token: OP, role: 'operator' } },
      estate: { enabled: false },
    });
    const { gateway, serving } = served;
    const at = new Date(gateway.clock.now()).toISOString();
    const row: TaskRow = {
      id: 'p1', status: 'parked', stoppedBy: null, owner: 'gone', principal: OWNER, unit: 'u', sessionId: 's', subject: `fx/tool-${LATER}`, name: `fx__tool-${LATER}`,
      args: {}, argsRedacted: false, result: null, reason: 'policy says ask', callId: 'c-p1', approvedBy: null, createdAt: at, updatedAt: at, ttlMs: 3_600_000,
    };
    await gateway.store.addTask(row);
    // What a reload that adds the value as a secret does to the scrubber.
    gateway.scrubber.addSecrets([LATER]);
    const get = async (path: string, token: string) => {
      const res = await fetch(`${serving.url}/api/v1${path}`, { headers: { authorization: `Bearer ${token}` } });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const shown = { id: 'p1', principal: `team-${REDACTED}`, tool: `fx__tool-${REDACTED}` };

    for (const token of [OWNER_TOKEN, OP]) {
      const tasks = (await get('/tasks', token)).body.tasks as unknown[];
      expect(tasks).toEqual([expect.objectContaining({ ...shown, subject: `fx/tool-${REDACTED}` })]);
      const one = await get('/tasks/p1', token);
      expect(one.status).toBe(200);
      expect(one.body).toMatchObject({ ...shown, subject: `fx/tool-${REDACTED}` });
      expect(JSON.stringify([tasks, one.body])).not.toContain(LATER);
      const approvals = (await get('/status', token)).body.approvals as unknown[];
      expect(approvals).toEqual([expect.objectContaining(shown)]);
      expect(JSON.stringify(approvals)).not.toContain(LATER);
    }
    // Another principal sees nothing of it.
    expect((await get('/tasks', BOB)).body.tasks).toEqual([]);
    expect((await get('/tasks/p1', BOB)).status).toBe(404);
    expect((await get('/status', BOB)).body.approvals).toEqual([]);
  });
});
