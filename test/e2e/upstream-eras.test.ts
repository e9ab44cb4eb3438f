/**
 * Upstreams of both eras (issue 14 §1, §2, §4): the broker probes each upstream's era, speaks
 * 2026-07-28 to a modern one (our SDK v2 fixture, over stdio and Streamable HTTP) and 2025-11-25
 * to the npm servers, remembers each verdict in its store across restarts, and bridges a modern
 * upstream's `input_required` to a legacy client's session. What the upstream got is read from
 * the fixture's own log (test/fixtures/modern-upstream.mjs), never from the broker's word.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, npmServer, readNdjson, readyEras, startBroker, waitFor, type StartedBroker } from './helpers.js';
import { connectHttp, startHttpBroker, type ConnectedClient, type HttpBroker } from '../transports/harness.js';

interface FixtureEvent {
  event: string;
  method?: string;
  tool?: string;
  era?: string;
  url?: string;
  meta?: { envelope?: Record<string, unknown> | null };
  headers?: Record<string, string>;
}

const MODERN = fixture('modern-upstream.mjs');
const CAPS = 'io.modelcontextprotocol/clientCapabilities';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'mcp-broker-eras-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let seq = 0;
/** A fresh log file and data folder for one test. */
function paths(): { log: string; dataDir: string } {
  seq++;
  return { log: join(dir, `fixture-${seq}.ndjson`), dataDir: join(dir, `data-${seq}`) };
}

const events = (log: string) => readNdjson<FixtureEvent>(log);
const probes = (log: string) => events(log).filter((e) => e.method === 'server/discover').length;
const calls = (log: string, tool: string) => events(log).filter((e) => e.event === 'call' && e.tool === tool);
const text = (result: { content?: unknown }) => ((result.content as Array<{ text?: string }> | undefined) ?? []).map((c) => c.text ?? '').join('');


/**
 * The era upstream `name` reported once its `upstream ready` line reached the broker's stderr: the
 * call's answer on stdout can arrive before that line on the other pipe, so it is awaited, not read.
 */
const readyEra = (broker: { stderr(): string }, name: string) => waitFor(() => readyEras(broker.stderr())[name], `upstream "${name}" ready`);

let brokers: Array<StartedBroker | HttpBroker | ConnectedClient> = [];
afterEach(async () => {
  for (const b of brokers.reverse()) await b.close();
  brokers = [];
});

async function stdioBroker(servers: Record<string, unknown>, dataDir: string, capabilities: Record<string, unknown> = {}): Promise<StartedBroker> {
  const broker = await startBroker({ servers, extra: { broker: { dataDir } }, capabilities });
  brokers.push(broker);
  return broker;
}

