/**
 * A parked call's row is stored scrubbed with the secrets known when it parked. Three faces showed
 * it, or wrote it, as stored after a reload had made one of its values a secret: the status page's
 * pending approvals (the reason it parked with), `mcp-broker approvals list` (its arguments and
 * reason; `approvals reject` its reason), and the record the task engine writes for a parked call
 * settled with no caller waiting (its arguments, as the row held them; written and published
 * after the reload, where every record is scrubbed with the secrets known when it is written).
 * The real CLI serving HTTP, a real reload of its config file, the real CLI reading the store.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from './broker-support.js';
import { fixture, nodeServer, waitFor } from './helpers.js';
import { http, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const LATER = `later-${randomBytes(8).toString('hex')}`;

describe('a parked call and a secret a reload adds after it parked', () => {
  let broker: HttpBroker;
  let parkedId: string;
  const status = async () => (await http(`${broker.url}/api/v1/status`)).body as { approvals: Array<{ id: string; reason: string | null }> };
  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs'), { required: true }) },
      // The rule's globs are in the reason the call parks with; the second matches nothing.
      extra: { policy: { askMode: 'park', rules: [{ tools: ['echo__echo', `zz-${LATER}`], action: 'ask' }] } },
    });
    const left = new AbortController();
    const call = fetch(`${broker.url}/api/v1/mcp/call`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ subject: 'echo__echo', args: { text: LATER } }),
      signal: left.signal,
    }).catch(() => undefined);
    parkedId = (await waitFor(async () => (await status()).approvals[0], 'the call to park')).id;
    left.abort();
    await call;
    // Not a secret yet: shown as stored.
    expect((await status()).approvals[0]!.reason).toContain(LATER);

    const config = JSON.parse(readFileSync(broker.configPath, 'utf8'));
    config.mcpServers.holder = { command: process.execPath, args: ['-e', ''], disabled: true, env: { API_KEY: LATER } };
    const seen = broker.stderr().split('config reloaded').length;
    writeFileSync(broker.configPath, JSON.stringify(config, null, 2));
    await waitFor(() => broker.stderr().split('config reloaded').length > seen, 'config reloaded', 20_000, 50);
  });
  afterAll(async () => broker?.close());

  it('the status page shows the reason it parked with scrubbed with the secrets of now', async () => {
    const [row] = (await status()).approvals;
    expect(row).toMatchObject({ id: parkedId, reason: expect.stringContaining('[REDACTED]') });
    expect(JSON.stringify(await status())).not.toContain(LATER);
  });

  it('approvals list prints the arguments and reason scrubbed with the secrets of the config loaded', async () => {
    const json = await runCli(['approvals', 'list', '--config', broker.configPath, '--json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout.trim())).toMatchObject({ id: parkedId, args: { text: '[REDACTED]' }, reason: expect.stringContaining('[REDACTED]') });
    const table = await runCli(['approvals', 'list', '--config', broker.configPath]);
    expect(table.stdout).toContain(parkedId);
    for (const out of [json.stdout, table.stdout]) expect(out).not.toContain(LATER);
  });

  it('the record of the call rejected with no caller waiting has its arguments scrubbed with the secrets of now; approvals reject prints none', async () => {
    const rejected = await runCli(['approvals', 'reject', parkedId, '--config', broker.configPath, '--reason', `not with ${LATER}`]);
    expect(rejected.code).toBe(0);
    expect(rejected.stdout).toContain(`rejected ${parkedId}`);
    expect(rejected.stdout).not.toContain(LATER);
    const record = await waitFor(() => broker.records().find((r) => r.name === 'echo__echo'), 'the record of the rejected call', 15_000);
    expect(record).toMatchObject({ outcome: 'approval_required', args: { text: '[REDACTED]' } });
    expect(JSON.stringify(record)).not.toContain(LATER);
  });
});
