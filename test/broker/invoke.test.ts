/**
 * The invoke stage with the stages that read its attempts (budget, breaker, retry, record),
 * over a dispatcher that serialises the arguments the way a transport does: what counts as an
 * attempt, as the upstream's fault, and what a reason says (issue 17 §5, §11).
 */
import type { CallToolResult } from '@modelcontextprotocol/client';
import { ProtocolError, SdkError, SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import type { RecordSink } from '../../src/audit/records.js';
import { MAX_ARGUMENT_DEPTH, argumentsProblem } from '../../src/broker/arguments.js';
import { Broker } from '../../src/broker/broker.js';
import { Breakers, breakerStage } from '../../src/broker/breaker.js';
import { BudgetLedger, budgetStage } from '../../src/broker/budget.js';
import { classifyFailure } from '../../src/broker/failure.js';
import { invokeStage } from '../../src/broker/invoke.js';
import { recordStage } from '../../src/broker/record.js';
import { retryStage } from '../../src/broker/retry.js';
import type { BrokerCall, CallRecord } from '../../src/broker/types.js';
import { BrokerError } from '../../src/shared/errors.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { session, target, text } from './support.js';

const THRESHOLD = 3;

/** A call path of record, budget, breaker, retry and invoke; `answer` plays the upstream behind a serialising transport. */
function build(answer: (call: BrokerCall, n: number) => Promise<CallToolResult>, budget = 100) {
  const clock = new ManualClock();
  const written: CallRecord[] = [];
  const records: RecordSink = { append: async (r) => void written.push(r as CallRecord), close: async () => undefined };
  const ledger = new BudgetLedger();
  const breakers = new Breakers({ clock, threshold: THRESHOLD, openMs: 60_000 });
  let dispatched = 0;
  const broker = new Broker(
    [
      recordStage({ records, clock, logger: silentLogger(), scrubArgs: (a) => a, scrubText: (t) => t }),
      // Stands in for the judge: only its read-only verdict matters here.
      { name: 'judge', run: async (c, next) => ((c.readOnly = c.target?.definition?.annotations?.readOnlyHint === true), next()) },
      budgetStage({ limitFor: () => budget, ledger }),
      breakerStage(breakers),
      retryStage({ now: () => clock.now(), sleep: async () => undefined, maxRetries: 2, baseDelayMs: 0 }),
      invokeStage({
        router: {
          dispatch: async (c) => {
            JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: c.target!.toolName, arguments: c.request.args } });
            return answer(c, ++dispatched);
          },
        },
      }),
    ],
    clock,
  );
  const read = target('fx__read', { tool: { annotations: { readOnlyHint: true } } });
  const call = (args: Record<string, unknown> = {}, t = read) =>
    broker.call({ name: t.name, args, signal: new AbortController().signal }, session(), t);
  return { call, written, ledger, breakers, dispatched: () => dispatched, read };
}

/** `{tree: [[…]]}` with `levels` levels in all (the arguments object is level 1). */
function nestedArgs(levels: number): Record<string, unknown> {
  let tree: unknown[] = [];
  for (let i = 2; i < levels; i++) tree = [tree];
  return { tree };
}

