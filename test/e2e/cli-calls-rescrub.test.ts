/**
 * `mcp-broker calls` printed the records as read from the records file: a value its config makes a
 * secret, written before it was one (by a broker with an older config, or not reloaded yet), was
 * printed in the table, with `--json`, `--id` and `--follow`, and a `--tool` glob matched against
 * the name as written told it one character at a time. Now every record printed is scrubbed with
 * the secrets of the config loaded, the filters match the record as printed, and the file stays as
 * written. A real broker serving HTTP writes the records (`--no-watch`: it keeps its config); the real
 * CLI reads them.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from './broker-support.js';
import { CLI, fixture, nodeServer, waitFor } from './helpers.js';
import { http, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const LATER = `later-${randomBytes(8).toString('hex')}`;

describe('mcp-broker calls and a value the config makes a secret after its record was written', () => {
  let broker: HttpBroker;
  let config: string;
  /** One call through `POST /api/v1/mcp/call` (a name no tool has is recorded too). */
  const call = (subject: string, args: Record<string, unknown> = {}) => http(`${broker.url}/api/v1/mcp/call`, { body: { subject, args } });
  beforeAll(async () => {
    broker = await startHttpBroker({ servers: { echo: nodeServer(fixture('echo.mjs'), { required: true }) }, args: ['--no-watch'] });
    config = broker.configPath;
    // Not secrets yet: an argument value, and a name no tool has.
    expect((await call('echo__echo', { text: LATER })).status).toBe(200);
    await call(`nope-${LATER}`);
    await waitFor(() => broker.records().length >= 2 || undefined, 'both records');
    const edited = JSON.parse(readFileSync(config, 'utf8'));
    edited.mcpServers.holder = { command: process.execPath, args: ['-e', ''], disabled: true, env: { API_KEY: LATER } };
    writeFileSync(config, JSON.stringify(edited, null, 2));
  });
  afterAll(async () => broker?.close());

  it('prints the table and --json scrubbed with the secrets of the config loaded; the file keeps the records as written', async () => {
    const table = await runCli(['calls', '--config', config]);
    expect(table.code).toBe(0);
    expect(table.stdout).toContain('nope-[REDACTED]');
    expect(table.stdout).not.toContain(LATER);
    const json = await runCli(['calls', '--config', config, '--json']);
    const rows = json.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(rows.map((r) => r.name)).toEqual(['echo__echo', 'nope-[REDACTED]']);
    expect(rows[0].args).toEqual({ text: '[REDACTED]' });
    expect(json.stdout).not.toContain(LATER);
    expect(readFileSync(broker.recordsPath, 'utf8')).toContain(LATER);
  });

  it('matches --tool and --id against the record as printed', async () => {
    const tool = async (glob: string) => (await runCli(['calls', '--config', config, '--json', '--tool', glob])).stdout.trim();
    expect(await tool('nope-l*')).toBe('');
    expect(await tool(`nope-${LATER.slice(0, 8)}*`)).toBe('');
    expect(JSON.parse(await tool('nope-*')).name).toBe('nope-[REDACTED]');
    expect(JSON.parse(await tool('nope-?REDACTED?')).name).toBe('nope-[REDACTED]');
    const { callId } = broker.records().find((r) => r.name === 'echo__echo')!;
    const byId = await runCli(['calls', '--config', config, '--json', '--id', callId]);
    expect(JSON.parse(byId.stdout)).toMatchObject({ callId, args: { text: '[REDACTED]' } });
  });

  it('--follow prints a record appended later scrubbed too', async () => {
    const follow = spawn(process.execPath, [CLI, 'calls', '--config', config, '--follow', '--json', '--tool', 'echo__*'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    follow.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise((resolve) => follow.once('exit', resolve));
    try {
      await waitFor(() => out.split('\n').length > 1 || undefined, 'the records there already');
      const before = out.length;
      // The broker still runs the config it started with: to it the value is no secret.
      expect((await call('echo__echo', { text: `again ${LATER}` })).status).toBe(200);
      await waitFor(() => out.slice(before).includes('\n') || undefined, 'the record appended', 15_000);
      expect(JSON.parse(out.slice(before))).toMatchObject({ name: 'echo__echo', args: { text: 'again [REDACTED]' } });
      expect(out).not.toContain(LATER);
      expect(readFileSync(broker.recordsPath, 'utf8')).toContain(`again ${LATER}`);
    } finally {
      follow.kill('SIGINT');
      await exited;
    }
  });
});
