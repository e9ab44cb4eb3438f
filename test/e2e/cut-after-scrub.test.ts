/**
 * End to end through the real CLI: text that may hold a secret is scrubbed whole and only then
 * cut, on every way to a client and a record. A cut through a secret leaves its first
 * characters, which the scrubber's patterns then no longer recognise (a GitHub token needs 36
 * characters after `ghp_`). Covered: a client's elicitation error in an approval reason (tool
 * and prompt), a refused prompt's reason in the client's JSON-RPC error, an outputSchema's
 * remote `$ref` in a `withheld` reason, an estate proposal's rationale in the approval prompt.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProtocolError } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, startBroker, type StartedBroker } from './helpers.js';
import { brokerUpstream, callTool } from './broker-support.js';

/** A GitHub token: the scrubber knows it by its shape only, whole. */
const TOKEN = 'ghp_' + 'Q7'.repeat(20);
/** What no client or record may show: the token's first characters (a cut at 200 kept 20 of them). */
const TOKEN_HEAD = TOKEN.slice(0, 12);

describe('a client whose elicitation fails with a message holding a secret', () => {
  let broker: StartedBroker;
  /** What the client's elicitation fails with. */
  let failure = '';
  beforeAll(async () => {
    broker = await startBroker({
      servers: { fx: brokerUpstream(), rs: nodeServer(fixture('ref-schema.mjs')) },
      extra: { policy: { rules: [{ tools: ['fx__write'], action: 'ask' }, { prompts: ['rs__greet'], action: 'ask' }] } },
      capabilities: { elicitation: {} },
    });
    broker.client.setRequestHandler('elicitation/create', async () => {
      throw new Error(failure);
    });
  });
  // The token starts 180 characters in: the ask's old cut at 200 kept its first 20.
  const crossingTheCut = `${'x'.repeat(179)} ${TOKEN} and the rest`;

  async function promptRefusal(): Promise<string> {
    const err = await broker.client.getPrompt({ name: 'rs__greet' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ProtocolError);
    return (err as ProtocolError).message;
  }
  afterAll(() => broker?.close());

  it('a tool call: neither the result nor the record shows the start of the secret', async () => {
    failure = crossingTheCut;
    const { outcome, text } = await callTool(broker, 'fx__write', { text: 'x' });
    expect(outcome).toBe('approval_required');
    expect(text).toContain('approval could not be asked');
    expect(text).not.toContain(TOKEN_HEAD);
    const record = (await broker.records()).find((r) => r.name === 'fx__write')!;
    expect(record.reason).toContain('approval could not be asked');
    expect(record.reason).not.toContain(TOKEN_HEAD);
  });

  it('a prompt: neither the JSON-RPC error nor the record shows the start of the secret', async () => {
    failure = crossingTheCut;
    const message = await promptRefusal();
    expect(message).toContain('approval could not be asked');
    expect(message).not.toContain(TOKEN_HEAD);
    const record = (await broker.records()).filter((r) => r.name === 'rs__greet').at(-1)!;
    expect(record.reason).not.toContain(TOKEN_HEAD);
  });

  it('a prompt: a whole secret in the reason is scrubbed from the JSON-RPC error as from the record, and the error is cut as the record is', async () => {
    failure = `the prompt failed with ${TOKEN} ${'z'.repeat(400)}`;
    const message = await promptRefusal();
    expect(message).toContain('approval could not be asked: the prompt failed with [REDACTED]');
    expect(message).not.toContain(TOKEN_HEAD);
    const record = (await broker.records()).filter((r) => r.name === 'rs__greet').at(-1)!;
    expect(message).toBe(`approval_required: ${record.reason}`);
  });
});

describe('an outputSchema whose remote $ref holds a secret', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({
      servers: {
        rs: nodeServer(fixture('ref-schema.mjs'), {
          env: { CANARY: '${env:CUT_E2E_CANARY}', REF_SCHEMA_REF: `https://schemas.example.com/${'y'.repeat(150)}/${TOKEN}/token.json` },
        }),
      },
      env: { CUT_E2E_CANARY: 'cut-canary-5e0d1f2a' },
    });
  });
  afterAll(() => broker?.close());

  it('the withheld reason shows no start of it, and is cut once scrubbed', async () => {
    const { outcome, text } = await callTool(broker, 'rs__remote_ref');
    expect(outcome).toBe('withheld');
    expect(text).toContain('the schema does not compile: the reference');
    expect(text).not.toContain(TOKEN_HEAD);
    const record = (await broker.records()).find((r) => r.name === 'rs__remote_ref')!;
    expect(record.reason).not.toContain(TOKEN_HEAD);
    // Cut at MAX_REASON_CHARS once scrubbed, as every reason is (it was set after the scrub stage's cut, and kept whole).
    expect(record.reason!.length).toBeLessThanOrEqual(300);
    expect(text).toBe(`withheld: ${record.reason}`);
  });
});

describe("an estate proposal whose rationale holds a secret, in the approval prompt", () => {
  let broker: StartedBroker;
  let base: string;
  const asked: string[] = [];
  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), 'mcp-broker-cut-estate-'));
    mkdirSync(join(base, 'root'));
    writeFileSync(join(base, 'root', 'a.txt'), 'one\n');
    broker = await startBroker({ servers: {}, extra: { estate: { root: join(base, 'root') } }, capabilities: { elicitation: {} } });
    broker.client.setRequestHandler('elicitation/create', async (req) => {
      asked.push(req.params.message);
      return { action: 'decline' };
    });
  });
  afterAll(async () => {
    await broker?.close();
    rmSync(base, { recursive: true, force: true });
  });

  it('the prompt shows no start of it (the rationale was cut at 200 characters before the scrub)', async () => {
    // The token starts 180 characters into the rationale.
    const proposed = await callTool(broker, 'estate__propose_change', { path: 'a.txt', content: 'two\n', rationale: `${'r'.repeat(179)} ${TOKEN} and why` });
    expect(proposed.outcome).toBe('ok');
    const { id } = proposed.result.structuredContent as { id: string };
    expect((await callTool(broker, 'estate__apply_proposal', { id })).outcome).toBe('approval_required');
    const rationale = asked[0]!.split('\n').find((l) => l.startsWith('Rationale: '))!;
    expect(rationale).toContain('[REDACTED]');
    expect(rationale).not.toContain(TOKEN_HEAD);
  });
});
