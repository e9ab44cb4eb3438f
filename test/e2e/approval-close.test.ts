/**
 * Seed 003, approval then a dead connection, through the real CLI: a client that declares
 * elicitation answers `accept` and closes its stdio in the same tick. The approval and the EOF
 * arrive together; the `requireApproval` function tool must not run (its handler appends a line
 * to a temp file: after the broker exits, the file has none). A control run that stays connected
 * (and answers the broker's liveness ping) shows the handler does write when the connection lives.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readNdjson, ROOT, spawnRawBroker, type RawBroker } from './helpers.js';

const MODULE = join(ROOT, 'test/fixtures/functions/approval-append.mjs');

let dir: string;
let raw: RawBroker | undefined;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mcp-broker-approval-close-'));
});
afterEach(async () => {
  await raw?.close();
  raw = undefined;
  rmSync(dir, { recursive: true, force: true });
});

const isElicitation = (m: Record<string, unknown>) => m.method === 'elicitation/create' && m.id !== undefined;

/** Starts the CLI serving `append_line`, calls it, and waits for the approval prompt. */
async function askedToApprove(file: string): Promise<Record<string, unknown>> {
  raw = spawnRawBroker({ servers: {}, extra: { functions: [MODULE] }, env: { APPROVAL_APPEND_FILE: file } });
  await raw.initialize({ elicitation: {} });
  raw.send({ jsonrpc: '2.0', id: 'call-1', method: 'tools/call', params: { name: 'append_line', arguments: { text: 'ran' } } });
  return raw.waitForMessage(isElicitation, 'the approval prompt (elicitation/create)', 20_000);
}

describe('approval then a dead connection (seed 003, e2e)', () => {
  it('control: an approval on a live connection runs the handler', async () => {
    const file = join(dir, 'control.txt');
    const ask = await askedToApprove(file);
    raw!.send({ jsonrpc: '2.0', id: ask.id, result: { action: 'accept', content: {} } });
    // The broker makes sure the caller is still there before running the tool: a ping, answered.
    const ping = await raw!.waitForMessage((m) => m.method === 'ping' && m.id !== undefined, 'the liveness ping', 20_000);
    raw!.send({ jsonrpc: '2.0', id: ping.id, result: {} });
    const answer = await raw!.waitForMessage((m) => m.id === 'call-1' && 'result' in m, 'the tools/call answer', 20_000);
    expect((answer.result as { isError?: boolean }).isError).toBeFalsy();
    expect(readFileSync(file, 'utf8')).toBe('ran\n');
  });

  it('an accept sent together with stdin EOF ran the handler anyway: now it does not run', async () => {
    for (let round = 0; round < 3; round++) {
      const file = join(dir, `closed-${round}.txt`);
      const ask = await askedToApprove(file);
      const broker = raw!;
      // The same tick: the answer and the EOF leave together.
      broker.send({ jsonrpc: '2.0', id: ask.id, result: { action: 'accept', content: {} } });
      broker.child.stdin!.end();
      await broker.exited;
      expect(existsSync(file) ? readFileSync(file, 'utf8') : '').toBe('');
      const records = readNdjson(broker.recordsPath);
      expect(records.map((r) => r.name)).toEqual(['append_line']);
      expect(records[0]!.outcome).toBe('cancelled');
      await broker.close();
      raw = undefined;
    }
  });
});
