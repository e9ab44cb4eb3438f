/**
 * `isolation: "principal"` (upstream/isolated.ts; issue 14, several principals on one upstream):
 * server-everything over stdio caches the roots of its one session, so on a shared child the
 * second principal is answered the first one's roots without being asked. Isolated, each
 * principal's calls go to a child of its own: bob's roots handler is asked and bob gets his own
 * roots, and alice holding a sampling request unanswered does not hold up bob's call.
 *
 * The built CLI serving HTTP with four principals and `http.clientCapabilities` offering sampling
 * and roots; 2025-11-25 SDK clients over Streamable HTTP, and a 2026-07-28 one (its roots asked
 * through `input_required`, answered by the SDK client's own driver).
 */
import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { npmServer, waitFor } from './helpers.js';
import { connectHttp, startHttpBroker, type ConnectedClient, type HttpBroker } from '../transports/harness.js';

const TOKENS = {
  ALICE_TOKEN: 'alice-token-0123456789abcdef',
  BOB_TOKEN: 'bob-token-0123456789abcdef00',
  CAROL_TOKEN: 'carol-token-0123456789abcdef',
  DAVE_TOKEN: 'dave-token-0123456789abcdef00',
  ERIN_TOKEN: 'erin-token-0123456789abcdef00',
};
/** The broker's debug line for a call waiting at the owner gate (upstream/connection.ts). */
const WAITS = 'call waits for its turn';

