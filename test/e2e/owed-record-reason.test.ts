/**
 * The record of a parked call settled with no call waiting on it (its caller left; then rejected
 * with `mcp-broker approvals reject`, or expired) is written by the task engine, outside the
 * call path. Its reason was scrubbed but not cut: a 300-character rejection reason became a
 * 317-character record reason ('rejected by cli: ' first), where every other record's reason is
 * scrubbed whole, then cut at 300 characters with `...`. The real CLI on stdio, the real
 * records file.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_REASON_CHARS } from '../../src/broker/failure.js';
import { runCli } from './broker-support.js';
import { fixture, nodeServer, startBroker, waitFor, type StartedBroker } from './helpers.js';

/** Short, so that scrubbed ('[REDACTED]') the reason is still over the cut. */
const SECRET = `park${randomBytes(4).toString('hex')}`;
const PREFIX = 'rejected by cli: ';

let broker: StartedBroker | undefined;
afterEach(async () => broker?.close());

describe('the record of a parked call rejected with no caller waiting', () => {
  it('has its reason scrubbed whole, then cut at 300 characters like every record reason (regression: scrubbed, never cut)', async () => {
    broker = await startBroker({
      servers: { echo: nodeServer(fixture('echo.mjs'), { env: { API_TOKEN: '${env:PARK_TOKEN}' } }) },
      extra: { policy: { askMode: 'park', rules: [{ tools: ['echo__echo'], action: 'ask' }] } },
      env: { PARK_TOKEN: SECRET },
    });
    const { client } = broker;
    const left = new AbortController();
    const call = client.callTool({ name: 'echo__echo', arguments: { text: 'x' } }, { timeout: 60_000, signal: left.signal }).catch((e: unknown) => e);
    const parked = await waitFor(async () => {
      const r = (await client.callTool({ name: 'broker__approvals_list', arguments: {} })) as { structuredContent: { approvals: Array<{ id: string }> } };
      return r.structuredContent.approvals[0];
    }, 'the call to park');
    left.abort('the caller left');
    await call;
    const list = async () => ((await client.callTool({ name: 'broker__approvals_list', arguments: {} })) as { structuredContent: { approvals: Array<{ id: string }> } }).structuredContent;
    // Still parked once its caller's call has settled, and no record yet: the rejection's comes from the task engine.
    await waitFor(async () => (await list()).approvals.some((a) => a.id === parked.id) || undefined, 'the row to stay parked');
    const records = async () => (await broker!.records()).filter((r) => r.name === 'echo__echo');
    expect(await records()).toEqual([]);

    // 300 characters, the longest reason a rejection takes; the secret runs across the 297th character of the record reason.
    const before = 297 - PREFIX.length - 5;
    const reason = `${'r'.repeat(before)}${SECRET}${'t'.repeat(300 - before - SECRET.length)}`;
    expect(reason).toHaveLength(300);
    const rejected = await runCli(['approvals', 'reject', parked.id, '--config', `${broker.dir}/servers.json`, '--reason', reason], { PARK_TOKEN: SECRET });
    expect(rejected.code).toBe(0);

    const [record] = await waitFor(async () => ((await records()).length > 0 ? records() : undefined), 'the record of the rejected call');
    expect(await records()).toHaveLength(1);
    expect(record!.outcome).toBe('approval_required');
    const scrubbed = `${PREFIX}${'r'.repeat(before)}[REDACTED]${'t'.repeat(300 - before - SECRET.length)}`;
    expect(record!.reason).toBe(`${scrubbed.slice(0, MAX_REASON_CHARS - 3)}...`);
    expect(record!.reason).toHaveLength(MAX_REASON_CHARS);
    // Scrubbed before the cut: cut first, the secret's first five characters would stand before the cut unrecognised.
    expect(JSON.stringify(record)).not.toContain(SECRET.slice(0, 5));
  });
});
