/**
 * Both protocol eras downstream, decided per request (issue 13 §2, §4): an SDK v2 client with
 * `versionNegotiation: {mode: 'auto'}` reaches the 2026-07-28 (modern) era over stdio and over
 * Streamable HTTP, in front of the bundled npm servers (server-everything, -filesystem, -memory),
 * and lists, calls with progress, reads resources and gets prompts; a legacy client (the v2
 * client's default mode, `initialize` as v1 sends it) does the same in the legacy era. Each modern call leaves one record with `sessionId: null` and the
 * unit its `_meta` names. Raw HTTP checks the modern answers: -32020, -32022, -32602, 405.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, npmServer, readNdjson, waitFor, writeConfig, type RecordLine } from './helpers.js';
import { MCP_POST_HEADERS, http, sseMessages, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const MODERN = '2026-07-28';

/** The bundled npm servers, as servers.json has them, on a temp workspace and memory file. */
function bundledServers(workspace: string): Record<string, unknown> {
  return {
    everything: { command: 'node', args: [npmServer('server-everything'), 'stdio'] },
    fs: { command: 'node', args: [npmServer('server-filesystem'), workspace] },
    memory: { command: 'node', args: [npmServer('server-memory')], env: { MEMORY_FILE_PATH: join(workspace, 'memory.jsonl') } },
  };
}

function tempWorkspace(): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-era-'));
  writeFileSync(join(dir, 'hello.txt'), 'hello from the workspace\n');
  return dir;
}

/** What every client of either era does against the bundled servers; returns the call ids it made. */
async function exercise(client: Pick<Client, 'listTools' | 'callTool' | 'readResource' | 'getPrompt' | 'listResources' | 'listPrompts'>, workspace: string): Promise<string[]> {
  const callIds: string[] = [];
  const call = async (name: string, args: Record<string, unknown>, options?: { onprogress?: (p: { progress: number }) => void }) => {
    const result = (await client.callTool({ name, arguments: args }, options as never)) as { content: Array<{ text?: string }>; _meta?: Record<string, unknown> };
    expect(result._meta?.['mcp-broker/outcome']).toBe('ok');
    callIds.push(result._meta?.['mcp-broker/callId'] as string);
    return result;
  };
  const names = (await client.listTools()).tools.map((t) => t.name);
  expect(names).toEqual(expect.arrayContaining(['everything__echo', 'fs__read_text_file', 'memory__read_graph', 'broker__reconnect']));

  const progress: number[] = [];
  const long = await call('everything__trigger-long-running-operation', { duration: 1, steps: 3 }, { onprogress: (p) => progress.push(p.progress) });
  expect(long.content[0]?.text).toContain('Long running operation completed');
  expect(progress.length).toBeGreaterThanOrEqual(1);

  expect((await call('fs__read_text_file', { path: join(workspace, 'hello.txt') })).content[0]?.text).toContain('hello from the workspace');
  await call('memory__create_entities', { entities: [{ name: 'era', entityType: 'test', observations: ['both eras'] }] });
  expect(JSON.stringify((await call('memory__read_graph', {})).content)).toContain('both eras');

  const resources = (await client.listResources()).resources;
  const document = resources.find((r) => r.uri.startsWith('demo://resource/static/document/'));
  expect(document).toBeDefined();
  const read = await client.readResource({ uri: document!.uri });
  expect(read.contents[0]?.uri).toBe(document!.uri);

  expect((await client.listPrompts()).prompts.map((p) => p.name)).toContain('everything__simple-prompt');
  const prompt = await client.getPrompt({ name: 'everything__simple-prompt' });
  expect(JSON.stringify(prompt.messages)).toContain('simple prompt');
  return callIds;
}

