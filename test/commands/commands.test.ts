import { appendFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { approveCommand, revokeCommand } from '../../src/commands/approve.js';
import { callsCommand, parseSince } from '../../src/commands/calls.js';
import { parseConfig } from '../../src/config/load.js';
import { MODULE_ERROR_MAX_CHARS } from '../../src/router/modules.js';
import { ConfigError } from '../../src/shared/errors.js';
import { SqliteStore } from '../../src/store/index.js';

const root = mkdtempSync(join(tmpdir(), 'mcp-broker-commands-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function io() {
  const out = { stdout: '', stderr: '' };
  return { out, io: { stdout: { write: (t: string) => (out.stdout += t) }, stderr: { write: (t: string) => (out.stderr += t) } } };
}

const NOW = Date.parse('2026-01-02T12:00:00.000Z');
const rec = (minutesAgo: number, name: string, outcome: string, reason?: string) => ({
  ts: new Date(NOW - minutesAgo * 60_000).toISOString(),
  callId: `c-${minutesAgo}`,
  sessionId: 's',
  principal: 'local',
  unit: 's',
  subject: `fx/${name}`,
  name,
  outcome,
  status: outcome === 'ok' ? 200 : 403,
  durationMs: 12,
  attempts: outcome === 'ok' ? 1 : 0,
  bytesOut: 10,
  args: {},
  ...(reason ? { reason } : {}),
});

describe('mcp-broker calls', () => {
  const config = parseConfig({ broker: { records: { path: 'calls.ndjson' } } }, { baseDir: root });
  writeFileSync(join(root, 'calls.ndjson.1'), [rec(120, 'fx__old', 'ok')].map((r) => JSON.stringify(r)).join('\n') + '\n');
  writeFileSync(
    join(root, 'calls.ndjson'),
    [rec(30, 'fs__write_file', 'denied', 'policy.rules[0] (fs__write_*) denies "fs__write_file"'), rec(5, 'fs__read_file', 'ok'), rec(1, 'memory__read_graph', 'ok')]
      .map((r) => JSON.stringify(r))
      .join('\n') + '\n{"torn',
  );

  it('prints every record, rotated files first, as an aligned table', async () => {
    const { out, io: cio } = io();
    expect(await callsCommand(config, {}, cio, NOW)).toBe(0);
    const lines = out.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^TIME\s+OUTCOME\s+STATUS\s+TOOL\s+PRINCIPAL\s+ATTEMPTS\s+MS\s+REASON$/);
    expect(lines.slice(1, 5).map((l) => l.split(/\s{2,}/)[3])).toEqual(['fx__old', 'fs__write_file', 'fs__read_file', 'memory__read_graph']);
    expect(lines[2]).toContain('denies');
    expect(lines.at(-1)).toBe('4 calls');
    // Columns line up: OUTCOME starts at the same offset on every row.
    const col = lines[0]!.indexOf('OUTCOME');
    for (const l of lines.slice(1, 5)) expect(l.slice(col)).toMatch(/^(ok|denied)\s/);
  });

  it('filters by outcome, tool glob and since (duration or ISO time)', async () => {
    let r = io();
    await callsCommand(config, { outcome: 'denied' }, r.io, NOW);
    expect(r.out.stdout).toContain('fs__write_file');
    expect(r.out.stdout).not.toContain('fs__read_file');
    r = io();
    await callsCommand(config, { tool: 'fs__*' }, r.io, NOW);
    expect(r.out.stdout).toMatch(/2 calls\n$/);
    r = io();
    await callsCommand(config, { since: '10m' }, r.io, NOW);
    expect(r.out.stdout).toMatch(/2 calls\n$/);
    r = io();
    await callsCommand(config, { since: new Date(NOW - 60 * 60_000).toISOString() }, r.io, NOW);
    expect(r.out.stdout).toMatch(/3 calls\n$/);
    r = io();
    await callsCommand(config, { limit: 1 }, r.io, NOW);
    expect(r.out.stdout).toContain('memory__read_graph');
    expect(r.out.stdout).toContain('1 of 4 matching calls');
    r = io();
    await callsCommand(config, { outcome: 'ok', json: true }, r.io, NOW);
    expect(r.out.stdout.trim().split('\n').map((l) => JSON.parse(l).name)).toEqual(['fx__old', 'fs__read_file', 'memory__read_graph']);
  });

  it('a JSON line that is no record crashed the table ("reading \'replace\'"): now skipped, also with --json', async () => {
    const dir = join(root, 'foreign');
    mkdirSync(dir);
    writeFileSync(join(dir, 'calls.ndjson'), '{"note":"x"}\n' + JSON.stringify(rec(1, 'fx__real', 'ok')) + '\n');
    const foreign = parseConfig({ broker: { records: { path: 'foreign/calls.ndjson' } } }, { baseDir: root });
    let r = io();
    expect(await callsCommand(foreign, {}, r.io, NOW)).toBe(0);
    expect(r.out.stdout).toMatch(/1 call\n$/);
    r = io();
    await callsCommand(foreign, { json: true }, r.io, NOW);
    expect(r.out.stdout.trim().split('\n').map((l) => JSON.parse(l).name)).toEqual(['fx__real']);
  });

  it('--id keeps the one call with that callId', async () => {
    const r = io();
    await callsCommand(config, { id: 'c-5', json: true }, r.io, NOW);
    expect(r.out.stdout.trim().split('\n').map((l) => JSON.parse(l).name)).toEqual(['fs__read_file']);
  });

  it('--follow prints matching calls as they are appended, across a rotation, until stopped', async () => {
    const dir = join(root, 'follow');
    mkdirSync(dir);
    const followed = parseConfig({ broker: { records: { path: 'follow/calls.ndjson' } } }, { baseDir: root });
    const path = join(dir, 'calls.ndjson');
    writeFileSync(path, JSON.stringify(rec(3, 'fx__before', 'ok')) + '\n');
    const r = io();
    const stop = new AbortController();
    const done = callsCommand(followed, { follow: true, json: true, outcome: 'ok' }, r.io, NOW, stop.signal);
    const names = () => r.out.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l).name);
    await vi.waitFor(() => expect(names()).toEqual(['fx__before']));
    appendFileSync(path, JSON.stringify(rec(2, 'fx__denied', 'denied')) + '\n' + JSON.stringify(rec(2, 'fx__after', 'ok')) + '\n{"half');
    await vi.waitFor(() => expect(names()).toEqual(['fx__before', 'fx__after']));
    // Rotation: the path now names a new file.
    renameSync(path, `${path}.1`);
    writeFileSync(path, JSON.stringify(rec(1, 'fx__rotated', 'ok')) + '\n');
    await vi.waitFor(() => expect(names()).toEqual(['fx__before', 'fx__after', 'fx__rotated']));
    stop.abort();
    expect(await done).toBe(0);
  });

  it('bad options are exit 2 with a message', async () => {
    let r = io();
    expect(await callsCommand(config, { outcome: 'okay' }, r.io, NOW)).toBe(2);
    expect(r.out.stderr).toContain('unknown outcome "okay"');
    r = io();
    expect(await callsCommand(config, { since: 'yesterday' }, r.io, NOW)).toBe(2);
  });

  it('parseSince reads durations and ISO times', () => {
    expect(parseSince('15m', NOW)).toBe(NOW - 900_000);
    expect(parseSince('500ms', NOW)).toBe(NOW - 500);
    expect(parseSince('2026-01-01T00:00:00Z', NOW)).toBe(Date.parse('2026-01-01T00:00:00Z'));
    expect(parseSince('soon', NOW)).toBeUndefined();
  });

  it('no records file yet is not an error', async () => {
    const empty = parseConfig({ broker: { records: { path: 'none/calls.ndjson' } } }, { baseDir: root });
    const r = io();
    expect(await callsCommand(empty, {}, r.io, NOW)).toBe(0);
    expect(r.out.stdout).toContain('no records yet');
  });
});