describe('arguments that cannot be sent (issue 17 §5)', () => {
  it('arguments nested 10,000 deep are invalid_arguments, never sent, no attempt, no budget, and never open the breaker', async () => {
    const p = build(async () => text('fine'), 1);
    for (let i = 0; i < THRESHOLD + 2; i++) {
      const answer = await p.call(nestedArgs(10_000));
      expect(answer).toMatchObject({ outcome: 'invalid_arguments', status: 400 });
      expect(answer.reason).toBe(`the arguments of "fx__read" are nested deeper than ${MAX_ARGUMENT_DEPTH} levels; nothing was sent`);
    }
    expect(p.dispatched()).toBe(0);
    expect(p.ledger.used('s-1')).toBe(0);
    expect(p.breakers.state('fx__read')).toBe('closed');
    expect(p.written.map((r) => [r.attempts, r.breaker])).toEqual(Array.from({ length: THRESHOLD + 2 }, () => [0, 'closed']));
    expect((await p.call({ text: 'good' })).outcome).toBe('ok');
  });

  it(`${MAX_ARGUMENT_DEPTH} levels are sent; ${MAX_ARGUMENT_DEPTH + 1} are refused`, async () => {
    expect(argumentsProblem(nestedArgs(MAX_ARGUMENT_DEPTH))).toBeUndefined();
    expect(argumentsProblem(nestedArgs(MAX_ARGUMENT_DEPTH + 1))).toContain(`deeper than ${MAX_ARGUMENT_DEPTH} levels`);
    const p = build(async () => text('fine'));
    expect((await p.call(nestedArgs(MAX_ARGUMENT_DEPTH))).outcome).toBe('ok');
    expect((await p.call(nestedArgs(MAX_ARGUMENT_DEPTH + 1))).outcome).toBe('invalid_arguments');
    expect(p.dispatched()).toBe(1);
  });

  it('arguments a function-tool or flow caller hands in as objects: a cycle or a BigInt is invalid_arguments, unsent', async () => {
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic.self = { again: cyclic };
    const p = build(async () => text('fine'));
    const loop = await p.call(cyclic);
    expect(loop).toMatchObject({ outcome: 'invalid_arguments', reason: expect.stringContaining('cycle') });
    const big = await p.call({ n: 10n });
    expect(big).toMatchObject({ outcome: 'invalid_arguments', reason: expect.stringContaining('BigInt') });
    expect(p.dispatched()).toBe(0);
    expect(p.written.map((r) => r.attempts)).toEqual([0, 0]);
    // One object reached twice without a cycle is fine.
    const shared = { v: 1 };
    expect((await p.call({ a: shared, b: [shared, shared] })).outcome).toBe('ok');
  });
});

describe('refusals that sent nothing (issue 17 §11)', () => {
  const unsent: Array<[string, BrokerError, string]> = [
    ['a function tool\'s bad arguments', new BrokerError('invalid_arguments', 'shout: text must be a string'), 'invalid_arguments'],
    ['a rest tool\'s arguments outside its schema', new BrokerError('invalid_arguments', 'rest tool "x": nothing was sent'), 'invalid_arguments'],
    ['a handler\'s denial', new BrokerError('denied', 'no'), 'denied'],
    ['an approval not given', new BrokerError('approval_required', 'not approved'), 'approval_required'],
    ['a rest path escape', new BrokerError('rest_host_escape', 'rest tool "x": leaves the base; nothing was sent'), 'guard_error'],
    ['an upstream not connected', new BrokerError('upstream_unavailable', 'upstream "fx" is not connected (failed)'), 'upstream_error'],
  ];
  for (const [what, error, outcome] of unsent) {
    it(`${what} records attempts: 0, spends no budget and leaves the breaker closed`, async () => {
      const p = build(async () => Promise.reject(error), 1);
      for (let i = 0; i < THRESHOLD + 1; i++) expect((await p.call({}, target('fx__write'))).outcome).toBe(outcome);
      expect(p.written.map((r) => r.attempts)).toEqual(Array.from({ length: THRESHOLD + 1 }, () => 0));
      expect(p.ledger.used('s-1')).toBe(0);
      expect(p.breakers.state('fx__write')).toBe('closed');
    });
  }

  it('a failure the upstream saw still counts: attempts 1, budget spent, the breaker opens at the threshold', async () => {
    const p = build(async () => Promise.reject(new ProtocolError(-32603, 'boom')));
    for (let i = 0; i < THRESHOLD; i++) expect((await p.call({}, target('fx__write'))).outcome).toBe('upstream_error');
    expect(p.written.map((r) => r.attempts)).toEqual([1, 1, 1]);
    expect(p.ledger.used('s-1')).toBe(THRESHOLD);
    expect(p.breakers.state('fx__write')).toBe('open');
  });

  it('a rest redirect refused after its request went out is an attempt (data.sent wins over the code)', async () => {
    const p = build(async () => Promise.reject(new BrokerError('rest_host_escape', 'redirects outside the pinned base', { data: { sent: true } })));
    expect((await p.call({}, target('fx__write'))).outcome).toBe('guard_error');
    expect(p.written[0]!.attempts).toBe(1);
  });

  it('a read-only retry that finds the upstream gone counts only the attempts sent; the sent one failed upstream, so it counts for the breaker', async () => {
    const p = build(async (_c, n) =>
      Promise.reject(n % 3 === 1 ? new SdkError(SdkErrorCode.ConnectionClosed, 'Connection closed') : new BrokerError('upstream_unavailable', 'upstream "fx" is not connected (connecting)')),
    );
    for (let i = 0; i < THRESHOLD; i++) {
      const answer = await p.call();
      expect(answer.outcome).toBe('upstream_error');
      expect(answer.record?.attempts).toBe(1);
    }
    expect(p.dispatched()).toBe(3 * THRESHOLD); // dispatched three times a call, sent once
    expect(p.breakers.state('fx__read')).toBe('open');
  });
});