const textOf = (r: unknown) => ((r as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('');
const sampled = (text: string) => ({ role: 'assistant' as const, content: { type: 'text' as const, text }, model: 'm' });

describe('isolation: "principal" on a stdio upstream shared by two principals (HTTP)', () => {
  let broker: HttpBroker;
  let alice: ConnectedClient;
  let bob: ConnectedClient;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { everything: { command: 'node', args: [npmServer('server-everything'), 'stdio'], isolation: 'principal' } },
      extra: {
        principals: {
          alice: { token: '${env:ALICE_TOKEN}' },
          bob: { token: '${env:BOB_TOKEN}' },
          carol: { token: '${env:CAROL_TOKEN}' },
          dave: { token: '${env:DAVE_TOKEN}' },
          erin: { token: '${env:ERIN_TOKEN}' },
        },
        http: { clientCapabilities: { sampling: {}, roots: {} } },
      },
      env: TOKENS,
      args: ['--log-level', 'debug'],
    });
    alice = await connectHttp(broker.url, 'streamable', { token: TOKENS.ALICE_TOKEN, capabilities: { roots: {}, sampling: {} } });
    bob = await connectHttp(broker.url, 'streamable', { token: TOKENS.BOB_TOKEN, capabilities: { roots: {}, sampling: {} } });
  });
  afterAll(async () => {
    await alice?.close();
    await bob?.close();
    await broker?.close();
  });

  it("each principal gets its own roots: bob is asked for his, never answered alice's", async () => {
    const asked = { alice: 0, bob: 0 };
    alice.client.setRequestHandler('roots/list', async () => (asked.alice++, { roots: [{ uri: 'file:///home/alice', name: 'alice-root' }] }));
    bob.client.setRequestHandler('roots/list', async () => (asked.bob++, { roots: [{ uri: 'file:///home/bob', name: 'bob-root' }] }));
    const roots = async (who: ConnectedClient) => textOf((await who.client.callTool({ name: 'everything__get-roots-list', arguments: {} })) as CallToolResult);

    const first = await roots(alice);
    expect(first).toContain('file:///home/alice');
    const second = await roots(bob);
    expect(second).toContain('file:///home/bob');
    expect(second).not.toContain('alice');
    expect(asked.bob).toBeGreaterThan(0);
    const third = await roots(alice);
    expect(third).toContain('file:///home/alice');
    expect(third).not.toContain('bob');
  });

  it("after alice's roots were cached: a 2026-07-28 caller gets its own roots, and a caller declaring no roots gets nobody's", async () => {
    alice.client.setRequestHandler('roots/list', async () => ({ roots: [{ uri: 'file:///home/alice', name: 'alice-root' }] }));
    expect(textOf(await alice.client.callTool({ name: 'everything__get-roots-list', arguments: {} }))).toContain('file:///home/alice');

    const carol = new Client({ name: 'isolation', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' }, capabilities: { roots: {} } });
    await carol.connect(new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TOKENS.CAROL_TOKEN}` } } }), { timeout: 20_000 });
    const dave = await connectHttp(broker.url, 'streamable', { token: TOKENS.DAVE_TOKEN, capabilities: {} });
    try {
      expect(carol.getProtocolEra()).toBe('modern');
      let carolAsked = 0;
      carol.setRequestHandler('roots/list', async () => (carolAsked++, { roots: [{ uri: 'file:///home/carol', name: 'carol-root' }] }));
      const carols = textOf(await carol.callTool({ name: 'everything__get-roots-list', arguments: {} }));
      expect(carols).toContain('file:///home/carol');
      expect(carols).not.toContain('alice');
      expect(carolAsked).toBeGreaterThan(0);
      const daves = textOf(await dave.client.callTool({ name: 'everything__get-roots-list', arguments: {} }));
      expect(daves).not.toMatch(/alice|bob|carol/);
    } finally {
      await carol.close().catch(() => undefined);
      await dave.close();
    }
  });

  it("alice's unanswered sampling request does not hold up bob's call on the same server", async () => {
    let aliceAsked!: () => void;
    const aliceAsking = new Promise<void>((resolve) => (aliceAsked = resolve));
    let releaseAlice!: () => void;
    const aliceMayAnswer = new Promise<void>((resolve) => (releaseAlice = resolve));
    alice.client.setRequestHandler('sampling/createMessage', async () => {
      aliceAsked();
      await aliceMayAnswer;
      return sampled('alice answers');
    });
    bob.client.setRequestHandler('sampling/createMessage', async () => sampled('bob answers'));
    const waitsBefore = broker.stderr().split(WAITS).length - 1;

    const aliceCall = alice.client.callTool({ name: 'everything__trigger-sampling-request', arguments: { prompt: 'for alice' } });
    await aliceAsking;
    // Alice's request is open now. Bob's call completes meanwhile; waiting behind her at the gate fails at once.
    const bobCall = bob.client.callTool({ name: 'everything__trigger-sampling-request', arguments: { prompt: 'for bob' } });
    let answered = false;
    const waited = waitFor(() => answered || broker.stderr().split(WAITS).length - 1 > waitsBefore, 'a call waiting its turn', 60_000).then(() => {
      if (!answered) throw new Error("bob's call waited behind alice's");
    });
    const bobResult = (await Promise.race([bobCall, waited])) as CallToolResult;
    answered = true;
    expect(textOf(bobResult)).toContain('bob answers');
    releaseAlice();
    expect(textOf(await aliceCall)).toContain('alice answers');
  });

  it("a 2026-07-28 principal's first call, answered after its new child's own roots/list arrived, still gets its result (each held request answered by its own retry)", async () => {
    // erin's child starts during this call; server-everything asks roots/list at start, which the
    // broker holds as a second input request while the first (the sampling request) waits for erin.
    const erin = new Client({ name: 'isolation', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' }, capabilities: { roots: {}, sampling: {} } });
    await erin.connect(new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TOKENS.ERIN_TOKEN}` } } }), { timeout: 20_000 });
    try {
      expect(erin.getProtocolEra()).toBe('modern');
      const heldRoots = () => broker.stderr().split('\n').filter((line) => line.includes("upstream request held for the caller's retry") && line.includes('"method":"roots/list"')).length;
      const rootsBefore = heldRoots();
      erin.setRequestHandler('sampling/createMessage', async () => {
        // Answer only once the child's own roots/list is held too (before the fix it replaced this request).
        await waitFor(() => heldRoots() > rootsBefore, "the child's roots/list held", 20_000);
        return sampled('erin answers');
      });
      let rootsAsked = 0;
      erin.setRequestHandler('roots/list', async () => {
        // The first roots/list is the child's own, handed out after the sampling answer: answer it only
        // once the call has ended upstream (its record is written), as a slow client would.
        if (rootsAsked++ === 0) await waitFor(() => broker.records().some((r) => r.principal === 'erin' && r.name === 'everything__trigger-sampling-request'), "erin's call to end", 20_000);
        return { roots: [{ uri: 'file:///home/erin', name: 'erin-root' }] };
      });
      const result = (await erin.callTool({ name: 'everything__trigger-sampling-request', arguments: { prompt: 'for erin' } })) as CallToolResult;
      expect(textOf(result)).toContain('erin answers');
      expect(textOf(await erin.callTool({ name: 'everything__get-roots-list', arguments: {} }))).toContain('file:///home/erin');
      const records = await broker.records();
      expect(records.filter((r) => r.principal === 'erin' && r.outcome === 'invalid_arguments')).toEqual([]);
    } finally {
      await erin.close().catch(() => undefined);
    }
  });
});
