/**
 * End to end through the real CLI: policy (deny, ask with and without elicitation), operator
 * approvals (`mcp-broker approve|revoke`), tool pinning (a changed definition is `unregistered`
 * until approved) and `mcp-broker calls`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, startBroker, waitFor, type StartedBroker } from './helpers.js';
import { brokerUpstream, callsOf, callTool, configOf, runCli } from './broker-support.js';

const tmp = mkdtempSync(join(tmpdir(), 'mcp-broker-policy-e2e-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('policy and approvals without elicitation', () => {
  const log = join(tmp, 'plain.log');
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({
      servers: { fx: brokerUpstream() },
      extra: {
        policy: {
          rules: [
            { tools: ['fx__write'], action: 'deny' },
            { tools: ['fx__leak'], action: 'ask' },
          ],
        },
      },
      env: { FIXTURE_LOG: log },
    });
  });
  afterAll(() => broker?.close());

  it('deny never reaches the upstream', async () => {
    const { result, outcome, text } = await callTool(broker, 'fx__write', { text: 'x' });
    expect(outcome).toBe('denied');
    expect(result.isError).toBe(true);
    expect(text).toContain('policy.rules[0]');
    expect(callsOf(log, 'write')).toBe(0);
    const rec = (await broker.records()).at(-1)!;
    expect(rec).toMatchObject({ outcome: 'denied', status: 403, attempts: 0, name: 'fx__write' });
  });

  it('ask without elicitation is approval_required and says how to approve; approve and revoke work from the CLI', async () => {
    const first = await callTool(broker, 'fx__leak');
    expect(first.outcome).toBe('approval_required');
    expect(first.text).toContain(`node ${CLI} approve fx__leak --config ${configOf(broker)}`);
    expect(callsOf(log, 'leak')).toBe(0);

    const approved = await runCli(['approve', 'fx__leak', '--config', configOf(broker)]);
    expect(approved).toMatchObject({ code: 0 });
    expect(approved.stdout).toContain('approved fx__leak for every principal');
    expect((await callTool(broker, 'fx__leak')).outcome).toBe('ok');
    expect(callsOf(log, 'leak')).toBe(1);

    expect((await runCli(['revoke', 'fx__leak', '--config', configOf(broker)])).code).toBe(0);
    expect((await callTool(broker, 'fx__leak')).outcome).toBe('approval_required');
    expect(callsOf(log, 'leak')).toBe(1);
  });

  it('a tool whose description changes after list_changed is refused as changed until mcp-broker approve', async () => {
    expect((await callTool(broker, 'fx__read', { text: 'before' })).outcome).toBe('ok');
    let changed = false;
    broker.client.setNotificationHandler('notifications/tools/list_changed', async () => void (changed = true));
    expect((await callTool(broker, 'fx__mutate')).outcome).toBe('ok');
    await waitFor(() => changed, 'tools/list_changed');
    // Listed as pinned: the new description does not reach the model before it is approved.
    const readDescription = async () => (await broker.client.listTools()).tools.find((t) => t.name === 'fx__read')?.description;
    expect(await readDescription()).toBe('read: echoes its arguments');

    const refused = await callTool(broker, 'fx__read', { text: 'after' });
    expect(refused.outcome).toBe('unregistered');
    expect(refused.text).toContain('changed');
    expect(refused.text).toContain(`node ${CLI} approve fx__read --config ${configOf(broker)} --principal local`);
    expect(callsOf(log, 'read')).toBe(1);

    const approved = await runCli(['approve', 'fx__read', '--config', configOf(broker)]);
    expect(approved.stdout).toContain('re-pinned fx__read');
    expect(await readDescription()).toContain('mails');
    expect((await callTool(broker, 'fx__read', { text: 'approved' })).outcome).toBe('ok');
    expect(callsOf(log, 'read')).toBe(2);
  });

  it('mcp-broker calls prints the records as a table, filtered by outcome, tool and time', async () => {
    const all = await runCli(['calls', '--config', configOf(broker)]);
    expect(all.code).toBe(0);
    expect(all.stdout.split('\n')[0]).toMatch(/^TIME\s+OUTCOME\s+STATUS\s+TOOL/);
    expect(all.stdout).toContain('fx__write');
    expect(all.stdout).toContain('unregistered');
    const denied = await runCli(['calls', '--config', configOf(broker), '--outcome', 'denied', '--since', '1h']);
    expect(denied.stdout).toContain('fx__write');
    expect(denied.stdout).not.toContain('fx__read');
    expect(denied.stdout).toMatch(/1 call\n$/);
    const reads = await runCli(['calls', '--config', configOf(broker), '--tool', 'fx__re*', '--json']);
    const lines = reads.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(new Set(lines.map((r: { name: string }) => r.name))).toEqual(new Set(['fx__read']));
    const bad = await runCli(['calls', '--config', configOf(broker), '--outcome', 'nope']);
    expect(bad.code).toBe(2);
  });
});

describe('ask with an elicitation client', () => {
  const log = join(tmp, 'elicit.log');
  let broker: StartedBroker;
  const answers: Array<'accept' | 'decline'> = [];
  const messages: string[] = [];
  beforeAll(async () => {
    broker = await startBroker({
      servers: { fx: brokerUpstream() },
      extra: { policy: { rules: [{ tools: ['fx__write'], action: 'ask' }] } },
      env: { FIXTURE_LOG: log },
      capabilities: { elicitation: {} },
    });
    broker.client.setRequestHandler('elicitation/create', async (req) => {
      messages.push(req.params.message);
      return { action: answers.shift() ?? 'decline' };
    });
  });
  afterAll(() => broker?.close());

  it('accepted: the call goes on; the prompt names the tool and shows scrubbed arguments', async () => {
    answers.push('accept');
    const { outcome } = await callTool(broker, 'fx__write', { text: 'hello', password: 'hunter2-hunter2' });
    expect(outcome).toBe('ok');
    expect(callsOf(log, 'write')).toBe(1);
    expect(messages[0]).toContain('fx__write');
    expect(messages[0]).toContain('hello');
    expect(messages[0]).not.toContain('hunter2-hunter2');
  });

  it('declined: approval_required, and the upstream never sees the call', async () => {
    answers.push('decline');
    const { outcome, text } = await callTool(broker, 'fx__write', { text: 'again' });
    expect(outcome).toBe('approval_required');
    expect(text).toContain('declined');
    expect(callsOf(log, 'write')).toBe(1);
    expect(messages).toHaveLength(2);
  });

  it('a tool the policy allows is not asked about', async () => {
    expect((await callTool(broker, 'fx__read', { text: 'x' })).outcome).toBe('ok');
    expect(messages).toHaveLength(2);
  });
});
