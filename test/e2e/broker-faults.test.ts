/**
 * End to end through the real CLI: what the broker path counts as the upstream's (issue 17 §5,
 * §10, §11). Arguments too deep to send are the caller's fault (`invalid_arguments`, nothing
 * sent, no budget, breaker untouched); the handler's verdict is read off its reply
 * (`isError`, `structuredContent.success`), not off data it returns in text, unless a
 * server or tool says its text carries the verdict; refusals that sent nothing record
 * `attempts: 0` and spend no budget; an upstream's error reason names its JSON-RPC code once.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, npmServer, readNdjson, spawnRawBroker, startBroker, type RawBroker, type StartedBroker } from './helpers.js';
import { brokerUpstream, callsOf, callTool } from './broker-support.js';

const tmp = mkdtempSync(join(tmpdir(), 'mcp-broker-faults-e2e-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A JSON array nested `depth` levels deep, as text (no serialiser could write it). */
const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

describe('arguments too deep to send (issue 17 §5)', () => {
  const log = join(tmp, 'deep.log');
  let raw: RawBroker;
  beforeAll(async () => {
    raw = spawnRawBroker({
      servers: { fx: brokerUpstream() },
      // Threshold 5 (the default) and a budget of 1: the five deep calls may neither open the
      // breaker nor spend the one call the good call needs.
      extra: { broker: { budgetPerUnit: 1, breaker: { threshold: 5, openMs: 60_000 } } },
      env: { FIXTURE_LOG: log },
    });
    await raw.initialize();
  });
  afterAll(() => raw?.close());

  it('5 calls nested 10,000 deep are invalid_arguments, unsent, no attempt, no budget; the breaker stays closed for the next good call', async () => {
    for (let i = 0; i < 5; i++) {
      const id = `deep-${i}`;
      raw.child.stdin!.write(`{"jsonrpc":"2.0","id":"${id}","method":"tools/call","params":{"name":"fx__read","arguments":{"tree":${nested(10_000)}}}}\n`);
      const answer = await raw.waitForMessage((m) => m.id === id, `the answer to ${id}`);
      const result = answer.result as { isError?: boolean; content: Array<{ text: string }>; _meta: Record<string, unknown> };
      expect(result._meta['mcp-broker/outcome']).toBe('invalid_arguments');
      expect(result.isError).toBe(true);
      expect(result.content[0]!.text).toContain('64');
      expect(result.content[0]!.text).not.toMatch(/call stack/i);
    }
    expect(callsOf(log, 'read')).toBe(0);

    const good = await raw.request('good', 'tools/call', { name: 'fx__read', arguments: { text: 'fine' } });
    expect((good.result as { _meta: Record<string, unknown> })._meta['mcp-broker/outcome']).toBe('ok');
    expect(callsOf(log, 'read')).toBe(1);

    const records = readNdjson(raw.recordsPath).filter((r) => r.name === 'fx__read');
    expect(records.map((r) => [r.outcome, r.status, r.attempts, r.breaker])).toEqual([
      ...Array.from({ length: 5 }, () => ['invalid_arguments', 400, 0, 'closed']),
      ['ok', 200, 1, 'closed'],
    ]);
  });
});

const root = join(tmp, 'files');
const fileBody = JSON.stringify({ success: false, error: 'this is data in a file' }, null, 2);
const filesystem = (more: Record<string, unknown> = {}) => nodeServer(npmServer('server-filesystem'), { args: [npmServer('server-filesystem'), root], ...more });
function writeFiles(): void {
  mkdirSync(root, { recursive: true });
  writeFileSync(join(root, 'verdict.json'), fileBody);
}

describe('the handler verdict is read off its reply, not off the data it returns (issue 17 §10)', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    writeFiles();
    broker = await startBroker({ servers: { fs: filesystem(), v: nodeServer(fixture('verdict.mjs')) } });
  });
  afterAll(() => broker?.close());

  it('server-filesystem reading a JSON file whose top level has success: false is ok, its body intact', async () => {
    const { result, outcome, text } = await callTool(broker, 'fs__read_text_file', { path: join(root, 'verdict.json') });
    expect(outcome).toBe('ok');
    expect(result.isError).toBeFalsy();
    expect(text).toBe(fileBody);
    const record = (await broker.records()).find((r) => r.name === 'fs__read_text_file')!;
    expect(record).toMatchObject({ outcome: 'ok', status: 200, attempts: 1 });
    expect(record.reason).toBeUndefined();
  });

  it('a text block holding JSON with success: false is data by default', async () => {
    expect((await callTool(broker, 'v__text_only', { body: JSON.stringify({ success: false, error: 'in the text' }) })).outcome).toBe('ok');
  });

  it('structuredContent with a top-level success: false is tool_error, with its message, body intact', async () => {
    const { result, outcome } = await callTool(broker, 'v__structured', {});
    expect(outcome).toBe('tool_error');
    expect(result.structuredContent).toEqual({ success: false, error: 'from structuredContent' });
    expect((await broker.records()).at(-1)).toMatchObject({ name: 'v__structured', outcome: 'tool_error', reason: 'from structuredContent', attempts: 1 });
    expect((await callTool(broker, 'v__structured', { success: true })).outcome).toBe('ok');
  });
});

