/**
 * A modern `server/discover` gives a principal the instructions of the upstreams it sees
 * something of (upstream/surface.ts `servedSurface`, gateway.ts `seesUpstream`): an upstream the
 * policy hides from it whole (its tools, and so its prompts, resources and templates) says
 * nothing to it either; one it sees a single tool of still does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { fixture, nodeServer } from './helpers.js';
import { startHttpBroker, type HttpBroker } from '../transports/harness.js';

const TOKENS = { alice: 'alice-token-0123456789abcdef', bob: 'bob-token-0123456789abcdefgh', ops: 'ops-token-0123456789abcdefgh' };

describe('upstream instructions in a modern server/discover over HTTP', () => {
  let broker: HttpBroker;
  beforeAll(async () => {
    const upstream = (instructions: string) => nodeServer(fixture('modern-upstream.mjs'), { env: { FIXTURE_INSTRUCTIONS: instructions } });
    broker = await startHttpBroker({
      servers: { one: upstream('start with whoami'), two: upstream('two knows the regions') },
      extra: {
        principals: {
          alice: { token: '${env:ALICE_TOKEN}' },
          bob: { token: '${env:BOB_TOKEN}' },
          ops: { token: '${env:OPS_TOKEN}', role: 'operator' },
        },
        policy: {
          rules: [
            { tools: ['two__*'], principals: ['alice'], action: 'deny' },
            { tools: ['two__slow'], principals: ['bob'], action: 'deny' },
          ],
        },
      },
      env: { ALICE_TOKEN: TOKENS.alice, BOB_TOKEN: TOKENS.bob, OPS_TOKEN: TOKENS.ops },
    });
  }, 60_000);
  afterAll(async () => broker?.close());

  const instructionsOf = async (who: keyof typeof TOKENS) => {
    const client = new Client({ name: 'instructions-policy', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    const transport = new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TOKENS[who]}` } } });
    await client.connect(transport, { timeout: 20_000 });
    try {
      expect(client.getProtocolEra()).toBe('modern');
      return { instructions: client.getInstructions(), tools: (await client.listTools()).tools.map((t) => t.name) };
    } finally {
      await client.close();
    }
  };

  it('leaves out the instructions of an upstream the policy hides whole from the principal', async () => {
    const alice = await instructionsOf('alice');
    expect(alice.tools.some((t) => t.startsWith('two__'))).toBe(false);
    expect(alice.instructions).toBe('one: start with whoami');
  });

  it('keeps those of an upstream the principal sees some of, and gives an operator all', async () => {
    const bob = await instructionsOf('bob');
    expect(bob.tools).toContain('two__whoami');
    expect(bob.tools).not.toContain('two__slow');
    expect(bob.instructions).toBe('one: start with whoami\n\ntwo: two knows the regions');
    expect((await instructionsOf('ops')).instructions).toBe('one: start with whoami\n\ntwo: two knows the regions');
  });
});
