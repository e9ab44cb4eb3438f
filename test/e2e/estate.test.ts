/**
 * The estate relay end to end through the real CLI: each `estate__*` tool, scope escapes answered
 * `guard_error` (`estate_scope_escape`), results scrubbed like any call, and the proposal life
 * cycle: propose writes nothing and is audited (record + published debug notification); apply is
 * asked by policy by default, and runs when approved or when a rule allows it.
 */
import { linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fixture, nodeServer, startBroker, waitFor, type StartedBroker } from './helpers.js';

const outcome = (r: { _meta?: unknown }) => (r._meta as Record<string, unknown> | undefined)?.['mcp-broker/outcome'];
const AWS_KEY = 'AKIAIOSFODNN7EXAMPLE';

let base: string;
let root: string;
let broker: StartedBroker | undefined;

beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'mcp-broker-estate-e2e-'));
  root = join(base, 'root');
  mkdirSync(join(root, 'docs'), { recursive: true });
  mkdirSync(join(base, 'outside'));
  writeFileSync(join(base, 'outside', 'canary.txt'), 'CANARY-e2e-outside\n');
  writeFileSync(join(root, 'docs', 'guide.md'), '# Guide\nThe estate relay reads this.\nSecond mention of the relay.\n');
  writeFileSync(join(root, 'creds.txt'), `deploy key ${AWS_KEY} (do not share)\n`);
  writeFileSync(join(root, 'long.txt'), 'x'.repeat(200));
  symlinkSync('../outside/canary.txt', join(root, 'escape'));
});

afterEach(async () => {
  await broker?.close();
  broker = undefined;
  rmSync(base, { recursive: true, force: true });
});

function start(extra: Record<string, unknown> = {}, capabilities?: Record<string, unknown>) {
  return startBroker({ servers: {}, extra: { estate: { root, maxBytes: 64, maxResults: 5 }, ...extra }, capabilities });
}

async function call(b: StartedBroker, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await b.client.callTool({ name, arguments: args }, { timeout: 30_000 })) as CallToolResult;
}