describe('verdictFromText: a server or tool whose text carries its verdict (issue 17 §10)', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    writeFiles();
    broker = await startBroker({
      servers: {
        fs: filesystem({ tools: { read_text_file: { verdictFromText: true } } }),
        vt: nodeServer(fixture('verdict.mjs'), { verdictFromText: true }),
        vtool: nodeServer(fixture('verdict.mjs'), { tools: { text_only: { verdictFromText: true } } }),
      },
    });
  });
  afterAll(() => broker?.close());

  it('per server and per tool, a JSON text block with success: false is tool_error, the body intact', async () => {
    const failing = JSON.stringify({ success: false, error: 'read from the text' });
    const server = await callTool(broker, 'vt__text_only', { body: failing });
    expect(server.outcome).toBe('tool_error');
    expect(server.text).toBe(failing);
    expect((await callTool(broker, 'vtool__text_only', { body: failing })).outcome).toBe('tool_error');
    expect((await callTool(broker, 'vtool__text_only', { body: JSON.stringify({ success: true }) })).outcome).toBe('ok');
    const perTool = await callTool(broker, 'fs__read_text_file', { path: join(root, 'verdict.json') });
    expect(perTool.outcome).toBe('tool_error');
    expect(perTool.text).toBe(fileBody);
    expect((await broker.records()).at(-1)).toMatchObject({ outcome: 'tool_error', reason: 'this is data in a file' });
  });
});

describe('refusals that sent nothing, and reasons from upstream errors (issue 17 §11)', () => {
  const log = join(tmp, 'refusals.log');
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({
      servers: { fx: brokerUpstream() },
      extra: {
        functions: [fixture('functions/echo-named.mjs')],
        // One call of budget: every refusal below must leave it unspent for the last call.
        broker: { budgetPerUnit: 1 },
        policy: { rules: [{ tools: ['fx__write'], action: 'deny' }] },
      },
      env: { FIXTURE_LOG: log },
    });
  });
  afterAll(() => broker?.close());

  it('denied, and a function tool\'s bad arguments, record attempts: 0 and spend no budget', async () => {
    expect((await callTool(broker, 'fx__write', { text: 'x' })).outcome).toBe('denied');
    const bad = await callTool(broker, 'shout', { text: 42 });
    expect(bad.outcome).toBe('invalid_arguments');
    expect((await callTool(broker, 'shout', { text: 'once' })).outcome).toBe('ok');
    expect((await callTool(broker, 'shout', { text: 'twice' })).outcome).toBe('budget_exhausted');
    const records = await broker.records();
    expect(records.map((r) => [r.name, r.outcome, r.attempts])).toEqual([
      ['fx__write', 'denied', 0],
      ['shout', 'invalid_arguments', 0],
      ['shout', 'ok', 1],
      ['shout', 'budget_exhausted', 0],
    ]);
    expect(callsOf(log, 'write')).toBe(0);
  });
});

describe('an upstream error reason names its JSON-RPC code once (issue 17 §11)', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({ servers: { v: nodeServer(fixture('verdict.mjs')) } });
  });
  afterAll(() => broker?.close());

  it('an upstream answering -32602 "Unknown tool" is invalid_arguments whose reason is its message, said once', async () => {
    const { outcome, text } = await callTool(broker, 'v__vanished', {});
    expect(outcome).toBe('invalid_arguments');
    // SDK v2 (the fixture's server and our client) puts no `MCP error <code>: ` prefix on the message; an SDK v1
    // upstream's prefixed message is said once too (test/broker/invoke.test.ts).
    expect(text).toBe('invalid_arguments: Unknown tool: vanished');
    const record = (await broker.records()).at(-1)!;
    expect(record).toMatchObject({ outcome: 'invalid_arguments', attempts: 1, reason: 'Unknown tool: vanished' });
  });
});
