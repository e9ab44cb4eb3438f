/**
 * Chaining: a broker as the upstream of another broker, stdio → http and http → http, through
 * real CLIs. Names nest within 64 characters (and still route), and progress, cancellation and
 * `list_changed` cross both hops. The inner broker requires a bearer token, which the outer one
 * sends from `${env:…}` in its server `headers`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
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