describe('estate relay (e2e)', () => {
  it("a root around the broker's own data (\"root\": \".\", the default ./data beside it): records and store refused, unlisted, and no snapshot flow (each was read through)", async () => {
    broker = await startBroker({ servers: {}, extra: { estate: { root: '.' } } });
    const b = broker;
    expect(outcome(await call(b, 'estate__stat', { path: 'servers.json' }))).toBe('ok');
    // A call, so the records file holds a record.
    expect(outcome(await call(b, 'estate__read_file', { path: 'servers.json' }))).toBe('ok');
    await waitFor(async () => (await b.records()).length > 0, 'a record written');
    for (const path of ['calls.ndjson', 'calls.ndjson.lock', 'data']) {
      const refused = await call(b, path === 'data' ? 'estate__list_dir' : 'estate__read_file', { path });
      expect(outcome(refused), path).toBe('guard_error');
      expect(JSON.stringify(refused.content)).toContain("broker's own data");
      expect(JSON.stringify(refused.content)).not.toContain('"callId"');
    }
    const listed = (await call(b, 'estate__list_dir', { path: '.' })).structuredContent as { entries: { name: string }[] };
    expect(listed.entries.map((e) => e.name)).toEqual(expect.arrayContaining(['servers.json']));
    expect(listed.entries.map((e) => e.name)).not.toEqual(expect.arrayContaining(['calls.ndjson']));
    expect(listed.entries.map((e) => e.name)).not.toContain('data');
    // A hard link to the records file is the records file: not searched (it was, by its other name).
    mkdirSync(join(b.dir, 'notes'));
    linkSync(b.recordsPath, join(b.dir, 'notes', 'today.txt'));
    const searched = await call(b, 'estate__search', { query: 'callId' });
    expect(outcome(searched)).toBe('ok');
    expect(searched.structuredContent).toMatchObject({ hits: [] });
    expect(outcome(await call(b, 'estate__read_file', { path: 'notes/today.txt' }))).toBe('guard_error');
    // Nor listed (it was, with the records file's size).
    expect((await call(b, 'estate__list_dir', { path: 'notes' })).structuredContent).toMatchObject({ entries: [], total: 0 });
    const flow = await call(b, 'broker__flow_run', { steps: [{ id: 'one', tool: 'estate__stat', args: { path: 'servers.json' } }], snapshot: 'estate' });
    expect(flow.isError).toBe(true);
    expect(JSON.stringify(flow.content)).toContain("would restore the broker's own data");
  });

  it("every file the broker writes beside the records file is its own: a rotation left from a larger maxFiles, the lock's temporary and stale files (each was read, listed and searched)", async () => {
    broker = await startBroker({ servers: {}, extra: { estate: { root: '.' }, broker: { records: { maxFiles: 2 } } } });
    const b = broker;
    // What the broker leaves beside broker.records.path: `<path>.5` from when maxFiles was 5
    // (rotation drops only `<path>.maxFiles`), and records-lock.ts's `<path>.lock.<pid>.<hex>`
    // (written, then hard-linked to `<path>.lock`) and `<path>.lock.stale.<pid>.<hex>`.
    const own = ['calls.ndjson.5', 'calls.ndjson.lock.4242.0badc0de', 'calls.ndjson.lock.stale.4242.0badc0de'];
    for (const name of own) writeFileSync(join(b.dir, name), `{"principal":"alice","args":{"text":"ALICE-OLD-RECORD"}}\n`);
    mkdirSync(join(b.dir, 'notes'));
    linkSync(join(b.dir, 'calls.ndjson.5'), join(b.dir, 'notes', 'old.txt'));
    for (const path of [...own, 'notes/old.txt']) {
      const refused = await call(b, 'estate__read_file', { path });
      expect(outcome(refused), path).toBe('guard_error');
      expect(JSON.stringify(refused.content), path).toContain("broker's own data");
    }
    const names = ((await call(b, 'estate__list_dir', { path: '.' })).structuredContent as { entries: { name: string }[] }).entries.map((e) => e.name);
    expect(names).toContain('servers.json');
    expect(names.filter((n) => n.startsWith('calls.ndjson'))).toEqual([]);
    expect((await call(b, 'estate__list_dir', { path: 'notes' })).structuredContent).toMatchObject({ entries: [], total: 0 });
    const searched = await call(b, 'estate__search', { query: 'ALICE-OLD' });
    expect(outcome(searched)).toBe('ok');
    expect(searched.structuredContent).toMatchObject({ hits: [] });
    // Nor may a proposal make one (a rotation name past maxFiles, a lock temporary).
    for (const path of ['calls.ndjson.7', 'calls.ndjson.lock.1.x']) {
      expect(outcome(await call(b, 'estate__propose_change', { path, content: 'forged', rationale: 'test' })), path).toBe('guard_error');
    }
  });

  it('serves the fixed tool list with its annotations', async () => {
    broker = await start();
    const tools = (await broker.client.listTools()).tools.filter((t) => t.name.startsWith('estate__'));
    expect(tools.map((t) => t.name)).toEqual([
      'estate__list_dir',
      'estate__read_file',
      'estate__search',
      'estate__stat',
      'estate__propose_change',
      'estate__list_proposals',
      'estate__apply_proposal',
    ]);
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    expect(byName.estate__apply_proposal!.annotations).toMatchObject({ destructiveHint: true });
    expect(byName.estate__read_file!.annotations).toMatchObject({ readOnlyHint: true });
  });

  it('estate.enabled false, or a missing estate.root (one warning naming it), advertise no estate__* tool', async () => {
    broker = await start({ estate: { root, enabled: false } });
    expect((await broker.client.listTools()).tools.filter((t) => t.name.startsWith('estate__'))).toEqual([]);
    await broker.close();
    const missing = join(base, 'no-such-root');
    const unrooted = (broker = await start({ estate: { root: missing } }));
    expect((await unrooted.client.listTools()).tools.filter((t) => t.name.startsWith('estate__'))).toEqual([]);
    // Logged once: awaited (stderr is a pipe read as it comes), then counted exactly.
    await waitFor(() => unrooted.stderr().includes(missing), 'the missing root logged');
    expect(unrooted.stderr().split('\n').filter((line) => line.includes(missing))).toHaveLength(1);
  });

  it('list_dir, read_file (bounded, says it truncated), search and stat work through the broker path and are recorded', async () => {
    broker = await start();
    const b = broker;
    const listing = await call(b, 'estate__list_dir', { path: '.' });
    expect(outcome(listing)).toBe('ok');
    expect(listing.structuredContent).toMatchObject({
      path: '.',
      entries: [
        { name: 'creds.txt', type: 'file' },
        { name: 'docs', type: 'dir' },
        { name: 'escape', type: 'symlink' },
        { name: 'long.txt', type: 'file', size: 200 },
      ],
      truncated: false,
    });

    const read = await call(b, 'estate__read_file', { path: 'long.txt' });
    expect(outcome(read)).toBe('ok');
    expect((read.content[0] as { text: string }).text).toBe('x'.repeat(64));
    expect((read.content[1] as { text: string }).text).toMatch(/truncated: bytes 0-64 of 200/);
    expect(read.structuredContent).toMatchObject({ truncated: true, nextOffset: 64 });
    const tail = await call(b, 'estate__read_file', { path: 'long.txt', offset: 190, length: 50 });
    expect(tail.structuredContent).toMatchObject({ bytes: 10, truncated: false });

    const search = await call(b, 'estate__search', { query: 'relay' });
    expect(search.structuredContent).toMatchObject({
      hits: [
        { path: 'docs/guide.md', line: 2, text: 'The estate relay reads this.' },
        // Only the first estate.maxBytes (64) bytes of each file are scanned.
        { path: 'docs/guide.md', line: 3, text: 'Second mention of the relay' },
      ],
      // docs/guide.md (66 bytes) and long.txt (200) were cut at maxBytes: hits may be missing.
      truncated: true,
      filesCut: 2,
    });

    const stat = await call(b, 'estate__stat', { path: 'docs' });
    expect(stat.structuredContent).toMatchObject({ path: 'docs', type: 'dir' });

    const records = await b.records();
    expect(records.map((r) => [r.subject, r.outcome])).toEqual([
      ['estate/list_dir', 'ok'],
      ['estate/read_file', 'ok'],
      ['estate/read_file', 'ok'],
      ['estate/search', 'ok'],
      ['estate/stat', 'ok'],
    ]);
  });

  it('a path leaving the root is guard_error, reason estate_scope_escape, and nothing outside is read', async () => {
    broker = await start();
    for (const path of ['../outside/canary.txt', 'escape', `${base}/outside/canary.txt`, 'docs/../../outside/canary.txt']) {
      const result = await call(broker, 'estate__read_file', { path });
      expect(outcome(result)).toBe('guard_error');
      expect(result.isError).toBe(true);
      expect((result.content[0] as { text: string }).text).toMatch(/^guard_error: estate_scope_escape: /);
      expect(JSON.stringify(result)).not.toContain('CANARY');
    }
    const records = await broker.records();
    expect(records).toHaveLength(4);
    for (const r of records) {
      expect(r.outcome).toBe('guard_error');
      expect(r.status).toBe(500);
      expect(r.reason).toMatch(/^estate_scope_escape: /);
    }
  });

  it("a 5,000-character path answered ENAMETOOLONG with the root's absolute path: now one line naming no host path", async () => {
    broker = await start();
    for (const tool of ['estate__read_file', 'estate__stat', 'estate__list_dir']) {
      const result = await call(broker, tool, { path: 'a'.repeat(5000) });
      expect(result.isError).toBe(true);
      const text = (result.content[0] as { text: string }).text;
      expect(text).not.toContain(base);
      expect(text).not.toContain('/proc/');
      expect(text).not.toContain('aaaaaaaaaa');
      expect(text).not.toMatch(/\n/);
    }
    for (const r of await broker.records()) expect(r.reason ?? '').not.toContain(base);
  });

  it('results are scrubbed like any call: a credential in an estate file never reaches the client', async () => {
    broker = await start({ estate: { root, maxBytes: 4096, maxResults: 5 } });
    const read = await call(broker, 'estate__read_file', { path: 'creds.txt' });
    expect(outcome(read)).toBe('ok');
    expect(JSON.stringify(read)).not.toContain(AWS_KEY);
    expect((read.content[0] as { text: string }).text).toContain('[REDACTED]');
    const search = await call(broker, 'estate__search', { query: 'deploy key' });
    expect(JSON.stringify(search)).not.toContain(AWS_KEY);
    expect(JSON.stringify(search)).toContain('[REDACTED]');
  });

  it('no offset, length or query shows or tests part of a secret: pieces three bytes long, a piece that ends inside one, a search for its start', async () => {
    const token = 'estate-e2e-exact-token-7c1f93';
    // One exact secret (an upstream's `env` value) and one shape (an AWS key), each in the middle of a line.
    writeFileSync(join(root, 'mixed.txt'), `first line\nTOKEN ${token} end\ndeploy ${AWS_KEY} done\n`);
    broker = await startBroker({
      servers: { leaky: nodeServer(fixture('leaky.mjs'), { env: { API_TOKEN: token } }) },
      extra: { estate: { root, maxBytes: 64, maxResults: 5 } },
    });
    const b = broker;
    const size = ((await call(b, 'estate__stat', { path: 'mixed.txt' })).structuredContent as { size: number }).size;
    let pieces = '';
    for (let offset = 0; offset < size; offset += 3) {
      const read = await call(b, 'estate__read_file', { path: 'mixed.txt', offset, length: 3 });
      expect(outcome(read)).toBe('ok');
      pieces += (read.content[0] as { text: string }).text;
    }
    // Each piece was shorter than any secret the scrub stage would know; the pieces put together tell none of them.
    for (const secret of [token, AWS_KEY]) {
      for (let at = 0; at + 4 <= secret.length; at++) expect(pieces, `a piece of ${secret}`).not.toContain(secret.slice(at, at + 4));
    }
    expect(pieces).toContain('first line\nTOKEN [REDACTED]');
    expect(pieces).toContain(' end\ndeploy [REDACTED]');
    // A piece ending inside the token, one starting inside the key.
    const head = await call(b, 'estate__read_file', { path: 'mixed.txt', offset: 0, length: 11 + 6 + 12 });
    expect((head.content[0] as { text: string }).text).toBe('first line\nTOKEN [REDACTED]');
    const tail = await call(b, 'estate__read_file', { path: 'mixed.txt', offset: size - 14 });
    expect((tail.content[0] as { text: string }).text).toBe('[REDACTED] done\n');
    // A search for the start of a secret finds nothing; for the text around it, the line masked.
    for (const query of [token.slice(0, 12), `TOKEN ${token.slice(0, 5)}`, AWS_KEY.slice(0, 8), `deploy ${AWS_KEY.slice(0, 6)}`]) {
      const search = await call(b, 'estate__search', { query, caseSensitive: true });
      expect(search.structuredContent, query).toMatchObject({ hits: [] });
    }
    const around = await call(b, 'estate__search', { query: 'TOKEN ' });
    expect(around.structuredContent).toMatchObject({ hits: [{ path: 'mixed.txt', line: 2, text: 'TOKEN [REDACTED] end' }] });
  });

  it('a file that is not valid UTF-8 (one Latin-1 byte, no NUL): pieces three bytes long tell nothing of a secret spelled past ASCII', async () => {
    const token = 'schlüssel-e2e-geheim-ä41';
    // The UTF-8 reading of the window was dropped for the whole window at the first bad byte.
    const file = Buffer.concat([Buffer.from('caf\xe9 (Latin-1)\n', 'latin1'), Buffer.from(`TOKEN ${token} end\npassword=àbcdefghij\n`)]);
    writeFileSync(join(root, 'latin.txt'), file);
    broker = await startBroker({
      servers: { leaky: nodeServer(fixture('leaky.mjs'), { env: { API_TOKEN: token } }) },
      extra: { estate: { root, maxBytes: 64, maxResults: 5 } },
    });
    const b = broker;
    let pieces = '';
    for (let offset = 0; offset < file.length; offset += 3) {
      const read = await call(b, 'estate__read_file', { path: 'latin.txt', offset, length: 3 });
      expect(outcome(read)).toBe('ok');
      pieces += (read.content[0] as { text: string }).text;
    }
    for (const secret of [token, 'bcdefghij']) {
      for (let at = 0; at + 4 <= secret.length; at++) expect(pieces, `a piece of ${secret}`).not.toContain(secret.slice(at, at + 4));
    }
    expect(pieces).toContain('TOKEN [REDACTED]');
    expect(pieces).toContain('password=[REDACTED]');
  });

  it('propose writes nothing and is audited; apply is asked by default and refused without elicitation', async () => {
    broker = await start();
    const b = broker;
    await b.client.setLoggingLevel('debug');
    const proposed = await call(b, 'estate__propose_change', { path: 'docs/guide.md', content: '# Rewritten\n', rationale: 'shorter' });
    expect(outcome(proposed)).toBe('ok');
    const id = (proposed.structuredContent as { id: string }).id;
    expect(id).toMatch(/^prop_/);
    expect(readFileSync(join(root, 'docs', 'guide.md'), 'utf8')).toContain('The estate relay reads this.');

    const records = await b.records();
    expect(records.at(-1)).toMatchObject({ subject: 'estate/propose_change', outcome: 'ok', proposal: { id, action: 'proposed', path: 'docs/guide.md' } });
    // The published record (debug notification, logger mcp-broker) carries the proposal too.
    await waitFor(
      () => b.notifications.find((n) => n.method === 'notifications/message' && (n.params?.data as { proposal?: { id: string } })?.proposal?.id === id),
      'the published record of the proposal',
    );

    const listed = await call(b, 'estate__list_proposals', {});
    expect((listed.structuredContent as { proposals: { id: string; status: string }[] }).proposals).toEqual([
      expect.objectContaining({ id, status: 'pending', path: 'docs/guide.md', rationale: 'shorter' }),
    ]);

    const applied = await call(b, 'estate__apply_proposal', { id });
    expect(outcome(applied)).toBe('approval_required');
    expect(readFileSync(join(root, 'docs', 'guide.md'), 'utf8')).toContain('The estate relay reads this.');
    const still = await call(b, 'estate__list_proposals', { status: 'pending' });
    expect((still.structuredContent as { proposals: unknown[] }).proposals).toHaveLength(1);
  });

  it('apply runs once the human approves (elicitation), and its record carries the proposal', async () => {
    broker = await start({}, { elicitation: {} });
    const b = broker;
    const asked: string[] = [];
    b.client.setRequestHandler('elicitation/create', async (req) => {
      asked.push(req.params.message);
      return { action: 'accept', content: {} };
    });
    const diff = ['@@ -1,3 +1,3 @@', ' # Guide', '-The estate relay reads this.', '+The estate relay applied this.', ' Second mention of the relay.', ''].join('\n');
    const proposed = await call(b, 'estate__propose_change', { path: 'docs/guide.md', unifiedDiff: diff, rationale: 'wording' });
    const id = (proposed.structuredContent as { id: string }).id;
    const applied = await call(b, 'estate__apply_proposal', { id });
    expect(outcome(applied)).toBe('ok');
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain('estate__apply_proposal');
    expect(readFileSync(join(root, 'docs', 'guide.md'), 'utf8')).toBe('# Guide\nThe estate relay applied this.\nSecond mention of the relay.\n');
    expect((await b.records()).at(-1)).toMatchObject({ subject: 'estate/apply_proposal', outcome: 'ok', proposal: { id, action: 'applied', path: 'docs/guide.md' } });
  });

  it('a policy rule that allows apply_proposal replaces the default ask', async () => {
    broker = await start({ policy: { rules: [{ tools: ['estate__apply_proposal'], action: 'allow' }] } });
    const proposed = await call(broker, 'estate__propose_change', { path: 'new/file.txt', content: 'hi\n', rationale: 'r' });
    // The folder must exist inside the root: a new file only, never a new folder.
    expect(outcome(proposed)).toBe('tool_error');
    const ok = await call(broker, 'estate__propose_change', { path: 'docs/new.txt', content: 'hi\n', rationale: 'r' });
    const id = (ok.structuredContent as { id: string }).id;
    const applied = await call(broker, 'estate__apply_proposal', { id });
    expect(outcome(applied)).toBe('ok');
    expect(readFileSync(join(root, 'docs', 'new.txt'), 'utf8')).toBe('hi\n');
  });
});
