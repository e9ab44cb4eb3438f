/**
 * A rejection's reason is shown to the caller, stored in the task row and written in the call
 * record. `broker__approvals_decide` takes at most 300 characters of it; `POST
 * /api/v1/approvals/:id` and `mcp-broker approvals reject --reason` took anything up to the body
 * limit (4 MiB), into the row, the caller's answer and the record. Now both refuse a longer one
 * (400 / exit 2, naming the limit), and the call stays parked for a decision that fits.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, waitFor } from './helpers.js';
import { http, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const ALICE = 'reason-alice-token-0123456789';
const OPS = 'reason-ops-token-0123456789';
const auth = (t: string) => ({ authorization: `Bearer ${t}` });

function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

describe('a rejection reason is at most 300 characters on every face', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { u: nodeServer(fixture('echo.mjs')) },
      extra: {
        principals: { alice: { token: ALICE }, ops: { token: OPS, role: 'operator' } },
        policy: { askMode: 'park', rules: [{ tools: ['u__echo'], action: 'ask' }] },
      },
    });
  });
  afterAll(async () => broker?.close());

  it('CLI and HTTP refuse a longer reason and leave the call parked; one of 300 rejects it', async () => {
    const answer = http(`${broker.url}/api/v1/mcp/call`, { headers: auth(ALICE), body: { subject: 'u__echo', args: { text: 'x' } } });
    const parked = await waitFor(async () => {
      const body = (await http(`${broker.url}/api/v1/tasks?status=parked`, { headers: auth(OPS) })).body as { tasks: Array<{ id: string }> };
      return body.tasks[0];
    }, 'the call to park');
    const long = 'r'.repeat(301);

    const cli = await runCli(['approvals', 'reject', parked.id, '--config', broker.configPath, '--reason', long]);
    expect({ code: cli.code, stdout: cli.stdout }).toEqual({ code: 2, stdout: '' });
    expect(cli.stderr).toContain('--reason is 301 characters; at most 300');

    const refused = await http(`${broker.url}/api/v1/approvals/${parked.id}`, { method: 'POST', headers: auth(OPS), body: { approve: false, reason: long } });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: { code: 'bad_request', message: 'reason is 301 characters; at most 300' } });
    expect((await http(`${broker.url}/api/v1/tasks/${parked.id}`, { headers: auth(OPS) })).body).toMatchObject({ status: 'parked' });

    const fits = 'f'.repeat(300);
    const decided = await http(`${broker.url}/api/v1/approvals/${parked.id}`, { method: 'POST', headers: auth(OPS), body: { approve: false, reason: fits } });
    expect(decided.status).toBe(200);
    const settled = await answer;
    expect(settled.body).toMatchObject({ outcome: 'approval_required' });
    // The row keeps the reason whole; the caller's answer cuts it at 300 characters, as every reason.
    expect((await http(`${broker.url}/api/v1/tasks/${parked.id}`, { headers: auth(OPS) })).body).toMatchObject({ status: 'failed', reason: `rejected by ops: ${fits}` });
    expect(settled.body.reason).toBe(`rejected by ops: ${fits}`.slice(0, 297) + '...');
  });
});