describe('reasons name the JSON-RPC code once (issue 17 §11)', () => {
  it('an upstream error whose message already carries the SDK prefix says it once', async () => {
    // What the SDK builds from the wire error `{code: -32602, message: "MCP error -32602: Unknown tool: x"}` of an
    // upstream on SDK v1 (whose McpError prefixes its message). SDK v2 adds no prefix of its own (v1 added a second one).
    const fromV1 = ProtocolError.fromError(-32602, 'MCP error -32602: Unknown tool: x');
    expect(fromV1.message).toBe('MCP error -32602: Unknown tool: x');
    const p = build(async () => Promise.reject(fromV1));
    const answer = await p.call();
    expect(answer).toMatchObject({ outcome: 'invalid_arguments', reason: 'MCP error -32602: Unknown tool: x' });
    expect(answer.result.content).toEqual([{ type: 'text', text: 'invalid_arguments: MCP error -32602: Unknown tool: x' }]);
  });

  it('a chain of hops says it once; different codes are each kept', () => {
    const chain = ProtocolError.fromError(-32603, 'MCP error -32603: MCP error -32603: internal');
    expect(classifyFailure(chain).reason).toBe('MCP error -32603: internal');
    expect(classifyFailure(new ProtocolError(-32603, 'MCP error -32603: MCP error -32602: inner')).reason).toBe('MCP error -32603: MCP error -32602: inner');
    expect(classifyFailure(new Error('MCP error -32001: MCP error -32001: Request timed out')).reason).toBe('MCP error -32001: Request timed out');
  });
});

describe('classifyFailure', () => {
  it('reads outcome, sent and retryable off what was thrown', () => {
    expect(classifyFailure(new SdkError(SdkErrorCode.ConnectionClosed, 'Connection closed'))).toMatchObject({ outcome: 'upstream_error', sent: true, retryable: true });
    expect(classifyFailure(new SdkError(SdkErrorCode.RequestTimeout, 'Request timed out'))).toMatchObject({ outcome: 'upstream_error', sent: true, retryable: true });
    expect(classifyFailure(new ProtocolError(-32000, 'Connection closed'))).toMatchObject({ outcome: 'upstream_error', sent: true, retryable: true });
    expect(classifyFailure(new ProtocolError(-32602, 'bad'))).toMatchObject({ outcome: 'invalid_arguments', sent: true, retryable: false });
    expect(classifyFailure(new BrokerError('upstream_http', 'HTTP 503', { data: { httpStatus: 503, retryAfterMs: 20 } }))).toMatchObject({
      outcome: 'upstream_error',
      sent: true,
      retryable: true,
      retryAfterMs: 20,
    });
    expect(classifyFailure(new BrokerError('unserialisable', 'x', { data: { sent: false } }))).toMatchObject({ outcome: 'invalid_arguments', sent: false });
    expect(classifyFailure(new BrokerError('estate_scope_escape', 'the estate path leaves the root'))).toMatchObject({ outcome: 'guard_error', sent: false });
    expect(classifyFailure(new BrokerError('transport_error', 'no answer'))).toMatchObject({ outcome: 'upstream_error', sent: true, retryable: true });
    expect(classifyFailure(Object.assign(new Error('Bad Gateway'), { code: 502 }))).toMatchObject({ outcome: 'upstream_error', sent: true, retryable: true, reason: 'HTTP 502 from the upstream: Bad Gateway' });
    // SDK v2's Streamable HTTP refusal: the status is in `status`, the code a string.
    const refused = (status: number) => new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, 'Error POSTing to endpoint: no', { status, statusText: 'no' });
    expect(classifyFailure(refused(502))).toMatchObject({ outcome: 'upstream_error', sent: true, retryable: true, reason: 'HTTP 502 from the upstream: Error POSTing to endpoint: no' });
    expect(classifyFailure(refused(400))).toMatchObject({ outcome: 'upstream_error', sent: true, retryable: false });
  });
});