describe('upstream eras', () => {
  it('a modern stdio upstream is reached in the 2026-07-28 era; the npm servers stay legacy', async () => {
    const { log, dataDir } = paths();
    const broker = await stdioBroker(
      {
        modern: nodeServer(MODERN, { env: { FIXTURE_LOG: log } }),
        memory: { command: 'node', args: [npmServer('server-memory')] },
        everything: { command: 'node', args: [npmServer('server-everything'), 'stdio'] },
      },
      dataDir,
    );
    const result = await broker.client.callTool({ name: 'modern__whoami', arguments: {} });
    expect(text(result)).toBe('era=modern');
    const [call] = calls(log, 'whoami');
    expect(call.era).toBe('modern');
    expect(call.meta?.envelope?.['io.modelcontextprotocol/protocolVersion']).toBe('2026-07-28');
    const eras = await waitFor(() => {
      const e = readyEras(broker.stderr());
      return e.memory && e.everything && e.modern ? e : undefined;
    }, 'every upstream ready');
    expect(eras).toEqual({ modern: 'modern', memory: 'legacy', everything: 'legacy' });
    // The legacy servers answered the probe and still serve.
    const memory = await broker.client.callTool({ name: 'memory__read_graph', arguments: {} });
    expect(memory.isError).toBeFalsy();
  });

  it('the verdict is reused after a restart (no second probe) and the upstream probed again when its definition changes', async () => {
    const { log, dataDir } = paths();
    // An explicit cwd: by default it is the folder of servers.json, a new temp folder per broker here.
    const servers = (name: string) => ({ modern: nodeServer(MODERN, { cwd: dir, env: { FIXTURE_LOG: log, FIXTURE_NAME: name } }) });
    let broker = await stdioBroker(servers('first'), dataDir);
    await broker.client.callTool({ name: 'modern__whoami', arguments: {} });
    expect(probes(log)).toBe(1);
    await broker.close();

    broker = await stdioBroker(servers('first'), dataDir);
    const again = await broker.client.callTool({ name: 'modern__whoami', arguments: {} });
    expect(text(again)).toBe('era=modern');
    expect(probes(log)).toBe(1);
    await broker.close();

    broker = await stdioBroker(servers('changed'), dataDir);
    await broker.client.callTool({ name: 'modern__whoami', arguments: {} });
    expect(probes(log)).toBe(2);
  });

  it('a remembered modern verdict that no longer holds is probed again and the upstream served as legacy', async () => {
    const { log, dataDir } = paths();
    const switchFile = join(dir, `era-switch-${seq}`);
    const servers = { up: nodeServer(fixture('era-switch.mjs'), { cwd: dir, env: { FIXTURE_LOG: log, ERA_SWITCH_FILE: switchFile } }) };
    let broker = await stdioBroker(servers, dataDir);
    expect(text(await broker.client.callTool({ name: 'up__whoami', arguments: {} }))).toBe('era=modern');
    await broker.close();
    // The same definition now starts a server of the 2025 era only.
    writeFileSync(switchFile, 'legacy');
    broker = await stdioBroker(servers, dataDir);
    const tools = await broker.client.listTools();
    expect(tools.tools.map((t) => t.name)).toContain('up__echo');
    expect(text(await broker.client.callTool({ name: 'up__echo', arguments: { text: 'still here' } }))).toBe('still here');
    expect(await readyEra(broker, 'up')).toBe('legacy');
    await waitFor(() => broker.stderr().includes('probing its era again'), 'the era probed again, logged');
  });

  it('a legacy client answers a modern upstream\'s input_required: the request reaches its session live and the answer goes back as the retry', async () => {
    const { log, dataDir } = paths();
    const broker = await stdioBroker({ modern: nodeServer(MODERN, { env: { FIXTURE_LOG: log } }) }, dataDir, { elicitation: {} });
    const asked: string[] = [];
    broker.client.setRequestHandler('elicitation/create', async (req) => {
      asked.push(String((req.params as { message?: string }).message));
      return { action: 'accept', content: { answer: 'blue' } };
    });
    const result = await broker.client.callTool({ name: 'modern__ask', arguments: { question: 'colour?' } });
    expect(asked).toEqual(['colour?']);
    expect(text(result)).toBe('answer=blue state=asked:colour?');
    const rounds = calls(log, 'ask');
    expect(rounds).toHaveLength(2);
    // Each round carried this caller's own capabilities.
    expect(rounds.map((r) => Object.keys(r.meta?.envelope?.[CAPS] ?? { none: true }))).toEqual([['elicitation'], ['elicitation']]);
  });

  it('prompts/get: a legacy client answers a modern upstream\'s input_required, and the upstream is told its capabilities', async () => {
    const { log, dataDir } = paths();
    const broker = await stdioBroker({ modern: nodeServer(MODERN, { env: { FIXTURE_LOG: log } }) }, dataDir, { elicitation: {} });
    broker.client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { answer: 'yes' } }));
    const prompt = await broker.client.getPrompt({ name: 'modern__confirm', arguments: { topic: 'deploy' } });
    expect(prompt.messages.map((m) => (m.content as { text?: string }).text)).toEqual(['confirmed deploy: yes']);
    const rounds = events(log).filter((e) => e.event === 'prompt');
    expect(rounds.map((r) => Object.keys(r.meta?.envelope?.[CAPS] ?? { none: true }))).toEqual([['elicitation'], ['elicitation']]);
  });

  it('a caller that cannot answer a modern upstream\'s question gets the call failed, not a hang', async () => {
    const { log, dataDir } = paths();
    const broker = await stdioBroker({ modern: nodeServer(MODERN, { env: { FIXTURE_LOG: log } }) }, dataDir, {});
    const result = await broker.client.callTool({ name: 'modern__ask', arguments: { question: 'colour?' } });
    expect(result.isError).toBe(true);
    expect((result._meta as Record<string, unknown>)['mcp-broker/outcome']).toBe('upstream_error');
    expect(calls(log, 'ask')[0].meta?.envelope?.[CAPS]).toEqual({});
  });

  it('a stdio server that exits on the era probe is served as legacy, and not probed again after a restart', async () => {
    const { log, dataDir } = paths();
    const servers = { rmcp: nodeServer(fixture('strict-legacy.mjs'), { cwd: dir, env: { FIXTURE_LOG: log } }) };
    let broker = await stdioBroker(servers, dataDir);
    expect(text(await broker.client.callTool({ name: 'rmcp__echo', arguments: { text: 'hi' } }))).toBe('hi');
    expect(await readyEra(broker, 'rmcp')).toBe('legacy');
    expect(events(log).filter((e) => e.event === 'exit-on').map((e) => e.method)).toEqual(['server/discover']);
    await broker.close();
    broker = await stdioBroker(servers, dataDir);
    expect(text(await broker.client.callTool({ name: 'rmcp__echo', arguments: { text: 'again' } }))).toBe('again');
    expect(events(log).filter((e) => e.event === 'exit-on')).toHaveLength(1);
  });

  it('a modern upstream\'s tools/list_changed reaches the roster (a subscriptions/listen stream)', async () => {
    const { log, dataDir } = paths();
    const broker = await stdioBroker({ modern: nodeServer(MODERN, { env: { FIXTURE_LOG: log } }) }, dataDir);
    expect((await broker.client.listTools()).tools.map((t) => t.name)).not.toContain('modern__grown');
    await broker.client.callTool({ name: 'modern__grow', arguments: {} });
    await waitFor(() => broker.notifications.some((n) => n.method === 'notifications/tools/list_changed'), 'tools/list_changed downstream');
    const names = (await broker.client.listTools()).tools.map((t) => t.name);
    expect(names).toContain('modern__grown');
    expect(events(log).some((e) => e.method === 'subscriptions/listen')).toBe(true);
  });

  it('a downstream cancel reaches the modern upstream\'s request', async () => {
    const { log, dataDir } = paths();
    const broker = await stdioBroker({ modern: nodeServer(MODERN, { env: { FIXTURE_LOG: log } }) }, dataDir);
    const abort = new AbortController();
    const call = broker.client.callTool({ name: 'modern__slow', arguments: {} }, { signal: abort.signal });
    await waitFor(() => calls(log, 'slow').length, 'the call to reach the upstream');
    abort.abort('enough');
    await expect(call).rejects.toThrow();
    await waitFor(() => events(log).some((e) => e.event === 'cancelled'), 'the upstream to see the cancel');
  });

  it('a stdio server that never answers the era probe is served as legacy after the probe timeout, and asked again next time', async () => {
    const { log, dataDir } = paths();
    // The probe waits min(5 s, connectTimeoutMs).
    const servers = { silent: nodeServer(fixture('strict-legacy.mjs'), { args: [fixture('strict-legacy.mjs'), 'ignore'], cwd: dir, connectTimeoutMs: 1000, env: { FIXTURE_LOG: log } }) };
    let broker = await stdioBroker(servers, dataDir);
    expect(text(await broker.client.callTool({ name: 'silent__echo', arguments: { text: 'hi' } }))).toBe('hi');
    expect(await readyEra(broker, 'silent')).toBe('legacy');
    await waitFor(() => broker.stderr().includes('verdict not remembered'), 'the log line saying the verdict is not remembered');
    await broker.close();
    broker = await stdioBroker(servers, dataDir);
    expect(text(await broker.client.callTool({ name: 'silent__echo', arguments: { text: 'again' } }))).toBe('again');
    expect(events(log).filter((e) => e.event === 'ignored').map((e) => e.method)).toEqual(['server/discover', 'server/discover']);
  });

  it('an invalid x-mcp-header tool is left out of the roster with a log line (stdio)', async () => {
    const { log, dataDir } = paths();
    const broker = await stdioBroker({ modern: nodeServer(MODERN, { env: { FIXTURE_LOG: log } }) }, dataDir);
    const names = (await broker.client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['modern__whoami', 'modern__ask', 'modern__region_lookup']));
    expect(names).not.toContain('modern__bad_header');
    await waitFor(() => /"tool":"bad_header".*invalid x-mcp-header/.test(broker.stderr()), 'the bad x-mcp-header tool logged');
  });
});

