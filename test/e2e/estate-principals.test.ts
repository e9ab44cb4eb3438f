/**
 * Estate proposals over HTTP with several principals, through the real CLI (issue 12 item 3):
 * a proposal is its principal's own (another principal neither lists nor applies it, and its id
 * answers exactly as an unknown one), an operator acts on all, and the approval prompt of
 * `estate__apply_proposal` shows the path and a summary of the change.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectHttp, startHttpBroker, type ConnectedClient, type HttpBroker } from '../transports/harness.js';

const TOKENS = {
  ALICE_TOKEN: 'alice-token-0123456789abcdef',
  BOB_TOKEN: 'bob-token-0123456789abcdef00',
  OPS_TOKEN: 'ops-token-0123456789abcdef00',
};
const GUIDE = '# Guide\nThe estate relay reads this.\nSecond mention of the relay.\n';

let base: string;
let root: string;
let broker: HttpBroker;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'mcp-broker-estate-owners-'));
  root = join(base, 'root');
  mkdirSync(join(root, 'docs'), { recursive: true });
  writeFileSync(join(root, 'docs', 'guide.md'), GUIDE);
  broker = await startHttpBroker({
    servers: {},
    extra: {
      estate: { root },
      principals: {
        alice: { token: '${env:ALICE_TOKEN}' },
        bob: { token: '${env:BOB_TOKEN}' },
        ops: { token: '${env:OPS_TOKEN}', role: 'operator' },
      },
    },
    env: TOKENS,
  });
});
afterAll(async () => {
  await broker?.close();
  rmSync(base, { recursive: true, force: true });
});

/** A client that accepts every approval prompt and keeps its messages. */
async function connect(token: string): Promise<{ client: ConnectedClient; asked: string[] }> {
  const client = await connectHttp(broker.url, 'streamable', { token, capabilities: { elicitation: {} } });
  const asked: string[] = [];
  client.client.setRequestHandler('elicitation/create', async (req) => {
    asked.push(req.params.message);
    return { action: 'accept', content: {} };
  });
  return { client, asked };
}

async function call(c: ConnectedClient, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await c.client.callTool({ name, arguments: args }, { timeout: 30_000 })) as CallToolResult;
}
const outcome = (r: CallToolResult) => r._meta?.['mcp-broker/outcome'];
const proposals = (r: CallToolResult) => (r.structuredContent as { proposals: { id: string; principal: string }[] }).proposals;
/** The prompt without its last line (the arguments, which name the id asked about). */
const withoutArguments = (message: string) => message.split('\n').filter((l) => !l.startsWith('Arguments:')).join('\n');

describe('estate proposals over HTTP, per principal', () => {
  it("another principal listed and applied a principal's proposal, and the prompt showed only an id: now the proposal is theirs alone and the prompt shows the change", async () => {
    const alice = await connect(TOKENS.ALICE_TOKEN);
    const bob = await connect(TOKENS.BOB_TOKEN);
    const ops = await connect(TOKENS.OPS_TOKEN);
    try {
      const diff = ['@@ -1,3 +1,3 @@', ' # Guide', '-The estate relay reads this.', '+The estate relay applied this.', ' Second mention of the relay.', ''].join('\n');
      const proposed = await call(alice.client, 'estate__propose_change', { path: 'docs/guide.md', unifiedDiff: diff, rationale: 'wording' });
      expect(outcome(proposed)).toBe('ok');
      const id = (proposed.structuredContent as { id: string }).id;

      // Bob: not listed; applying it answers exactly as a made-up id, and asks exactly the same.
      expect(proposals(await call(bob.client, 'estate__list_proposals', {}))).toEqual([]);
      const foreign = await call(bob.client, 'estate__apply_proposal', { id });
      const unknown = await call(bob.client, 'estate__apply_proposal', { id: 'prop_000000000000000000' });
      expect(outcome(foreign)).toBe('tool_error');
      expect(foreign.content).toEqual(unknown.content);
      expect(outcome(foreign)).toBe(outcome(unknown));
      expect(bob.asked).toHaveLength(2);
      expect(withoutArguments(bob.asked[0]!)).toBe(withoutArguments(bob.asked[1]!));
      expect(bob.asked[0]).not.toContain('docs/guide.md');
      expect(readFileSync(join(root, 'docs', 'guide.md'), 'utf8')).toBe(GUIDE);

      // The operator sees it; alice applies it, asked with the path and a summary of the change.
      expect(proposals(await call(ops.client, 'estate__list_proposals', {}))).toEqual([expect.objectContaining({ id, principal: 'alice' })]);
      expect(proposals(await call(alice.client, 'estate__list_proposals', {})).map((p) => p.id)).toEqual([id]);
      const applied = await call(alice.client, 'estate__apply_proposal', { id });
      expect(outcome(applied)).toBe('ok');
      expect(alice.asked).toHaveLength(1);
      expect(alice.asked[0]).toContain('Change: changes "docs/guide.md": +1/-1 lines, 66 → 68 bytes (a unified diff), proposed by "alice".');
      expect(alice.asked[0]).toContain('Rationale: "wording"');
      expect(readFileSync(join(root, 'docs', 'guide.md'), 'utf8')).toBe('# Guide\nThe estate relay applied this.\nSecond mention of the relay.\n');

      const records = broker.records().filter((r) => r.subject === 'estate/apply_proposal');
      expect(records.map((r) => [r.principal, r.outcome])).toEqual([
        ['bob', 'tool_error'],
        ['bob', 'tool_error'],
        ['alice', 'ok'],
      ]);
    } finally {
      await alice.client.close();
      await bob.client.close();
      await ops.client.close();
    }
  });

  it("an operator applies another principal's proposal", async () => {
    const alice = await connect(TOKENS.ALICE_TOKEN);
    const ops = await connect(TOKENS.OPS_TOKEN);
    try {
      const proposed = await call(alice.client, 'estate__propose_change', { path: 'docs/new.md', content: 'new\n', rationale: 'add' });
      const id = (proposed.structuredContent as { id: string }).id;
      const applied = await call(ops.client, 'estate__apply_proposal', { id });
      expect(outcome(applied)).toBe('ok');
      expect(ops.asked[0]).toContain('Change: creates "docs/new.md": +1/-0 lines, 4 bytes (whole new content), proposed by "alice".');
      expect(readFileSync(join(root, 'docs', 'new.md'), 'utf8')).toBe('new\n');
    } finally {
      await alice.client.close();
      await ops.client.close();
    }
  });
});
