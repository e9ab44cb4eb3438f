/**
 * Input requests across MCP eras, all four upstream→caller era pairs behind ONE broker (issue 14
 * §4, "Done when"): the built CLI serving HTTP with two principals and `http.clientCapabilities`
 * offering sampling, elicitation (form and URL) and roots; two upstreams of test/fixtures/input-eras.mjs,
 * one of the 2025-11-25 era over stateful Streamable HTTP (`old`: it sends its questions as requests
 * during the call) and one of the 2026-07-28 era over stdio (`new`: it answers `input_required`);
 * and two SDK v2 clients at once: alice, a 2026-07-28 client (versionNegotiation auto; its
 * input-required driver answers and retries by itself), and bob, a 2025-11-25 client (a session;
 * questions reach it as live requests). Each client answers every question with its own name, and
 * each tool's result names the answer it got, so a question that reached the wrong caller shows.
 *
 * Each test makes alice's and bob's calls of one tool on one upstream at the same time; the fixture
 * holds the first two calls of a group until both have arrived (an awaited event), so both are in
 * flight on that upstream before either is asked.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Client, ProtocolError, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, readyEras, waitFor } from './helpers.js';
import { startHttpBroker, type HttpBroker } from '../transports/harness.js';

const TOKENS = { ALICE_TOKEN: 'alice-token-0123456789abcdef', BOB_TOKEN: 'bob-token-0123456789abcdef00' };
const CAPS = { sampling: {}, elicitation: { form: {}, url: {} }, roots: {} };
const textOf = (r: unknown) => ((r as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('');

type Who = 'alice' | 'bob';


describe('input requests in all four era pairs, a 2026-07-28 and a 2025-11-25 caller at once on each upstream', () => {
  let upstream: ChildProcess;
  let broker: HttpBroker;
  const clients: Client[] = [];
  /** The URL elicitations each caller was asked (params as its handler saw them). */
  const urlAsked: Record<Who, Record<string, unknown>[]> = { alice: [], bob: [] };
  const callers = {} as Record<Who, Client>;

  beforeAll(async () => {
    upstream = spawn(process.execPath, [fixture('input-eras.mjs'), 'legacy-http'], { stdio: ['pipe', 'pipe', 'inherit'] });
    const port = await new Promise<number>((resolve, reject) => {
      createInterface({ input: upstream.stdout! }).once('line', (l) => resolve(JSON.parse(l).port));
      upstream.once('exit', () => reject(new Error('fixture exited')));
    });
    broker = await startHttpBroker({
      servers: {
        old: { type: 'http', url: `http://127.0.0.1:${port}/mcp`, era: 'legacy' },
        new: nodeServer(fixture('input-eras.mjs')),
      },
      extra: {
        principals: { alice: { token: '${env:ALICE_TOKEN}' }, bob: { token: '${env:BOB_TOKEN}' } },
        http: { clientCapabilities: CAPS },
      },
      env: TOKENS,
    });
    const connect = async (who: Who, token: string, modern: boolean) => {
      const client = new Client({ name: `matrix-${who}`, version: '1.0.0' }, { capabilities: CAPS, ...(modern && { versionNegotiation: { mode: 'auto' } }) });
      client.setRequestHandler('sampling/createMessage', async () => ({ role: 'assistant', content: { type: 'text', text: `${who}-sampled` }, model: 'm' }));
      client.setRequestHandler('elicitation/create', async (req) => {
        const params = req.params as Record<string, unknown>;
        if (params.mode === 'url') {
          urlAsked[who].push(params);
          return { action: 'accept' };
        }
        return { action: 'accept', content: { name: who } };
      });
      client.setRequestHandler('roots/list', async () => ({ roots: [{ uri: `file:///${who}`, name: who }] }));
      await client.connect(new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }), { timeout: 20_000 });
      clients.push(client);
      return client;
    };
    callers.alice = await connect('alice', TOKENS.ALICE_TOKEN, true);
    callers.bob = await connect('bob', TOKENS.BOB_TOKEN, false);
    expect(callers.alice.getProtocolEra()).toBe('modern');
    expect(callers.bob.getProtocolEra()).toBe('legacy');
    // The broker speaks each upstream's own era: "new" answered server/discover.
    await waitFor(() => Object.keys(readyEras(broker.stderr())).length === 2, 'both upstreams ready');
    expect(readyEras(broker.stderr())).toEqual({ old: 'legacy', new: 'modern' });
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await broker?.close();
    upstream?.kill();
  });

  /** alice's and bob's calls of `server__tool` at once, in group `group` (the fixture's barrier). */
  async function both(server: 'old' | 'new', tool: string, group = `${server}-${tool}`): Promise<Record<Who, CallToolResult>> {
    const call = (who: Who) => callers[who].callTool({ name: `${server}__${tool}`, arguments: { who, group } }, { timeout: 60_000 }) as Promise<CallToolResult>;
    const [alice, bob] = await Promise.all([call('alice'), call('bob')]);
    return { alice, bob };
  }

  for (const server of ['old', 'new'] as const) {
    const pairs = server === 'old' ? 'legacy→modern and legacy→legacy' : 'modern→modern and modern→legacy';
    describe(`${server === 'old' ? '2025-11-25' : '2026-07-28'} upstream "${server}" (${pairs})`, () => {
      it('sampling reaches each caller, and only its own answer comes back', async () => {
        const r = await both(server, 'sample');
        expect(textOf(r.alice)).toBe('sample alice: alice-sampled');
        expect(textOf(r.bob)).toBe('sample bob: bob-sampled');
      });

      it('form elicitation reaches each caller', async () => {
        const r = await both(server, 'form');
        expect(textOf(r.alice)).toBe('form alice: accept alice');
        expect(textOf(r.bob)).toBe('form bob: accept bob');
      });

      it('roots/list reaches each caller', async () => {
        const r = await both(server, 'roots');
        expect(textOf(r.alice)).toBe('roots alice: file:///alice');
        expect(textOf(r.bob)).toBe('roots bob: file:///bob');
      });

      it('URL elicitation reaches each caller with its own URL', async () => {
        const seen = { alice: urlAsked.alice.length, bob: urlAsked.bob.length };
        const r = await both(server, 'url');
        expect(textOf(r.alice)).toBe('url alice: accept');
        expect(textOf(r.bob)).toBe('url bob: accept');
        expect(urlAsked.alice.slice(seen.alice)).toEqual([expect.objectContaining({ mode: 'url', url: 'https://auth.example.test/alice', message: 'sign in, alice' })]);
        expect(urlAsked.bob.slice(seen.bob)).toEqual([
          expect.objectContaining({ mode: 'url', url: 'https://auth.example.test/bob', message: 'sign in, bob', elicitationId: `bob-${server}-url` }),
        ]);
      });
    });
  }

  it("a 2025-11-25 upstream's -32042: the 2025 caller gets the error with its data, the 2026 caller an input_required URL elicitation its driver answers and retries", async () => {
    const seen = urlAsked.alice.length;
    const group = 'old-needs_auth';
    const alice = callers.alice.callTool({ name: 'old__needs_auth', arguments: { who: 'alice', group } }, { timeout: 60_000 });
    const bob = callers.bob.callTool({ name: 'old__needs_auth', arguments: { who: 'bob', group } }, { timeout: 60_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    const [aliceDone, bobErr] = await Promise.all([alice, bob]);
    expect(textOf(aliceDone)).toBe('authorized alice');
    expect(urlAsked.alice.slice(seen)).toEqual([expect.objectContaining({ mode: 'url', url: 'https://auth.example.test/alice', message: 'authorize alice' })]);
    expect(ProtocolError.isInstance(bobErr)).toBe(true);
    expect((bobErr as ProtocolError).code).toBe(-32042);
    expect((bobErr as ProtocolError).data).toEqual({
      elicitations: [{ mode: 'url', elicitationId: `bob-${group}`, url: 'https://auth.example.test/bob', message: 'authorize bob' }],
    });
    // The 2025 caller retries once the out-of-band step is done, as that revision says.
    expect(textOf(await callers.bob.callTool({ name: 'old__needs_auth', arguments: { who: 'bob', group } }))).toBe('authorized bob');
    const records = broker.records().filter((x) => x.name === 'old__needs_auth');
    expect(records.map((x) => [x.principal, x.outcome, x.resultType ?? 'complete']).sort()).toEqual([
      ['alice', 'ok', 'complete'],
      ['alice', 'ok', 'input_required'],
      ['bob', 'ok', 'complete'],
      ['bob', 'upstream_error', 'complete'],
    ]);
  });
});
