/**
 * End to end through the real CLI: planted canary secrets never reach a result, a record, a
 * log line or a notification (property test over generated payloads); scrubbed
 * structuredContent that breaks its outputSchema is withheld; records are published as MCP
 * `notifications/message` at level debug; a call whose record cannot be written fails closed.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, startBroker, waitFor, type StartedBroker } from './helpers.js';
import { brokerUpstream, callsOf, callTool } from './broker-support.js';

const tmp = mkdtempSync(join(tmpdir(), 'mcp-broker-scrub-e2e-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('scrubbing through the real CLI', () => {
  // The upstream's configured secret (its `env`), lowercase so the fixture's outputSchema can tell.
  const canary = `canary-${randomBytes(6).toString('hex')}`;
  const log = join(tmp, 'scrub.log');
  let broker: StartedBroker;
  const logs: Array<{ logger?: string; data?: unknown }> = [];
  beforeAll(async () => {
    broker = await startBroker({
      // Injected through ${env:}, as a secret is (a literal under a name like CANARY is an ordinary setting).
      servers: { fx: brokerUpstream({ env: { CANARY: '${env:SCRUB_E2E_CANARY}' } }) },
      env: { FIXTURE_LOG: log, SCRUB_E2E_CANARY: canary },
      args: ['--log-level', 'debug'],
    });
    broker.client.setNotificationHandler('notifications/message', async (n) => void logs.push(n.params));
    await broker.client.setLoggingLevel('debug');
  });
  afterAll(() => broker?.close());

  it('the upstream leaking its own secret: absent from results, records, logs and notifications', async () => {
    const ok = await callTool(broker, 'fx__leak');
    expect(ok.outcome).toBe('ok');
    const err = await callTool(broker, 'fx__leak', { mode: 'error' });
    expect(err.outcome).toBe('tool_error');
    expect(JSON.stringify([ok.result, err.result])).not.toContain(canary);
    expect(ok.text).toBe('the secret is [REDACTED]');
    await waitFor(() => logs.some((l) => l.logger === 'broker-upstream'), 'the upstream log notification');
    await waitFor(() => broker.stderr().includes('leak tool called'), 'the upstream stderr line in our log');
    expect(JSON.stringify(logs)).not.toContain(canary);
    expect(JSON.stringify(await broker.records())).not.toContain(canary);
    expect(broker.stderr()).not.toContain(canary);
  });

  it('property: generated payloads with planted secrets come back scrubbed everywhere', async () => {
    const planted = fc.oneof(
      fc.tuple(fc.string({ maxLength: 20 }), fc.string({ maxLength: 20 })).map(([a, b]) => `${a}${canary}${b}`),
      fc.string({ maxLength: 20 }).map((a) => `${a} ghp_${'Q'.repeat(36)} `),
      fc.constant(`Bearer ${canary}`),
    );
    const leaf = fc.oneof(fc.string({ maxLength: 30 }), fc.integer(), fc.boolean(), planted);
    const payload = fc.dictionary(
      fc.oneof(fc.constantFrom('text', 'note', 'password', 'api_key', 'items'), fc.string({ minLength: 1, maxLength: 8 })),
      fc.oneof(leaf, fc.array(leaf, { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 6 }), leaf, { maxKeys: 3 })),
      { minKeys: 1, maxKeys: 5 },
    );
    await fc.assert(
      fc.asyncProperty(payload, fc.constantFrom('fx__read', 'fx__write'), async (args, tool) => {
        const { result, outcome } = await callTool(broker, tool, args);
        expect(outcome).toBe('ok');
        const wire = JSON.stringify(result);
        expect(wire).not.toContain(canary);
        expect(wire).not.toContain('Q'.repeat(36));
      }),
      { numRuns: 40 },
    );
    const records = JSON.stringify(await broker.records());
    expect(records).not.toContain(canary);
    expect(records).not.toContain('Q'.repeat(36));
    expect(broker.stderr()).not.toContain(canary);
    expect(JSON.stringify(logs)).not.toContain(canary);
  });

  it('scrubbed structuredContent that no longer fits the outputSchema is withheld', async () => {
    const { outcome, result, text } = await callTool(broker, 'fx__secret_schema');
    expect(outcome).toBe('withheld');
    expect(result.isError).toBe(true);
    expect(text).toContain('outputSchema');
    expect(JSON.stringify(result)).not.toContain(canary);
  });

  it('every record is published to the session as notifications/message (logger mcp-broker) at level debug', async () => {
    const { result } = await callTool(broker, 'fx__read', { text: 'publish me' });
    const callId = result._meta?.['mcp-broker/callId'];
    const published = await waitFor(
      () => logs.find((l) => l.logger === 'mcp-broker' && (l.data as { callId?: string } | undefined)?.callId === callId),
      'the published record',
    );
    expect(published.data).toMatchObject({ name: 'fx__read', outcome: 'ok', status: 200, attempts: 1 });
    expect((await broker.records()).find((r) => r.callId === callId)).toEqual(published.data);
  });
});

describe('fail-closed record', () => {
  const log = join(tmp, 'failclosed.log');
  const recordsDir = join(tmp, 'records-is-a-folder');
  let broker: StartedBroker;
  beforeAll(async () => {
    mkdirSync(recordsDir); // the records path names a folder, so every append fails
    broker = await startBroker({
      servers: { fx: brokerUpstream() },
      extra: { broker: { records: { path: recordsDir } } },
      env: { FIXTURE_LOG: log },
    });
  });
  afterAll(() => broker?.close());

  it('a call whose record cannot be written is guard_error, its result withheld; the reason says the side effect may have happened', async () => {
    const { outcome, result, text } = await callTool(broker, 'fx__write', { text: 'side effect' });
    expect(outcome).toBe('guard_error');
    expect(result.isError).toBe(true);
    expect(text).toContain('could not be written');
    expect(text).toContain('the upstream side effect may have happened');
    expect(text).not.toContain('"text"');
    expect(callsOf(log, 'write')).toBe(1); // it did run upstream
    await waitFor(() => broker.stderr().includes('call record could not be written'), 'the logged write failure');
  });
});

describe('only secrets are secrets (issue 17 §9)', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({
      servers: {
        a: nodeServer(fixture('echo.mjs'), { env: { NODE_ENV: 'production', MODE: 'fast', SERVICE_TOKEN: 'literal-service-token-42' } }),
        b: nodeServer(fixture('echo.mjs')),
      },
    });
  });
  afterAll(() => broker?.close());

  it('ordinary environment values redacted everywhere: NODE_ENV=production stays readable in every server\'s results', async () => {
    const r = await callTool(broker, 'b__echo', { text: 'deployed to production in fast mode' });
    expect(r.outcome).toBe('ok');
    expect(r.text).toBe('deployed to production in fast mode');
    // A credential-named literal is still a secret, in every server's results.
    const leak = await callTool(broker, 'b__echo', { text: 'key literal-service-token-42' });
    expect(leak.text).toBe('key [REDACTED]');
  });
});
