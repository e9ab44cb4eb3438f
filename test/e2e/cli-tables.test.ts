/**
 * The CLI's tables (`mcp-broker calls`, `approvals list`) print text a remote caller chose: the
 * name of a tool nobody serves is recorded as the caller sent it (scrubbed, not otherwise
 * changed). Printed raw, a control character in it reached the operator's terminal: escape
 * sequences that erase or rewrite the lines above (hiding calls), and a newline that forges a row
 * of the table, as another principal's call. Through the real CLI: a user's call over the admin
 * API, then `calls` on the same config.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, waitFor } from './helpers.js';
import { http, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const ALICE = 'tables-alice-token-0123456789';
const OPS = 'tables-ops-token-0123456789';

function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

/** Every control character but the newline that ends each line (C0, DEL, C1). */
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

describe('CLI tables print no caller-chosen control characters', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs')) },
      extra: { principals: { alice: { token: ALICE }, ops: { token: OPS, role: 'operator' } } },
    });
  });
  afterAll(async () => broker?.close());

  it('calls: a name with escape sequences and a newline stays on its one row, its control characters shown, not sent', async () => {
    const forged = '2026-01-01 00:00:00.000Z  ok  200  echo__echo  ops  1  3';
    const subject = `x\u001b[2K\u001b[1A\u001b[2K\u001b]52;c;cHduZWQ=\u0007\r\n${forged}`;
    const res = await http(`${broker.url}/api/v1/mcp/call`, { headers: { authorization: `Bearer ${ALICE}` }, body: { subject, args: {} } });
    expect(res.body.outcome).toBe('unregistered');
    await waitFor(() => broker.records().find((r) => r.callId === res.body.callId), 'the record');

    const { code, stdout } = await runCli(['calls', '--config', broker.configPath]);
    expect(code).toBe(0);
    const lines = stdout.split('\n');
    expect(lines.at(-1)).toBe('');
    // The header, one row, the count: no forged row.
    expect(lines.slice(0, -1)).toHaveLength(3);
    expect(lines[2]).toBe('1 call');
    for (const line of lines) expect(line).not.toMatch(CONTROL);
    expect(lines[1]).toContain('\\x1b[2K');
    expect(lines[1]).toContain('alice');
  });

  it('calls: Unicode bidi controls in a name are shown as escapes, so they cannot reorder the row on the terminal', async () => {
    // U+202E (right-to-left override) flips what follows; the isolates, marks and embeddings alike.
    const bidi = ['\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069', '\u200e', '\u200f', '\u061c'];
    const subject = `tool\u202e${'ko  ecila  002'}\u2066x${bidi.join('')}`;
    const res = await http(`${broker.url}/api/v1/mcp/call`, { headers: { authorization: `Bearer ${ALICE}` }, body: { subject, args: {} } });
    expect(res.body.outcome).toBe('unregistered');
    await waitFor(() => broker.records().find((r) => r.callId === res.body.callId), 'the record');

    const { code, stdout } = await runCli(['calls', '--config', broker.configPath, '--id', res.body.callId]);
    expect(code).toBe(0);
    expect(stdout).not.toMatch(/[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/);
    const row = stdout.split('\n')[1]!;
    expect(row).toContain('tool\\u202eko  ecila  002\\u2066x');
    for (const c of bidi) expect(row).toContain(`\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  });

  it('calls: zero-width and invisible format characters and line separators in a name are shown as escapes (regression: passed as they came)', async () => {
    // A zero-width character makes the name read as another tool's; U+2028 ends the row in a log viewer.
    const invisible = ['\u200b', '\u200c', '\u200d', '\u2060', '\u2061', '\u2062', '\u2063', '\u2064', '\ufeff', '\u180e', '\u00ad', '\u2028', '\u2029'];
    const subject = `echo__ec\u200bho\u2028${invisible.join('')}`;
    const res = await http(`${broker.url}/api/v1/mcp/call`, { headers: { authorization: `Bearer ${ALICE}` }, body: { subject, args: {} } });
    expect(res.body.outcome).toBe('unregistered');
    await waitFor(() => broker.records().find((r) => r.callId === res.body.callId), 'the record');

    const { code, stdout } = await runCli(['calls', '--config', broker.configPath, '--id', res.body.callId]);
    expect(code).toBe(0);
    expect(stdout).not.toMatch(/[\u200b-\u200d\u2060-\u2064\ufeff\u180e\u00ad\u2028\u2029]/);
    const row = stdout.split('\n')[1]!;
    expect(row).toContain('echo__ec\\u200bho\\u2028');
    for (const c of invisible) expect(row).toContain(c === '\u00ad' ? '\\xad' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  });
});
