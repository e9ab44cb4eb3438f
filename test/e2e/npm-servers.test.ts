/**
 * The bundled servers.json (server-everything, server-filesystem on workspace/, server-memory)
 * through the CLI: the merged roster, a call of each, progress and cancellation on
 * everything's `trigger-long-running-operation`, one record per call.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startBroker, waitFor, type StartedBroker } from './helpers.js';

let broker: StartedBroker;
/** callIds of every call this file made, from the answers' `_meta`. */
const callIds: string[] = [];
const text = (r: { content?: unknown }) => ((r.content as Array<{ text?: string }>)[0]?.text ?? '') as string;
const track = <T extends { _meta?: unknown }>(r: T): T => {
  callIds.push((r._meta as Record<string, string>)['mcp-broker/callId']!);
  return r;
};

beforeAll(async () => {
  // The repo's own servers.json, run from the repo root, with records and memory in a temp folder.
  const bundled = JSON.parse(readFileSync(join(ROOT, 'servers.json'), 'utf8')) as {
    mcpServers: Record<string, Record<string, unknown>>;
    [k: string]: unknown;
  };
  const servers = Object.fromEntries(Object.entries(bundled.mcpServers).map(([k, v]) => [k, { ...v, cwd: ROOT }]));
  const { mcpServers: _servers, broker: _broker, ...rest } = bundled;
  broker = await startBroker({ servers, extra: { ...rest, estate: { root: join(ROOT, 'workspace') } } });
}, 60_000);

afterAll(async () => {
  await broker?.close();
});

describe('the three real npm servers through the broker', () => {
  it('lists the merged roster of everything, fs and memory', async () => {
    const names = (await broker.client.listTools()).tools.map((t) => t.name);
    for (const n of ['everything__echo', 'everything__get-sum', 'everything__trigger-long-running-operation', 'fs__read_text_file', 'fs__list_allowed_directories', 'memory__create_entities', 'memory__read_graph']) {
      expect(names).toContain(n);
    }
    for (const n of names) expect(n).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    expect(new Set(names).size).toBe(names.length);
    const prompts = (await broker.client.listPrompts()).prompts.map((p) => p.name);
    expect(prompts.some((p) => p.startsWith('everything__'))).toBe(true);
    expect((await broker.client.listResources()).resources.length).toBeGreaterThan(0);
  });

  it('calls a tool of each server', async () => {
    const sum = track(await broker.client.callTool({ name: 'everything__get-sum', arguments: { a: 2, b: 3 } }));
    expect(text(sum)).toContain('5');
    const file = track(await broker.client.callTool({ name: 'fs__read_text_file', arguments: { path: join(ROOT, 'workspace/README.md') } }));
    expect(file.isError ?? false).toBe(false);
    expect(text(file)).toBe(readFileSync(join(ROOT, 'workspace/README.md'), 'utf8'));
    const denied = track(await broker.client.callTool({ name: 'fs__read_text_file', arguments: { path: '/etc/passwd' } }));
    expect(denied.isError).toBe(true);
    expect((denied._meta as Record<string, unknown>)['mcp-broker/outcome']).toBe('tool_error');
    track(await broker.client.callTool({ name: 'memory__create_entities', arguments: { entities: [{ name: 'broker-e2e', entityType: 'test', observations: ['seen'] }] } }));
    const graph = track(await broker.client.callTool({ name: 'memory__read_graph', arguments: {} }));
    expect(JSON.stringify(graph)).toContain('broker-e2e');
  });

  it('forwards progress of trigger-long-running-operation', async () => {
    const updates: Array<{ progress: number; total?: number }> = [];
    const r = track(
      await broker.client.callTool({ name: 'everything__trigger-long-running-operation', arguments: { duration: 1, steps: 4 } }, {
        onprogress: (p) => updates.push(p),
      }),
    );
    expect(text(r)).toContain('completed');
    expect(updates.length).toBeGreaterThanOrEqual(1);
    expect(updates[0]!.total).toBe(4);
    for (let i = 1; i < updates.length; i++) expect(updates[i]!.progress).toBeGreaterThan(updates[i - 1]!.progress);
  });

  it('cancels trigger-long-running-operation: the call ends at once and is recorded cancelled', async () => {
    const controller = new AbortController();
    let first!: () => void;
    const gotProgress = new Promise<void>((r) => (first = r));
    const pending = broker.client.callTool({ name: 'everything__trigger-long-running-operation', arguments: { duration: 20, steps: 20 } }, {
      signal: controller.signal,
      onprogress: () => first(),
    });
    await gotProgress;
    const abortedAt = Date.now();
    controller.abort('user pressed stop');
    await expect(pending).rejects.toThrow();
    const record = await waitFor(
      async () => (await broker.records()).find((r) => r.name === 'everything__trigger-long-running-operation' && r.outcome === 'cancelled'),
      'the cancelled record',
      5_000,
    );
    expect(Date.now() - abortedAt).toBeLessThan(5_000);
    expect(record.status).toBe(499);
    expect(record.durationMs).toBeLessThan(15_000);
    callIds.push(record.callId);
    // The broker goes on serving.
    track(await broker.client.callTool({ name: 'everything__echo', arguments: { message: 'after cancel' } }));
  });

  it('wrote exactly one record per call', async () => {
    const records = await broker.records();
    expect(records.length).toBe(callIds.length);
    expect(records.map((r) => r.callId).sort()).toEqual([...callIds].sort());
    for (const r of records) {
      expect(r.principal).toBe('local');
      expect(r.subject).toMatch(/^(everything|fs|memory)\//);
    }
  });
});
