/**
 * Chaining: a broker as the upstream of another broker, stdio → http and http → http, through
 * real CLIs. Names nest within 64 characters (and still route), and progress, cancellation and
 * `list_changed` cross both hops. The inner broker requires a bearer token, which the outer one
 * sends from `${env:…}` in its server `headers`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult, Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, readNdjson, startBroker, waitFor, type RecordLine, type SeenNotification } from './helpers.js';
import { connectHttp, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const INNER_TOKEN = 'inner-broker-token-0123456789';
/** Long on purpose: the nested names pass 64 characters and must be cut with a hash. */
const LONG_KEY = 'an_upstream_server_key_long_enough_to_overflow_at_hop_2';

describe('broker chains', () => {
  let logDir: string;
  let logPath: string;
  let inner: HttpBroker;

  beforeAll(async () => {
    logDir = mkdtempSync(join(tmpdir(), 'mcp-broker-chain-'));
    logPath = join(logDir, 'fixture.ndjson');
    inner = await startHttpBroker({
      servers: { [LONG_KEY]: nodeServer(fixture('echo.mjs'), { env: { FIXTURE_LOG: logPath } }) },
      extra: { principals: { outer: { token: '${env:INNER_TOKEN}' } } },
      env: { INNER_TOKEN },
    });
  });
  afterAll(async () => {
    await inner?.close();
    rmSync(logDir, { recursive: true, force: true });
  });

  describe.each(['stdio', 'http'] as const)('%s → http', (outerKind) => {
    let client: Client;
    let notifications: SeenNotification[];
    let outerRecords: () => RecordLine[];
    let closeOuter: () => Promise<void>;
    const fixtureEvents = () => readNdjson<{ event: string; tool?: string }>(logPath);

    beforeAll(async () => {
      const servers = { hop: { type: 'http', url: `${inner.url}/mcp`, headers: { Authorization: 'Bearer ${env:INNER_TOKEN}' } } };
      const env = { INNER_TOKEN };
      if (outerKind === 'stdio') {
        const outer = await startBroker({ servers, env });
        client = outer.client;
        notifications = outer.notifications;
        outerRecords = () => readNdjson(outer.recordsPath);
        closeOuter = outer.close;
      } else {
        const outer = await startHttpBroker({ servers, env });
        const connected = await connectHttp(outer.url, 'streamable');
        client = connected.client;
        notifications = connected.notifications;
        outerRecords = outer.records;
        closeOuter = async () => {
          await connected.close();
          await outer.close();
        };
      }
    });
    afterAll(async () => closeOuter?.());

    /** The nested name of an inner fixture tool, found by its description (the name may be cut). */
    const nameOf = async (toolName: 'echo' | 'slow' | 'emit') => {
      const description = { echo: 'echo text', slow: 'slow', emit: 'emit notifications' }[toolName];
      const tools = (await client.listTools()).tools;
      const found = tools.find((t) => t.name.startsWith('hop__') && t.description === description);
      if (!found) throw new Error(`no nested ${toolName} in ${tools.map((t) => t.name).join(', ')}`);
      return found.name;
    };

    it('nests names within 64 characters, and the cut names still route', async () => {
      const names = (await client.listTools()).tools.map((t) => t.name).filter((n) => n.startsWith('hop__'));
      expect(names.length).toBeGreaterThanOrEqual(4);
      for (const name of names) expect(name).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
      // `hop__` + the inner name would be 70+ characters: cut, with a hash suffix.
      expect(names.some((n) => n.length === 64)).toBe(true);
      const echo = await nameOf('echo');
      const result = await client.callTool({ name: echo, arguments: { text: 'two hops' } });
      expect((result.content as { text: string }[])[0]!.text).toBe('two hops');
      const record = await waitFor(() => inner.records().find((r) => r.principal === 'outer' && (r.args as { text?: string }).text === 'two hops'), 'the inner record');
      expect(record.subject).toBe(`${LONG_KEY}/echo`);
    });

    it('progress crosses both hops', async () => {
      const seen: number[] = [];
      await client.callTool({ name: await nameOf('slow'), arguments: { ms: 600, tickMs: 100 } }, { onprogress: (p) => seen.push(p.progress) });
      expect(seen.length).toBeGreaterThanOrEqual(1);
    });

    it('cancellation crosses both hops and reaches the innermost upstream', async () => {
      const before = fixtureEvents().length;
      const aborter = new AbortController();
      const call = client.callTool({ name: await nameOf('slow'), arguments: { ms: 30_000 } }, { signal: aborter.signal });
      await waitFor(() => fixtureEvents().slice(before).some((e) => e.event === 'call' && e.tool === 'slow'), 'the slow call at the innermost upstream', 15_000);
      aborter.abort('cancelled by the test');
      await expect(call).rejects.toThrow();
      await waitFor(() => fixtureEvents().slice(before).some((e) => e.event === 'cancelled' && e.tool === 'slow'), 'the innermost upstream to see the cancel', 15_000);
      await waitFor(() => outerRecords().some((r) => r.outcome === 'cancelled'), 'a cancelled record at the outer broker');
      await waitFor(() => inner.records().some((r) => r.outcome === 'cancelled'), 'a cancelled record at the inner broker');
    });

    it('list_changed crosses both hops', async () => {
      const from = notifications.length;
      await client.callTool({ name: await nameOf('emit'), arguments: {} });
      await waitFor(() => notifications.slice(from).some((n) => n.method === 'notifications/tools/list_changed'), 'tools/list_changed at the outer client', 15_000);
    });
  });
});