describe('mcp-broker approve / revoke', () => {
  const seen = (hash: string) => ({ hash, definition: { name: 'fx__echo', description: `definition ${hash}` } });
  const config = parseConfig({ broker: { dataDir: 'store' }, principals: { alice: { token: 'a'.repeat(20) } } }, { baseDir: root });

  it('approve re-pins a changed tool and stores an approval for everyone', async () => {
    const store = SqliteStore.open(config.broker.dataDir);
    await store.observePin('fx__echo', 'local', seen('h1'), 'a');
    await store.observePin('fx__echo', 'local', seen('h2'), 'b');
    await store.close();
    const r = io();
    expect(await approveCommand(config, 'fx__echo', {}, r.io)).toBe(0);
    expect(r.out.stdout).toContain('approved fx__echo for every principal');
    expect(r.out.stdout).toContain('re-pinned fx__echo');
    const after = SqliteStore.open(config.broker.dataDir);
    expect(await after.observePin('fx__echo', 'alice', seen('h2'), 'c')).toBe('same');
    expect((await after.getApproval('fx__echo', 'anyone'))?.decision).toBe('approved');
    await after.close();
  });

  it('revoke for one principal makes the tool ask again for that principal only, and forgets its first use', async () => {
    const store = SqliteStore.open(config.broker.dataDir);
    await store.markUsed('fx__echo', 'alice', 'a');
    const r = io();
    expect(await revokeCommand(config, 'fx__echo', { principal: 'alice', store }, r.io)).toBe(0);
    expect(r.out.stdout).toContain('revoked fx__echo for principal "alice"');
    expect((await store.getApproval('fx__echo', 'alice'))?.decision).toBe('revoked');
    expect((await store.getApproval('fx__echo', 'local'))?.decision).toBe('approved');
    expect(await store.hasUsed('fx__echo', 'alice')).toBe(false);
    await store.close();
  });

  it('approve of a built-in tool said it "has no pin yet; the broker pins a tool when it first sees it": built-ins are never pinned', async () => {
    const store = SqliteStore.open(':memory:');
    let r = io();
    expect(await approveCommand(config, 'estate__apply_proposal', { store }, r.io)).toBe(0);
    expect(r.out.stdout).toContain('approved estate__apply_proposal for every principal');
    expect(r.out.stdout).toContain("estate__apply_proposal is one of the broker's own tools (estate__*); these are never pinned");
    expect(r.out.stdout).not.toContain('pins a tool when it first sees it');
    expect((await store.getApproval('estate__apply_proposal', 'local'))?.decision).toBe('approved');
    r = io();
    expect(await approveCommand(config, 'get_weather', { store, force: true }, r.io)).toBe(0);
    expect(r.out.stdout).toContain('get_weather has no pin: the broker pins an upstream tool when it first lists it; a function tool');
    await store.close();
  });

  it('approve of a tool that does not exist is exit 2 unless --force (issue 18 §6)', async () => {
    const store = SqliteStore.open(':memory:');
    let r = io();
    expect(await approveCommand(config, 'fs__wirte_file', { store }, r.io)).toBe(2);
    expect(r.out.stderr).toContain('no tool "fs__wirte_file" is known to this broker');
    expect(r.out.stderr).toContain('--force');
    expect(await store.getApproval('fs__wirte_file', 'local')).toBeUndefined();
    r = io();
    expect(await approveCommand(config, 'fs__wirte_file', { store, force: true }, r.io)).toBe(0);
    expect((await store.getApproval('fs__wirte_file', 'local'))?.decision).toBe('approved');
    // A tool an upstream listed is known.
    await store.observePin('fs__write_file', 'local', seen('h1'), 'a');
    expect(await approveCommand(config, 'fs__write_file', { store }, io().io)).toBe(0);
    await store.close();
  });

  it('approving a tool a deny rule covers says so (issue 18 §6)', async () => {
    const denying = parseConfig({ broker: { dataDir: 'store' }, policy: { rules: [{ tools: ['fs__write_*'], action: 'deny' }] } }, { baseDir: root });
    const store = SqliteStore.open(':memory:');
    await store.observePin('fs__write_file', 'local', seen('h1'), 'a');
    const r = io();
    expect(await approveCommand(denying, 'fs__write_file', { store }, r.io)).toBe(0);
    expect(r.out.stdout).toContain('note: policy.rules[0] (fs__write_*) still denies fs__write_file');
    await store.close();
  });

  it('a function module that fails to load with a principal token across the cut: the ConfigError shows none of it', async () => {
    // A principal's token: a secret the scrubber knows exactly. It starts 8 characters before the
    // cut at MODULE_ERROR_MAX_CHARS, which kept those 8 when it came before the scrub.
    const token = 'Zt9-principal-token-value';
    const withModule = parseConfig({ broker: { dataDir: 'store' }, principals: { alice: { token } }, functions: ['./broken.mjs'] }, { baseDir: root });
    const importModule = async (): Promise<Record<string, unknown>> => {
      throw new Error(`${'x'.repeat(MODULE_ERROR_MAX_CHARS - 10)} ${token} and the rest`);
    };
    const store = SqliteStore.open(':memory:');
    const err = await approveCommand(withModule, 'get_weather', { store, importModule }, io().io).catch((e: unknown) => e);
    await store.close();
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain('cannot load function module');
    expect((err as Error).message).not.toContain(token.slice(0, 4));
    expect((err as Error).message).toContain('[REDACTE');
  });

  it('a bad tool name or unknown principal is exit 2', async () => {
    let r = io();
    expect(await approveCommand(config, 'fs/write file', {}, r.io)).toBe(2);
    r = io();
    expect(await approveCommand(config, 'fx__echo', { principal: 'mallory' }, r.io)).toBe(2);
    expect(r.out.stderr).toContain('unknown principal');
  });
});
