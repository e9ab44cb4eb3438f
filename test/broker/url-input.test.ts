/**
 * A legacy upstream's -32042 (URL elicitation required) to a modern (2026-07-28) caller as
 * URL-mode input requests (issue 14 §4), over the real call path of a Gateway: the real stdio
 * upstream test/fixtures/url-elicit.mjs (2025-11-25 only; it logs every call it runs to
 * FIXTURE_LOG), the real SQLite store and ndjson records in a temporary folder, and a ManualClock
 * for expiry. A modern caller is a CallerSession with `era: 'modern'`, as the modern wire fills it.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult, InputRequiredResult } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import type { BrokerAnswer } from '../../src/broker/broker.js';
import type { CallerSession, CallRecord } from '../../src/broker/types.js';
import { parseConfig } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway.js';
import { openRelay } from '../../src/broker/relay-input.js';
import { SealedStates } from '../../src/broker/sealed-state.js';
import { openUrlRetry, urlInputRequired } from '../../src/broker/url-input.js';
import { SqliteStore } from '../../src/store/sqlite.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'url-elicit.mjs');
const ASK_TIMEOUT_MS = 30_000;
const URL_CAPS = { elicitation: { form: {}, url: {} } };
/** A credential in the upstream's environment: the scrubber redacts it on every path toward a client. */
const SECRET = 'planted-url-secret-7d41';

interface Rig {
  gateway: Gateway;
  clock: ManualClock;
  dir: string;
  /** Every `tools/call` the upstream ran, in order. */
  runs(): { tool: string; id: string }[];
  records(): CallRecord[];
  call(name: string, args: Record<string, unknown>, caller: CallerSession): Promise<BrokerAnswer>;
}

const rigs: Rig[] = [];