function modernClient(): Client {
  return new Client({ name: 'era-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
}

function recordsOf(path: string, callIds: string[]): RecordLine[] {
  const byId = new Map(readNdjson(path).map((r) => [r.callId, r]));
  return callIds.map((id) => byId.get(id)!).filter(Boolean);
}

describe('protocol eras over stdio', () => {
  let workspace: string;
  beforeAll(() => {
    workspace = tempWorkspace();
  });
  afterAll(() => rmSync(workspace, { recursive: true, force: true }));

  it('a negotiating v2 client reaches the modern era and lists, calls with progress, reads and gets prompts; each call is recorded without a session, in the unit its _meta names', async () => {
    const { dir, configPath, recordsPath } = writeConfig(bundledServers(workspace));
    const client = modernClient();
    try {
      await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), { timeout: 30_000 });
      expect(client.getProtocolEra()).toBe('modern');
      const discover = client.getDiscoverResult() as unknown as Record<string, unknown>;
      expect(discover.supportedVersions).toContain(MODERN);
      expect(discover.cacheScope).toBe('private');
      expect((discover._meta as Record<string, { name?: string }>)['io.modelcontextprotocol/serverInfo']?.name).toBe('mcp-broker');
      const callIds = await exercise(client, workspace);
      const keyed = (await client.callTool({ name: 'everything__echo', arguments: { message: 'unit' }, _meta: { 'mcp-broker/unit': 'job-1' } })) as { _meta?: Record<string, unknown> };
      const records = await waitFor(() => {
        const found = recordsOf(recordsPath, [...callIds, keyed._meta?.['mcp-broker/callId'] as string]);
        return found.length === callIds.length + 1 ? found : undefined;
      }, 'a record per modern call');
      for (const r of records) expect(r.sessionId).toBeNull();
      expect(records.slice(0, -1).map((r) => r.unit)).toEqual(callIds.map(() => 'modern:local'));
      expect(records.at(-1)!.unit).toBe('modern:local/job-1');
    } finally {
      await client.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a legacy client stays in the legacy era and does the same, in its session', async () => {
    const { dir, configPath, recordsPath } = writeConfig(bundledServers(workspace));
    const client = new Client({ name: 'era-test-legacy', version: '1.0.0' });
    try {
      await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore' }), { timeout: 30_000 });
      expect(client.getProtocolEra()).toBe('legacy');
      expect(client.getServerVersion()?.name).toBe('mcp-broker');
      const callIds = await exercise(client, workspace);
      const records = await waitFor(() => {
        const found = recordsOf(recordsPath, callIds);
        return found.length === callIds.length ? found : undefined;
      }, 'a record per legacy call');
      const sessions = new Set(records.map((r) => r.sessionId));
      expect(sessions.size).toBe(1);
      expect([...sessions][0]).toMatch(/^[0-9a-f-]{36}$/);
      expect(records.every((r) => r.unit === r.sessionId)).toBe(true);
    } finally {
      await client.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('protocol eras over streamable http', () => {
  let workspace: string;
  let broker: HttpBroker;
  beforeAll(async () => {
    workspace = tempWorkspace();
    broker = await startHttpBroker({ servers: bundledServers(workspace) });
  });
  afterAll(async () => {
    await broker?.close();
    rmSync(workspace, { recursive: true, force: true });
  });

  const envelope = (more: Record<string, unknown> = {}) => ({
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    ...more,
  });
  const modernHeaders = (method: string, name?: string) => ({
    ...MCP_POST_HEADERS,
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
    ...(name !== undefined && { 'mcp-name': name }),
  });

  it('a negotiating v2 client reaches the modern era without a session and does everything a client does; records carry no session', async () => {
    const client = modernClient();
    const seen: string[] = [];
    const transport = new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`), {
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        if (res.headers.get('mcp-session-id')) seen.push(res.headers.get('mcp-session-id')!);
        return res;
      },
    });
    try {
      await client.connect(transport, { timeout: 30_000 });
      expect(client.getProtocolEra()).toBe('modern');
      const callIds = await exercise(client, workspace);
      expect(seen).toEqual([]);
      expect(transport.sessionId).toBeUndefined();
      const records = await waitFor(() => {
        const found = recordsOf(broker.recordsPath, callIds);
        return found.length === callIds.length ? found : undefined;
      }, 'a record per modern call');
      for (const r of records) {
        expect(r.sessionId).toBeNull();
        expect(r.unit).toBe('modern:local');
        expect(r.principal).toBe('local');
      }
    } finally {
      await client.close().catch(() => undefined);
    }
  });

  it('a legacy client stays in the legacy era, with a session', async () => {
    const client = new Client({ name: 'era-test-legacy', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`));
    try {
      await client.connect(transport, { timeout: 30_000 });
      expect(client.getProtocolEra()).toBe('legacy');
      expect(transport.sessionId).toMatch(/^[0-9a-f-]{36}$/);
      const callIds = await exercise(client, workspace);
      const records = await waitFor(() => {
        const found = recordsOf(broker.recordsPath, callIds);
        return found.length === callIds.length ? found : undefined;
      }, 'a record per legacy call');
      expect(records.every((r) => r.sessionId === transport.sessionId)).toBe(true);
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close().catch(() => undefined);
    }
  });

  it('a modern request whose Mcp-Method header disagrees with its body is refused -32020, HTTP 400', async () => {
    const res = await http(`${broker.url}/mcp`, {
      headers: modernHeaders('tools/list'),
      body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'everything__echo', arguments: { message: 'x' }, _meta: envelope() } },
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ id: 1, error: { code: -32020 } });
  });

  it('a modern request whose Mcp-Name disagrees with the tool named in the body is refused -32020, HTTP 400, and nothing is called', async () => {
    const before = readNdjson(broker.recordsPath).length;
    const res = await http(`${broker.url}/mcp`, {
      headers: modernHeaders('tools/call', 'everything__get-sum'),
      body: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'everything__echo', arguments: { message: 'x' }, _meta: envelope() } },
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ id: 2, error: { code: -32020 } });
    expect(readNdjson(broker.recordsPath).length).toBe(before);
  });

  it('a request naming an unknown revision is refused -32022 with the supported list, HTTP 400', async () => {
    const res = await http(`${broker.url}/mcp`, {
      headers: { ...modernHeaders('tools/list'), 'mcp-protocol-version': '2099-01-01' },
      body: { jsonrpc: '2.0', id: 3, method: 'tools/list', params: { _meta: envelope({ 'io.modelcontextprotocol/protocolVersion': '2099-01-01' }) } },
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ id: 3, error: { code: -32022, data: { supported: [MODERN], requested: '2099-01-01' } } });
  });

  it('an envelope without clientCapabilities is refused -32602 naming the field, HTTP 400', async () => {
    const meta = envelope();
    delete (meta as Record<string, unknown>)['io.modelcontextprotocol/clientCapabilities'];
    const res = await http(`${broker.url}/mcp`, { headers: modernHeaders('tools/list'), body: { jsonrpc: '2.0', id: 4, method: 'tools/list', params: { _meta: meta } } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ id: 4, error: { code: -32602 } });
    expect(res.body.error.message).toContain('io.modelcontextprotocol/clientCapabilities');
  });

  it('a modern client GET or DELETE is 405; a modern result has resultType, the broker identity and private cache hints, and no Mcp-Session-Id', async () => {
    for (const method of ['GET', 'DELETE']) {
      const res = await http(`${broker.url}/mcp`, { method, headers: { accept: 'text/event-stream', 'mcp-protocol-version': MODERN } });
      expect(res.status).toBe(405);
    }
    const res = await http(`${broker.url}/mcp`, { headers: modernHeaders('tools/list'), body: { jsonrpc: '2.0', id: 5, method: 'tools/list', params: { _meta: envelope() } } });
    expect(res.status).toBe(200);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    const answer = res.body ?? sseMessages(res.text).find((m) => m.id === 5);
    expect(answer.result).toMatchObject({ resultType: 'complete', ttlMs: 0, cacheScope: 'private', _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'mcp-broker' } } });
    const names = (answer.result.tools as Array<{ name: string }>).map((t) => t.name);
    expect(names).toEqual([...names].sort());
  });

  it('a malformed unit key is refused -32602 naming the field, and nothing is called', async () => {
    const before = readNdjson(broker.recordsPath).length;
    const res = await http(`${broker.url}/mcp`, {
      headers: modernHeaders('tools/call', 'everything__echo'),
      body: { jsonrpc: '2.0', id: 6, method: 'tools/call', params: { name: 'everything__echo', arguments: { message: 'x' }, _meta: envelope({ 'mcp-broker/unit': 'no spaces allowed' }) } },
    });
    const answer = res.body ?? sseMessages(res.text).find((m) => m.id === 6);
    expect(answer.error).toMatchObject({ code: -32602 });
    expect(answer.error.message).toContain('mcp-broker/unit');
    expect(readNdjson(broker.recordsPath).length).toBe(before);
  });

  it('a modern call gets log notifications only when its request asks for them (_meta logLevel)', async () => {
    const logsOf = async (id: number, meta: Record<string, unknown>) => {
      const res = await http(`${broker.url}/mcp`, {
        headers: modernHeaders('tools/call', 'everything__echo'),
        body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'everything__echo', arguments: { message: 'log?' }, _meta: meta } },
      });
      expect(res.status).toBe(200);
      const messages = res.body !== undefined ? [res.body] : sseMessages(res.text);
      expect(messages.find((m) => m.id === id)?.result?._meta?.['mcp-broker/outcome']).toBe('ok');
      return messages.filter((m) => m.method === 'notifications/message');
    };
    expect(await logsOf(7, envelope())).toEqual([]);
    const asked = await logsOf(8, envelope({ 'io.modelcontextprotocol/logLevel': 'debug' }));
    expect(asked.length).toBeGreaterThanOrEqual(1);
    expect(asked[0].params).toMatchObject({ level: 'debug', logger: 'mcp-broker' });
  });

  it('closing the response stream of a modern call cancels it upstream: recorded cancelled', async () => {
    const client = modernClient();
    await client.connect(new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`)), { timeout: 30_000 });
    try {
      const aborter = new AbortController();
      const started = client.callTool(
        { name: 'everything__trigger-long-running-operation', arguments: { duration: 30, steps: 30 } },
        { signal: aborter.signal, onprogress: () => aborter.abort() },
      );
      await expect(started).rejects.toThrow();
      const record = await waitFor(
        () => readNdjson(broker.recordsPath).find((r) => r.name === 'everything__trigger-long-running-operation' && r.outcome === 'cancelled'),
        'the cancelled call record',
        15_000,
      );
      expect(record.sessionId).toBeNull();
      expect(record.durationMs).toBeLessThan(20_000);
    } finally {
      await client.close().catch(() => undefined);
    }
  });

  it('a sessionless caller re-dials an upstream through POST /v1/mcp/reconnect, recorded in the unit it names with sessionId null', async () => {
    const res = await http(`${broker.url}/v1/mcp/reconnect`, { body: { server: 'memory', unit: 'ops-1' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ sessionId: null, server: 'memory', outcome: 'accepted' });
    const record = await waitFor(() => readNdjson(broker.recordsPath).find((r) => r.callId === res.body.callId), 'the reconnect record');
    expect(record).toMatchObject({ name: 'broker__reconnect', sessionId: null, unit: 'modern:local/ops-1', outcome: 'ok' });
    const bad = await http(`${broker.url}/v1/mcp/reconnect`, { body: { server: 'memory', unit: 'has space' } });
    expect(bad.status).toBe(400);
  });
});
