/**
 * Approvals as input requests for modern (2026-07-28) callers (issue 13 §3), over the real call
 * path of a Gateway: a real stdio upstream (test/fixtures/echo.mjs, which logs every call it
 * runs to FIXTURE_LOG), the real SQLite store and ndjson records in a temporary folder, and a
 * ManualClock for expiry. A modern caller is a CallerSession with `era: 'modern'`, as the modern
 * wire fills it from the request.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult, InputRequiredResult } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { APPROVAL_STATE_PREFIX } from '../../src/broker/approval-state.js';
import { APPROVAL_INPUT_KEY } from '../../src/broker/ask-input.js';
import type { BrokerAnswer } from '../../src/broker/broker.js';
import type { CallerSession, CallRecord } from '../../src/broker/types.js';
import { parseConfig } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'echo.mjs');
const ASK_TIMEOUT_MS = 30_000;

interface Rig {
  gateway: Gateway;
  clock: ManualClock;
  dir: string;
  /** Every `tools/call` the upstream ran, in order. */
  runs(): { tool: string }[];
  records(): CallRecord[];
  call(name: string, args: Record<string, unknown>, caller: CallerSession): Promise<BrokerAnswer>;
}

const rigs: Rig[] = [];

async function rig(options: { dir?: string; policy?: object; functions?: string[] } = {}): Promise<Rig> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'mcp-broker-ask-input-'));
  const log = join(dir, 'fixture.ndjson');
  const records = join(dir, 'calls.ndjson');
  const config = parseConfig(
    {
      mcpServers: { fx: { command: process.execPath, args: [FIXTURE], env: { FIXTURE_LOG: log } } },
      broker: { dataDir: join(dir, 'data'), records: { path: records } },
      policy: { askTimeoutMs: ASK_TIMEOUT_MS, rules: [{ tools: ['fx__echo', 'fx__fail'], action: 'ask' }], ...options.policy },
      estate: { enabled: false },
      ...(options.functions ? { functions: options.functions } : {}),
    },
    { baseDir: dir },
  );
  const clock = new ManualClock(Date.parse('2026-12-01T12:00:00.000Z'));
  const gateway = new Gateway(config, { logger: silentLogger(), clock });
  await gateway.start();
  const lines = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []);
  const r: Rig = {
    gateway,
    clock,
    dir,
    runs: () => lines(log).filter((e: { event: string }) => e.event === 'call'),
    records: () => lines(records),
    call: (name, args, caller) => gateway.broker.call({ name, args, signal: new AbortController().signal }, caller),
  };
  rigs.push(r);
  return r;
}

let stopped: Set<Rig>;
beforeEach(() => (stopped = new Set()));
afterEach(async () => {
  for (const r of rigs.splice(0)) {
    if (!stopped.has(r)) await r.gateway.stop();
    rmSync(r.dir, { recursive: true, force: true });
  }
});

function modern(over: Partial<CallerSession> = {}): CallerSession {
  return { sessionId: 'modern', principal: 'local', unit: 'local', era: 'modern', clientCapabilities: { elicitation: {} }, isLive: () => true, ...over };
}

/** The retry of a modern call: the same caller, with the answer under the broker's key and the state echoed. */
function retry(first: BrokerAnswer, action: 'accept' | 'decline' | 'cancel', over: Partial<CallerSession> = {}): CallerSession {
  return modern({ inputResponses: { [APPROVAL_INPUT_KEY]: { action, ...(action === 'accept' ? { content: {} } : {}) } }, requestState: stateOf(first), ...over });
}

function stateOf(answer: BrokerAnswer): string {
  const result = answer.result as InputRequiredResult;
  expect(result.resultType).toBe('input_required');
  return result.requestState!;
}

const textOf = (answer: BrokerAnswer) => ((answer.result as CallToolResult).content[0] as { text: string }).text;

