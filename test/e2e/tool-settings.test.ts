/**
 * Tools the user hides, renames or explains (issue 18 §4), through the real CLI: a principal's
 * tools/list leaves out what the policy denies it; `tools.<key>.disabled` takes advertised names
 * and globs; per-tool `description`, `title` and `annotations` are what the model reads.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectHttp, startHttpBroker, type ConnectedClient, type HttpBroker } from '../transports/harness.js';
import { startBroker, type StartedBroker } from './helpers.js';
import { brokerUpstream, callTool } from './broker-support.js';

describe('tools the user hides, renames or explains (stdio)', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({
      servers: {
        fx: brokerUpstream({
          tools: {
            // The advertised name was silently ignored; a glob was not possible.
            fx__mutate: { disabled: true },
            'secret_*': { disabled: true },
            read: { description: 'Reads a note back (our words)', title: 'Read a note', annotations: { openWorldHint: false } },
            'fx__wr*': { description: 'Writes a note' },
          },
        }),
      },
      extra: { policy: { rules: [{ tools: ['fx__slow'], action: 'deny' }] } },
    });
  });
  afterAll(() => broker?.close());

  it('denied tools were still listed to the model: now left out; a call to one is still refused denied', async () => {
    const names = (await broker.client.listTools()).tools.map((t) => t.name);
    expect(names).toContain('fx__read');
    expect(names).not.toContain('fx__slow');
    expect((await callTool(broker, 'fx__slow', { ms: 1 })).outcome).toBe('denied');
  });

  it('tools.<advertised name>.disabled was silently ignored and globs did not exist: both hide and refuse', async () => {
    const names = (await broker.client.listTools()).tools.map((t) => t.name);
    expect(names).not.toContain('fx__mutate');
    expect(names).not.toContain('fx__secret_schema');
    expect((await callTool(broker, 'fx__mutate')).outcome).toBe('unregistered');
  });

  it('per-tool description, title and annotations are listed (annotations laid over the upstream\'s)', async () => {
    const tools = (await broker.client.listTools()).tools;
    const read = tools.find((t) => t.name === 'fx__read')!;
    expect(read).toMatchObject({ description: 'Reads a note back (our words)', title: 'Read a note' });
    expect(read.annotations).toMatchObject({ readOnlyHint: true, openWorldHint: false });
    expect(tools.find((t) => t.name === 'fx__write')!.description).toBe('Writes a note');
    expect((await callTool(broker, 'fx__read', { text: 'hi' })).outcome).toBe('ok');
  });
});

describe('a principal sees only what the policy lets it call (HTTP)', () => {
  const TOKENS = { ALICE_TOKEN: 'alice-token-0123456789abcdef', BOB_TOKEN: 'bob-token-0123456789abcdef00' };
  let broker: HttpBroker;
  let alice: ConnectedClient;
  let bob: ConnectedClient;
  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { fx: brokerUpstream() },
      extra: {
        principals: { alice: { token: '${env:ALICE_TOKEN}' }, bob: { token: '${env:BOB_TOKEN}' } },
        policy: { rules: [{ tools: ['fx__write'], principals: ['bob'], action: 'deny' }] },
      },
      env: TOKENS,
    });
    alice = await connectHttp(broker.url, 'streamable', { token: TOKENS.ALICE_TOKEN });
    bob = await connectHttp(broker.url, 'streamable', { token: TOKENS.BOB_TOKEN });
  });
  afterAll(async () => {
    await alice?.close();
    await bob?.close();
    await broker?.close();
  });

  it('bob does not see fx__write; alice does; neither sees broker__reconnect, which needs the operator role', async () => {
    const of = async (c: ConnectedClient) => (await c.client.listTools()).tools.map((t) => t.name);
    expect(await of(alice)).toContain('fx__write');
    expect(await of(bob)).not.toContain('fx__write');
    expect(await of(bob)).toContain('fx__read');
    expect(await of(alice)).not.toContain('broker__reconnect');
  });
});
