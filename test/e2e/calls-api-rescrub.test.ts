/**
 * `GET /api/v1/calls` (and the status page's recent calls, read the same way) answered the
 * records as read from the records file: a value a reload made a secret after its record was
 * written was shown as it stood there, and a `tool=` pattern matched against the name as written
 * told it one character at a time. Now each record is scrubbed with the secrets of now, the
 * filters match the record so scrubbed, and the file stays as written (an audit file).
 * The real CLI serving HTTP, a real reload of its config file.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, waitFor } from './helpers.js';
import { http, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const LATER = `later-${randomBytes(8).toString('hex')}`;
const OPS = 'calls-rescrub-ops-token-0123456789';
const auth = { authorization: `Bearer ${OPS}` };

describe('GET /api/v1/calls and a secret a reload adds', () => {
  let broker: HttpBroker;
  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs'), { required: true }) },
      extra: { principals: { ops: { token: OPS, role: 'operator' } } },
    });
  });
  afterAll(async () => broker?.close());

  const calls = async (query = '') => {
    const answer = await http(`${broker.url}/api/v1/calls${query}`, { headers: auth });
    expect(answer.status).toBe(200);
    return answer;
  };

  it('answers the records and recent calls scrubbed with the secrets of now, and filters them as shown; the file keeps them as written', async () => {
    // Not secrets yet: an argument value, and a name no tool has.
    expect((await http(`${broker.url}/api/v1/mcp/call`, { headers: auth, body: { subject: 'echo__echo', args: { text: LATER } } })).status).toBe(200);
    await http(`${broker.url}/api/v1/mcp/call`, { headers: auth, body: { subject: `nope-${LATER}`, args: {} } });
    await waitFor(() => broker.records().length >= 2 || undefined, 'both records');
    expect((await calls()).text).toContain(LATER);
    expect((await calls('?tool=nope-l*')).body.calls).toHaveLength(1);

    const config = JSON.parse(readFileSync(broker.configPath, 'utf8'));
    config.mcpServers.holder = { command: process.execPath, args: ['-e', ''], disabled: true, env: { API_KEY: LATER } };
    const seen = broker.stderr().split('config reloaded').length;
    writeFileSync(broker.configPath, JSON.stringify(config, null, 2));
    await waitFor(() => broker.stderr().split('config reloaded').length > seen, 'config reloaded', 20_000, 50);

    const after = await calls();
    expect(after.body.calls).toHaveLength(2);
    expect(after.text).not.toContain(LATER);
    expect(after.body.calls.map((c: { name: string }) => c.name)).toEqual(['echo__echo', 'nope-[REDACTED]']);
    expect(after.body.calls[0].args).toEqual({ text: '[REDACTED]' });
    // The filters match the name shown: a pattern over the hidden value matches nothing.
    expect((await calls('?tool=nope-l*')).body.calls).toEqual([]);
    expect((await calls(`?tool=nope-${LATER.slice(0, 8)}*`)).body.calls).toEqual([]);
    expect((await calls('?tool=nope-*')).body.calls).toHaveLength(1);
    expect((await calls('?tool=nope-?REDACTED?')).body.calls).toHaveLength(1);

    const status = await http(`${broker.url}/api/v1/status`, { headers: auth });
    expect(status.body.calls).toHaveLength(2);
    expect(status.text).not.toContain(LATER);

    // The records file is an audit file: left as written.
    expect(readFileSync(broker.recordsPath, 'utf8')).toContain(LATER);
  });
});