describe('an ask answered to a modern caller as an input request', () => {
  it('asks with input_required, the elicitation the legacy prompt uses; the accepting retry runs the tool once and both rounds are recorded', async () => {
    const r = await rig();
    const args = { text: 'hello' };
    const first = await r.call('fx__echo', args, modern());
    expect(first.outcome).toBe('approval_required');
    const result = first.result as InputRequiredResult;
    expect(result).toMatchObject({ resultType: 'input_required', _meta: { 'mcp-broker/outcome': 'approval_required', 'mcp-broker/callId': first.callId } });
    expect(Object.keys(result.inputRequests!)).toEqual([APPROVAL_INPUT_KEY]);
    expect(result.requestState!.startsWith(APPROVAL_STATE_PREFIX)).toBe(true);
    // Sealed, not readable: neither the principal nor the arguments show through.
    expect(Buffer.from(result.requestState!.slice(APPROVAL_STATE_PREFIX.length), 'base64url').toString('latin1')).not.toMatch(/local|fx__echo/);
    expect(r.runs()).toEqual([]);

    // The same question a legacy session is asked live.
    const asked: unknown[] = [];
    const legacy: CallerSession = { sessionId: 'legacy', principal: 'local', unit: 'legacy', isLive: () => true, elicit: async (params) => (asked.push(params), { action: 'decline' }) };
    expect((await r.call('fx__echo', args, legacy)).outcome).toBe('approval_required');
    expect(result.inputRequests![APPROVAL_INPUT_KEY]).toEqual({ method: 'elicitation/create', params: asked[0] });
    expect(asked[0]).toMatchObject({ mode: 'form', requestedSchema: { type: 'object', properties: {} } });
    expect((asked[0] as { message: string }).message).toContain('Allow the tool "fx__echo" (fx/echo) to run?');

    const second = await r.call('fx__echo', args, retry(first, 'accept'));
    expect(second.outcome).toBe('ok');
    expect(textOf(second)).toBe('hello');
    expect(r.runs()).toEqual([expect.objectContaining({ tool: 'echo' })]);
    const [asking, declined, ran] = r.records();
    expect(r.records()).toHaveLength(3);
    expect(asking).toMatchObject({ callId: first.callId, outcome: 'approval_required', name: 'fx__echo', args });
    expect(asking!.reason).toContain('asked through an input request (input_required)');
    expect(declined).toMatchObject({ outcome: 'approval_required', sessionId: 'legacy' });
    expect(ran).toMatchObject({ callId: second.callId, outcome: 'ok', attempts: 1, args });
    // The asking round spent no budget; the approved call one.
    expect(r.gateway.budgets.used('local')).toBe(1);
  });

  it('a reused state is refused and the tool does not run a second time', async () => {
    const r = await rig();
    const first = await r.call('fx__echo', { text: 'once' }, modern());
    expect((await r.call('fx__echo', { text: 'once' }, retry(first, 'accept'))).outcome).toBe('ok');
    const again = await r.call('fx__echo', { text: 'once' }, retry(first, 'accept'));
    expect(again).toMatchObject({ outcome: 'approval_required' });
    expect(again.result).toMatchObject({ isError: true });
    expect(again.reason).toContain('the approval state was used already');
    expect(r.runs()).toHaveLength(1);
    expect(r.records().map((x) => x.outcome)).toEqual(['approval_required', 'ok', 'approval_required']);
  });

  it('two retries with one state at once: one runs, the other is refused', async () => {
    const r = await rig();
    const first = await r.call('fx__echo', { text: 'race' }, modern());
    const answers = await Promise.all([1, 2, 3].map(() => r.call('fx__echo', { text: 'race' }, retry(first, 'accept'))));
    expect(answers.map((a) => a.outcome).sort()).toEqual(['approval_required', 'approval_required', 'ok']);
    expect(r.runs()).toHaveLength(1);
  });

  it('policy.firstUse "ask": an approval through an input request is remembered as a legacy one is', async () => {
    const r = await rig({ policy: { firstUse: 'ask', rules: [] } });
    const first = await r.call('fx__echo', { text: '1' }, modern());
    expect(first.result).toMatchObject({ resultType: 'input_required' });
    expect((await r.call('fx__echo', { text: '1' }, retry(first, 'accept'))).outcome).toBe('ok');
    const later = await r.call('fx__echo', { text: '2' }, modern());
    expect(later.outcome).toBe('ok');
    expect(r.runs()).toHaveLength(2);
  });

  it('a reused state is refused by another broker sharing the store, and after a restart', async () => {
    const r = await rig();
    const first = await r.call('fx__echo', { text: 'x' }, modern());
    expect((await r.call('fx__echo', { text: 'x' }, retry(first, 'accept'))).outcome).toBe('ok');
    await r.gateway.stop();
    stopped.add(r);
    const next = await rig({ dir: r.dir });
    const again = await next.call('fx__echo', { text: 'x' }, retry(first, 'accept'));
    expect(again.reason).toContain('the approval state was used already');
    // The key is kept in the store: a state the first broker sealed opens in the second.
    const fresh = await next.call('fx__echo', { text: 'y' }, modern());
    expect((await next.call('fx__echo', { text: 'y' }, retry(fresh, 'accept'))).outcome).toBe('ok');
  });

  it('a tampered state is a malformed request (invalid_arguments, -32602), the tool does not run, and each refusal leaves one record', async () => {
    const r = await rig();
    const args = { text: 't' };
    const first = await r.call('fx__echo', args, modern());
    const state = stateOf(first);
    const body = state.slice(APPROVAL_STATE_PREFIX.length);
    const mid = Math.floor(body.length / 2);
    const flipped = APPROVAL_STATE_PREFIX + body.slice(0, mid) + (body[mid] === 'A' ? 'B' : 'A') + body.slice(mid + 1);
    const tampered = [flipped, `${state}-TAMPERED`, state.slice(0, -4), 'mb1.', 'v1.eyJwIjp7fX0.c2ln', '', 'x'.repeat(10_000)];
    for (const bad of tampered) {
      const answer = await r.call('fx__echo', args, retry(first, 'accept', { requestState: bad }));
      expect(answer.outcome).toBe('invalid_arguments');
      expect(answer.requestError?.code).toBe(-32602);
      expect(answer.reason).toContain('the approval state does not verify');
    }
    expect(r.runs()).toEqual([]);
    expect(r.records()).toHaveLength(1 + tampered.length);
    // The untouched state still works: a refused tampering spends nothing.
    expect((await r.call('fx__echo', args, retry(first, 'accept'))).outcome).toBe('ok');
  });

  it('a state sealed by another broker (another store, another key) is refused', async () => {
    const a = await rig();
    const b = await rig();
    const first = await a.call('fx__echo', { text: 'k' }, modern());
    const answer = await b.call('fx__echo', { text: 'k' }, retry(first, 'accept'));
    expect(answer.reason).toContain('the approval state does not verify');
    expect(b.runs()).toEqual([]);
  });

  it('an expired state (past policy.askTimeoutMs, by the injected clock) is refused invalid_arguments', async () => {
    const r = await rig();
    const first = await r.call('fx__echo', { text: 'late' }, modern());
    await r.clock.advance(ASK_TIMEOUT_MS);
    const answer = await r.call('fx__echo', { text: 'late' }, retry(first, 'accept'));
    expect(answer.outcome).toBe('invalid_arguments');
    expect(answer.requestError?.code).toBe(-32602);
    expect(answer.reason).toContain(`the approval state expired (an approval is valid for ${ASK_TIMEOUT_MS} ms)`);
    expect(r.runs()).toEqual([]);
  });

  it('just before its expiry a state still approves', async () => {
    const r = await rig();
    const first = await r.call('fx__echo', { text: 'in time' }, modern());
    await r.clock.advance(ASK_TIMEOUT_MS - 1);
    expect((await r.call('fx__echo', { text: 'in time' }, retry(first, 'accept'))).outcome).toBe('ok');
  });

  it('a state presented by another principal, for another tool or with changed arguments is refused invalid_arguments, never accepted', async () => {
    const r = await rig();
    const first = await r.call('fx__echo', { text: 'a', delayMs: 0 }, modern());
    const foreign = await r.call('fx__echo', { text: 'a', delayMs: 0 }, retry(first, 'accept', { principal: 'mallory', unit: 'mallory' }));
    expect(foreign.reason).toContain('the approval state was issued to another principal');
    const other = await r.call('fx__fail', { text: 'a', delayMs: 0 }, retry(first, 'accept'));
    expect(other.reason).toContain('the approval state was issued for another tool');
    const changed = await r.call('fx__echo', { text: 'b', delayMs: 0 }, retry(first, 'accept'));
    expect(changed.reason).toContain('the arguments differ from those the approval was asked for');
    for (const a of [foreign, other, changed]) expect(a).toMatchObject({ outcome: 'invalid_arguments', requestError: { code: -32602 } });
    expect(r.runs()).toEqual([]);
    expect(r.records()).toHaveLength(4);
    // The same arguments in another key order are the same arguments.
    expect((await r.call('fx__echo', { delayMs: 0, text: 'a' }, retry(first, 'accept'))).outcome).toBe('ok');
  });

  it('decline and cancel are denials as a legacy prompt\'s, and spend the state', async () => {
    const r = await rig();
    const first = await r.call('fx__echo', { text: 'no' }, modern());
    const declined = await r.call('fx__echo', { text: 'no' }, retry(first, 'decline'));
    expect(declined).toMatchObject({ outcome: 'approval_required' });
    expect(declined.reason).toContain('approval declined by the user');
    expect(declined.reason).not.toContain('approve it with');
    const after = await r.call('fx__echo', { text: 'no' }, retry(first, 'accept'));
    expect(after.reason).toContain('the approval state was used already');
    const second = await r.call('fx__echo', { text: 'no' }, modern());
    const cancelled = await r.call('fx__echo', { text: 'no' }, retry(second, 'cancel'));
    expect(cancelled.reason).toContain('approval prompt dismissed by the user');
    expect(r.runs()).toEqual([]);
  });

  it('a retry without the answer is asked again; an answer without the state is refused', async () => {
    const r = await rig();
    const first = await r.call('fx__echo', { text: 'q' }, modern());
    const again = await r.call('fx__echo', { text: 'q' }, modern({ requestState: stateOf(first), inputResponses: { other: { action: 'accept' } } }));
    expect(again.outcome).toBe('approval_required');
    expect(stateOf(again)).not.toBe(stateOf(first));
    const stateless = await r.call('fx__echo', { text: 'q' }, modern({ inputResponses: { [APPROVAL_INPUT_KEY]: { action: 'accept' } } }));
    expect(stateless.result).toMatchObject({ isError: true });
    expect(stateless.reason).toContain("an approval answer came without the broker's requestState");
    const malformed = await r.call('fx__echo', { text: 'q' }, retry(first, 'accept', { inputResponses: { [APPROVAL_INPUT_KEY]: { action: 'yes' } } }));
    expect(malformed.reason).toContain('the approval answer is not an elicitation result');
    expect(r.runs()).toEqual([]);
  });

  it('a modern caller that declared no elicitation is refused approval_required with the approve command, not asked', async () => {
    const r = await rig();
    const answer = await r.call('fx__echo', { text: 'n' }, modern({ clientCapabilities: {} }));
    expect(answer.result).toMatchObject({ isError: true });
    expect(answer.reason).toContain('its request declared no elicitation capability');
    expect(answer.reason).toContain('approve it with `mcp-broker approve fx__echo`');
    expect(r.runs()).toEqual([]);
  });

  it('a function tool with requireApproval is asked through an input request on every call', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'mcp-broker-append-')), 'lines.txt');
    process.env.APPROVAL_APPEND_FILE = file;
    try {
      const r = await rig({ policy: { rules: [] }, functions: [join(import.meta.dirname, '..', 'fixtures', 'functions', 'approval-append.mjs')] });
      const first = await r.call('append_line', { text: 'one' }, modern());
      expect(first.result).toMatchObject({ resultType: 'input_required' });
      expect(first.reason).toContain('the tool requires approval on every call');
      expect(existsSync(file)).toBe(false);
      expect((await r.call('append_line', { text: 'one' }, retry(first, 'accept'))).outcome).toBe('ok');
      expect((await r.call('append_line', { text: 'one' }, retry(first, 'accept'))).reason).toContain('the approval state was used already');
      const unaskable = await r.call('append_line', { text: 'two' }, modern({ clientCapabilities: {} }));
      expect(unaskable.reason).toContain('it runs only with a client that supports elicitation');
      expect(readFileSync(file, 'utf8')).toBe('one\n');
    } finally {
      delete process.env.APPROVAL_APPEND_FILE;
      rmSync(join(file, '..'), { recursive: true, force: true });
    }
  });

  it('an allowed tool refuses a state the broker did not seal (it may carry an upstream\'s): -32602, recorded, not run', async () => {
    const r = await rig({ policy: { rules: [] } });
    const answer = await r.call('fx__echo', { text: 'free' }, modern({ requestState: 'garbage', inputResponses: {} }));
    expect(answer.outcome).toBe('invalid_arguments');
    expect(answer.requestError?.code).toBe(-32602);
    expect(answer.attempts).toBe(0);
    expect(r.runs()).toHaveLength(0);
  });
});