describe('a modern upstream over Streamable HTTP', () => {
  let upstream: ChildProcess;
  let url: string;
  let log: string;
  beforeAll(async () => {
    log = join(mkdtempSync(join(tmpdir(), 'mcp-broker-eras-http-')), 'fixture.ndjson');
    upstream = spawn(process.execPath, [MODERN, 'http'], { env: { ...process.env, FIXTURE_LOG: log, PORT: '0' }, stdio: ['ignore', 'ignore', 'ignore'] });
    url = (await waitFor(() => events(log).find((e) => e.event === 'listening')?.url, 'the fixture to listen')) as string;
  });
  afterAll(() => {
    upstream?.kill('SIGTERM');
  });

  it('is reached in the modern era, with Mcp-Method, Mcp-Name (its own tool name) and Mcp-Param-* headers', async () => {
    const broker = await stdioBroker({ remote: { type: 'http', url } }, paths().dataDir);
    const result = await broker.client.callTool({ name: 'remote__region_lookup', arguments: { region: 'eu-west' } });
    expect(text(result)).toBe('region=eu-west');
    const call = calls(log, 'region_lookup').at(-1)!;
    expect(call.era).toBe('modern');
    expect(call.headers).toMatchObject({ 'mcp-method': 'tools/call', 'mcp-name': 'region_lookup', 'mcp-param-region': 'eu-west', 'mcp-protocol-version': '2026-07-28' });
    const names = (await broker.client.listTools()).tools.map((t) => t.name);
    expect(names).not.toContain('remote__bad_header');
    await waitFor(() => /"tool":"bad_header".*invalid x-mcp-header/.test(broker.stderr()), 'the bad x-mcp-header tool logged');
  });

  it('a downstream cancel reaches the modern upstream\'s request over HTTP', async () => {
    const broker = await stdioBroker({ remote: { type: 'http', url } }, paths().dataDir);
    const abort = new AbortController();
    const before = calls(log, 'slow').length;
    const cancelledBefore = events(log).filter((e) => e.event === 'cancelled').length;
    const call = broker.client.callTool({ name: 'remote__slow', arguments: {} }, { signal: abort.signal });
    await waitFor(() => calls(log, 'slow').length > before, 'the call to reach the upstream');
    abort.abort('enough');
    await expect(call).rejects.toThrow();
    await waitFor(() => events(log).filter((e) => e.event === 'cancelled').length > cancelledBefore, 'the upstream to see the cancel');
  });

  it('each request carries the calling session\'s own capabilities and log level in _meta', async () => {
    const broker = await startHttpBroker({ servers: { remote: { type: 'http', url } }, extra: { broker: { dataDir: paths().dataDir } } });
    brokers.push(broker);
    const asking = await connectHttp(broker.url, 'streamable', { capabilities: { elicitation: {} } });
    brokers.push(asking);
    const plain = await connectHttp(broker.url, 'streamable', { capabilities: {} });
    brokers.push(plain);
    await plain.client.setLoggingLevel('warning');
    await asking.client.callTool({ name: 'remote__whoami', arguments: { tag: 'asking' } });
    await plain.client.callTool({ name: 'remote__whoami', arguments: { tag: 'plain' } });
    const [a, p] = calls(log, 'whoami').slice(-2);
    expect(Object.keys(a.meta?.envelope?.[CAPS] ?? { none: true })).toEqual(['elicitation']);
    expect(a.meta?.envelope?.['io.modelcontextprotocol/logLevel']).toBeUndefined();
    expect(p.meta?.envelope?.[CAPS]).toEqual({});
    expect(p.meta?.envelope?.['io.modelcontextprotocol/logLevel']).toBe('warning');
  });
});