/**
 * Issue 17 §6: the inner broker restarts on the same port, so every session the outer broker held
 * is unknown there (HTTP 404 "Session not found"). The outer broker opens a new session once, a
 * read-only call is retried on it transparently, a write is answered `upstream_error` without
 * running, and none of it counts against the breaker (nor does a manual reconnect after it).
 */
describe('a restarted inner broker (HTTP 404 for the session we hold)', () => {
  const innerServers = { up: nodeServer(fixture('broker-upstream.mjs')), prims: nodeServer(fixture('primitives.mjs')) };
  let inner: HttpBroker | undefined;
  let port: string;
  let outer: Awaited<ReturnType<typeof startBroker>>;
  const outcomeOf = (r: { _meta?: unknown }) => (r._meta as Record<string, unknown> | undefined)?.['mcp-broker/outcome'];
  /** The outer broker's log lines saying an upstream connection to `hop` is ready. */
  const readyLines = () => outer.stderr().split('\n').filter((l) => l.includes('"upstream":"hop"') && l.includes('upstream ready')).length;
  const outerRecord = async (text: string) => waitFor(async () => (await outer.records()).find((r) => (r.args as { text?: string }).text === text), `the outer record of "${text}"`);

  /** Stops the inner broker and starts a new one on the same port; resolves once it listens. */
  async function restartInner(): Promise<void> {
    await inner!.close();
    inner = await startHttpBroker({ servers: innerServers, args: ['--port', port] });
    expect(inner.url).toBe(`http://127.0.0.1:${port}`);
  }

  beforeAll(async () => {
    inner = await startHttpBroker({ servers: innerServers });
    port = new URL(inner.url).port;
    outer = await startBroker({
      // `hop2` is a second connection to the same inner broker, with breakers of its own.
      // Spoken to in the 2025 era (`era: "legacy"`): a 2026-07-28 exchange has no session to lose.
      servers: { hop: { type: 'http', url: `${inner.url}/mcp`, era: 'legacy' }, hop2: { type: 'http', url: `${inner.url}/mcp`, era: 'legacy' } },
      // No automatic re-dial inside the test: only the session renewal may open a new session.
      extra: { broker: { restart: { initialDelayMs: 3_600_000, maxDelayMs: 3_600_000 }, breaker: { threshold: 1, openMs: 60_000 } } },
    });
  });
  afterAll(async () => {
    await outer?.close();
    await inner?.close();
  });

  it('a read-only call after the restart is retried on a new session: ok, attempts 2, breaker closed', async () => {
    const before = (await outer.client.callTool({ name: 'hop__up__read', arguments: { text: 'before' } })) as CallToolResult;
    expect(outcomeOf(before)).toBe('ok');
    const dials = readyLines();
    await restartInner();

    const after = (await outer.client.callTool({ name: 'hop__up__read', arguments: { text: 'after' } })) as CallToolResult;
    expect(outcomeOf(after)).toBe('ok');
    expect(JSON.stringify(after.content)).toContain('after');
    expect(await outerRecord('after')).toMatchObject({ outcome: 'ok', attempts: 2, breaker: 'closed' });
    // The re-dial's ready line can reach stderr after the answer: awaited, then counted exactly.
    await waitFor(() => readyLines() > dials, 'the re-dial ready line');
    expect(readyLines()).toBe(dials + 1);
    // The inner broker ran it once, on the new session.
    expect(inner!.records().filter((r) => (r.args as { text?: string }).text === 'after')).toHaveLength(1);
  }, 60_000);

  it('a write after the restart is not retried: upstream_error saying the session was lost, not run, breaker closed', async () => {
    await restartInner();
    const write = (await outer.client.callTool({ name: 'hop__up__write', arguments: { text: 'lost write' } })) as CallToolResult;
    expect(outcomeOf(write)).toBe('upstream_error');
    const record = await outerRecord('lost write');
    expect(record).toMatchObject({ outcome: 'upstream_error', attempts: 1, breaker: 'closed' });
    expect(record.reason).toMatch(/session/);
    expect(record.reason).toMatch(/not processed/);
    expect(inner!.records().filter((r) => r.name === 'up__write')).toEqual([]);
    // The session was renewed by that call: the same write, sent again, runs once (threshold 1: the breaker stayed closed).
    const again = (await outer.client.callTool({ name: 'hop__up__write', arguments: { text: 'write again' } })) as CallToolResult;
    expect(outcomeOf(again)).toBe('ok');
    expect(await outerRecord('write again')).toMatchObject({ outcome: 'ok', attempts: 1, breaker: 'closed' });
  }, 60_000);

  it('calls that meet the lost session at once open one new session between them', async () => {
    await restartInner();
    const dials = readyLines();
    const texts = ['c1', 'c2', 'c3', 'c4'];
    const results = (await Promise.all(texts.map((text) => outer.client.callTool({ name: 'hop__up__slow', arguments: { ms: 1, text } })))) as CallToolResult[];
    expect(results.map(outcomeOf)).toEqual(['ok', 'ok', 'ok', 'ok']);
    const records = await Promise.all(texts.map(outerRecord));
    for (const record of records) expect(record).toMatchObject({ outcome: 'ok', breaker: 'closed' });
    // At least one met the 404 (and was retried), yet the connection was re-dialled once. How many
    // met it depends on how the four reach the outer broker (one chunk or several): a CI run beside
    // another test file saw one, where the test had asked for two.
    expect(records.filter((r) => r.attempts === 2).length).toBeGreaterThanOrEqual(1);
    // The re-dial's ready line can reach stderr after the answers: awaited, then counted exactly.
    await waitFor(() => readyLines() > dials, 'the re-dial ready line');
    expect(readyLines()).toBe(dials + 1);
  }, 60_000);

  it('a prompts/get after the restart is sent again on a new session', async () => {
    const listed = async () => (await outer.client.listPrompts()).prompts.some((p) => p.name === 'hop__prims__greet');
    await waitFor(listed, 'the inner prompt listed at the outer broker', 20_000, 100);
    await restartInner();
    const dials = readyLines();
    const prompt = await outer.client.getPrompt({ name: 'hop__prims__greet', arguments: { who: 'ada' } });
    expect(JSON.stringify(prompt.messages)).toContain('ada');
    await waitFor(() => readyLines() > dials, 'the re-dial ready line');
    expect(readyLines()).toBe(dials + 1);
  }, 60_000);

  it('a manual broker__reconnect after the restart does not open the breaker', async () => {
    await restartInner();
    // The first call after the restart meets the lost session (hop2 never called before: its first session).
    const first = (await outer.client.callTool({ name: 'hop2__up__read', arguments: { text: 'r0' } })) as CallToolResult;
    expect(outcomeOf(first), JSON.stringify(first.content)).toBe('ok');
    expect(await outerRecord('r0')).toMatchObject({ outcome: 'ok', attempts: 2, breaker: 'closed' });
    const answer = (await outer.client.callTool({ name: 'broker__reconnect', arguments: { server: 'hop2' } }, { timeout: 30_000 })) as CallToolResult;
    expect(answer.structuredContent).toMatchObject({ outcome: 'accepted', status: { state: 'ready' } });
    for (const text of ['r1', 'r2']) {
      const result = (await outer.client.callTool({ name: 'hop2__up__read', arguments: { text } })) as CallToolResult;
      expect(outcomeOf(result)).toBe('ok');
      expect(await outerRecord(text)).toMatchObject({ outcome: 'ok', attempts: 1, breaker: 'closed' });
    }
  }, 60_000);

  it('a prompts/get answered on a renewed session counts as an answer: a second restart is renewed again, not refused', async () => {
    await restartInner();
    await outer.client.getPrompt({ name: 'hop__prims__greet', arguments: { who: 'bo' } });
    await restartInner();
    const prompt = await outer.client.getPrompt({ name: 'hop__prims__greet', arguments: { who: 'cy' } });
    expect(JSON.stringify(prompt.messages)).toContain('cy');
  }, 60_000);

  it('writes sent together with other calls into a lost session are never counted against the breaker (threshold 1)', async () => {
    for (const round of [1, 2]) {
      await restartInner();
      const texts = [`w${round}a`, `w${round}b`, `w${round}c`];
      const answers = (await Promise.all([
        ...texts.map((text) => outer.client.callTool({ name: 'hop__up__write', arguments: { text } })),
        outer.client.callTool({ name: 'hop__up__read', arguments: { text: `r${round}` } }),
      ])) as CallToolResult[];
      for (const a of answers.slice(0, 3)) expect(['ok', 'upstream_error']).toContain(outcomeOf(a));
      for (const text of texts) {
        const record = await outerRecord(text);
        expect(record.breaker).toBe('closed');
        if (record.outcome === 'upstream_error') expect(record.reason).toMatch(/session/);
      }
    }
    const after = (await outer.client.callTool({ name: 'hop__up__write', arguments: { text: 'after rounds' } })) as CallToolResult;
    expect(outcomeOf(after)).toBe('ok');
  }, 90_000);
});