async function rig(policy: object = {}): Promise<Rig> {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-url-input-'));
  const log = join(dir, 'fixture.ndjson');
  const records = join(dir, 'calls.ndjson');
  const config = parseConfig(
    {
      mcpServers: { u: { command: process.execPath, args: [FIXTURE], env: { FIXTURE_LOG: log, API_KEY: SECRET } } },
      broker: { dataDir: join(dir, 'data'), records: { path: records } },
      policy: { askTimeoutMs: ASK_TIMEOUT_MS, ...policy },
      estate: { enabled: false },
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

afterEach(async () => {
  for (const r of rigs.splice(0)) {
    await r.gateway.stop();
    rmSync(r.dir, { recursive: true, force: true });
  }
});

function modern(over: Partial<CallerSession> = {}): CallerSession {
  return { sessionId: null, principal: 'local', unit: 'local', era: 'modern', clientCapabilities: URL_CAPS, isLive: () => true, ...over };
}

function asked(answer: BrokerAnswer): InputRequiredResult {
  const result = answer.result as InputRequiredResult;
  expect(result.resultType).toBe('input_required');
  return result;
}

/** The retry of `first`: every key answered `action`, its state echoed. */
function retry(first: BrokerAnswer, action: string, over: Partial<CallerSession> = {}): CallerSession {
  const result = asked(first);
  const inputResponses = Object.fromEntries(Object.keys(result.inputRequests!).map((key) => [key, { action }]));
  return modern({ inputResponses, requestState: result.requestState!, ...over });
}

const textOf = (answer: BrokerAnswer) => ((answer.result as CallToolResult).content[0] as { text: string }).text;

describe("a legacy upstream's -32042 to a modern caller that declared elicitation.url", () => {
  it('is answered input_required with one URL-mode elicitation per data.elicitations entry and a sealed state; recorded ok, resultType input_required', async () => {
    const r = await rig();
    const first = await r.call('u__needs_auth_once', { id: 'a-1' }, modern());
    expect(first.outcome).toBe('ok');
    expect(first.wireError).toBeUndefined();
    const result = asked(first);
    expect(result.inputRequests).toEqual({
      'u/url/1': {
        method: 'elicitation/create',
        params: { mode: 'url', message: 'Authorize access', url: 'https://auth.example.test/connect?elicitation=a-1', elicitationId: 'a-1' },
      },
    });
    expect(result.requestState).toMatch(/^mb3\.url\./);
    // The state is encrypted: nothing the claim binds is readable.
    expect(Buffer.from(result.requestState!.slice('mb3.url.'.length), 'base64url').toString('latin1')).not.toContain('local');
    expect(r.records().map((x) => [x.name, x.outcome, x.resultType, x.attempts])).toEqual([['u__needs_auth_once', 'ok', 'input_required', 1]]);
  });

  it("the elicitations are scrubbed as the upstream's error is on every path toward a client", async () => {
    const r = await rig();
    const first = await r.call('u__needs_auth', { id: SECRET }, modern());
    const text = JSON.stringify(asked(first).inputRequests);
    expect(text).not.toContain(SECRET);
    expect(text).toContain('[REDACTED]');
  });

  it('an accepting retry sends the call again to the same tool with the same arguments, and gets its result', async () => {
    const r = await rig();
    const first = await r.call('u__needs_auth_once', { id: 'a-2' }, modern());
    const done = await r.call('u__needs_auth_once', { id: 'a-2' }, retry(first, 'accept'));
    expect(done.outcome).toBe('ok');
    expect(textOf(done)).toBe('authorized a-2');
    expect(r.runs().map((x) => [x.tool, x.id])).toEqual([
      ['needs_auth_once', 'a-2'],
      ['needs_auth_once', 'a-2'],
    ]);
    expect(r.records().map((x) => [x.outcome, x.resultType ?? null])).toEqual([
      ['ok', 'input_required'],
      ['ok', null],
    ]);
  });

  it('a -32042 again on the retry is the next input_required round', async () => {
    const r = await rig();
    const first = await r.call('u__needs_auth', { id: 'a-3' }, modern());
    const again = await r.call('u__needs_auth', { id: 'a-3' }, retry(first, 'accept'));
    expect(asked(again).requestState).not.toBe(asked(first).requestState);
    expect(r.runs()).toHaveLength(2);
  });

  it('decline and cancel end the call as cancelled, nothing sent again, no budget spent', async () => {
    const r = await rig();
    for (const action of ['decline', 'cancel'] as const) {
      const first = await r.call('u__needs_auth_once', { id: `d-${action}` }, modern());
      const ended = await r.call('u__needs_auth_once', { id: `d-${action}` }, retry(first, action));
      expect(ended.outcome).toBe('cancelled');
      expect(ended.attempts).toBe(0);
      expect(textOf(ended)).toContain(action === 'decline' ? 'the user declined' : 'the user dismissed');
      expect((ended.result as CallToolResult).isError).toBe(true);
    }
    expect(r.runs()).toHaveLength(2);
    expect(r.records().map((x) => x.outcome)).toEqual(['ok', 'cancelled', 'ok', 'cancelled']);
  });

  it('a reused, tampered, expired, foreign or misdirected state is refused -32602, recorded invalid_arguments, nothing sent', async () => {
    const r = await rig();
    const first = await r.call('u__needs_auth_once', { id: 'r-1' }, modern());
    const state = asked(first).requestState!;
    await r.call('u__needs_auth_once', { id: 'r-1' }, retry(first, 'accept'));
    const sent = r.runs().length;

    const refusals: BrokerAnswer[] = [];
    // Reused.
    refusals.push(await r.call('u__needs_auth_once', { id: 'r-1' }, retry(first, 'accept')));
    // Tampered (one character of the sealed body changed).
    const at = state.length - 5;
    const tampered = state.slice(0, at) + (state[at] === 'A' ? 'B' : 'A') + state.slice(at + 1);
    const second = await r.call('u__needs_auth_once', { id: 'r-2' }, modern());
    refusals.push(await r.call('u__needs_auth_once', { id: 'r-2' }, retry(second, 'accept', { requestState: tampered })));
    // Another principal, other arguments, another tool.
    refusals.push(await r.call('u__needs_auth_once', { id: 'r-2' }, retry(second, 'accept', { principal: 'mallory' })));
    refusals.push(await r.call('u__needs_auth_once', { id: 'r-other' }, retry(second, 'accept')));
    refusals.push(await r.call('u__needs_auth', { id: 'r-2' }, retry(second, 'accept')));
    // An answer that is no elicitation result.
    refusals.push(await r.call('u__needs_auth_once', { id: 'r-2' }, retry(second, 'maybe')));
    // Expired.
    await r.clock.advance(ASK_TIMEOUT_MS);
    refusals.push(await r.call('u__needs_auth_once', { id: 'r-2' }, retry(second, 'accept')));

    for (const refused of refusals) {
      expect(refused.outcome).toBe('invalid_arguments');
      expect(refused.requestError?.code).toBe(-32602);
      expect(refused.attempts).toBe(0);
    }
    expect(refusals[0]!.requestError?.message).toContain('used already');
    expect(refusals[1]!.requestError?.message).toContain('does not verify');
    expect(refusals[2]!.requestError?.message).toContain('another call');
    expect(refusals.at(-1)!.requestError?.message).toContain('expired');
    // Only the second call's first round reached the upstream.
    expect(r.runs()).toHaveLength(sent + 1);
    expect(r.records().filter((x) => x.outcome === 'invalid_arguments')).toHaveLength(refusals.length);
  });

  it('a valid state without answers is sent again as a fresh call (the upstream asks anew), the state left unspent', async () => {
    const r = await rig();
    const first = await r.call('u__needs_auth', { id: 'n-1' }, modern());
    const again = await r.call('u__needs_auth', { id: 'n-1' }, modern({ requestState: asked(first).requestState! }));
    expect(asked(again).inputRequests).toHaveProperty('u/url/1');
    expect(r.runs()).toHaveLength(2);
    const after = await r.call('u__needs_auth', { id: 'n-1' }, retry(first, 'decline'));
    expect(after.outcome).toBe('cancelled');
  });

  it('a policy ask approved before the -32042 round is not asked again on its retry', async () => {
    const r = await rig({ rules: [{ tools: ['u__needs_auth_once'], action: 'ask' }] });
    const caller = modern();
    const approval = asked(await r.call('u__needs_auth_once', { id: 'p-1' }, caller));
    const approvalKey = Object.keys(approval.inputRequests!)[0]!;
    const first = await r.call('u__needs_auth_once', { id: 'p-1' }, modern({ inputResponses: { [approvalKey]: { action: 'accept', content: {} } }, requestState: approval.requestState! }));
    expect(Object.keys(asked(first).inputRequests!)).toEqual(['u/url/1']);
    const done = await r.call('u__needs_auth_once', { id: 'p-1' }, retry(first, 'accept'));
    expect(textOf(done)).toBe('authorized p-1');
  });
});

describe("a legacy upstream's -32042 to a modern caller that did not declare elicitation.url", () => {
  it('keeps the upstream_error refusal result naming it (the caller cannot open URLs)', async () => {
    const r = await rig();
    const refused = await r.call('u__needs_auth', { id: 'f-1' }, modern({ clientCapabilities: { elicitation: {} } }));
    expect(refused.outcome).toBe('upstream_error');
    expect((refused.result as CallToolResult).isError).toBe(true);
    expect(textOf(refused)).toContain('URL elicitation required (-32042)');
  });
});

describe('URL-elicitation states (src/broker/url-input.ts) over the sealed-state codec', () => {
  const codec = () => {
    const clock = new ManualClock();
    return { clock, states: new SealedStates({ store: SqliteStore.open(':memory:'), clock }) };
  };
  const binding = { principal: 'alice', server: 'up', target: 'pay', args: { amount: 3 } };
  const error = {
    code: -32042,
    message: 'needs two sign-ins',
    data: {
      elicitations: [
        { mode: 'url', elicitationId: 'e1', url: 'https://a.example.test/1', message: 'first' },
        { mode: 'url', url: 'https://a.example.test/2', message: 'second', extra: 'dropped' },
        { mode: 'url', elicitationId: 'no-url', message: 'no url: left out' },
      ],
    },
  };
  const caller = (over: Partial<CallerSession> = {}): CallerSession => ({ sessionId: null, principal: 'alice', unit: 'u', era: 'modern', isLive: () => true, ...over });

  it('one input request per elicitation with a url, keyed <server>/url/<n>; the retry is sent only when every key is accepted, ended when any is declined', async () => {
    const { states } = codec();
    const asked = (await urlInputRequired(states, error, binding, { callId: 'c1', ttlMs: 1000 }))!;
    expect(asked.inputRequests).toEqual({
      'up/url/1': { method: 'elicitation/create', params: { mode: 'url', message: 'first', url: 'https://a.example.test/1', elicitationId: 'e1' } },
      'up/url/2': { method: 'elicitation/create', params: { mode: 'url', message: 'second', url: 'https://a.example.test/2' } },
    });
    const answer = (a: string, b: string) => caller({ requestState: asked.requestState!, inputResponses: { 'up/url/1': { action: a }, 'up/url/2': { action: b } } });
    expect(await openUrlRetry(states, answer('accept', 'decline'), binding)).toMatchObject({ kind: 'ended', reason: expect.stringContaining('declined') });
    // Spent by that answer.
    expect(await openUrlRetry(states, answer('accept', 'accept'), binding)).toMatchObject({ kind: 'refused', reason: expect.stringContaining('used already') });
    const again = (await urlInputRequired(states, error, binding, { callId: 'c2', ttlMs: 1000 }))!;
    const accepted = caller({ requestState: again.requestState!, inputResponses: { 'up/url/1': { action: 'accept' }, 'up/url/2': { action: 'accept' } } });
    expect(await openUrlRetry(states, accepted, binding)).toEqual({ kind: 'send' });
  });

  it('no answer for some key: sent as a fresh call, the state unspent', async () => {
    const { states } = codec();
    const asked = (await urlInputRequired(states, error, binding, { callId: 'c1', ttlMs: 1000 }))!;
    const partial = caller({ requestState: asked.requestState!, inputResponses: { 'up/url/1': { action: 'decline' } } });
    expect(await openUrlRetry(states, partial, binding)).toEqual({ kind: 'send' });
    const full = caller({ requestState: asked.requestState!, inputResponses: { 'up/url/1': { action: 'cancel' }, 'up/url/2': { action: 'accept' } } });
    expect(await openUrlRetry(states, full, binding)).toMatchObject({ kind: 'ended', reason: expect.stringContaining('dismissed') });
  });

  it('no -32042, or no elicitation with a url: no input requests (the refusal stands)', async () => {
    const { states } = codec();
    expect(await urlInputRequired(states, { ...error, code: -32603 }, binding, { callId: 'c', ttlMs: 1000 })).toBeUndefined();
    expect(await urlInputRequired(states, { ...error, data: { elicitations: [{ mode: 'url', message: 'x' }] } }, binding, { callId: 'c', ttlMs: 1000 })).toBeUndefined();
    expect(await urlInputRequired(states, { ...error, data: undefined }, binding, { callId: 'c', ttlMs: 1000 })).toBeUndefined();
  });

  it('a URL-elicitation state is refused on the relay path of prompts/get and resources/read (openRelay)', async () => {
    const { states } = codec();
    const asked = (await urlInputRequired(states, error, binding, { callId: 'c1', ttlMs: 1000 }))!;
    const opening = await openRelay(states, caller({ requestState: asked.requestState! }), { ...binding, method: 'prompts/get' });
    expect(opening.kind).toBe('refused');
  });
});
