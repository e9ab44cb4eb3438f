/**
 * Flows end to end through the real CLI (issue 16; seed 000_13a5a3abd08ace07.txt): the kv fixture
 * (writes that carry rollback descriptors, a partial write that fails with one) and the real
 * server-filesystem. A step that reports its own failure fails the flow; inverses replay newest
 * first, the failing step's own first; a failing inverse is reported as such; without rollback
 * the error text names the calls to run; a nested flow bubbles its inverses; a denied step fails
 * the flow `denied`; every step is recorded with the flow's id and the step's id.
 */
import { execFileSync } from 'node:child_process';
import { linkSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { fixture, nodeServer, npmServer, startBroker, waitFor, type StartedBroker } from './helpers.js';
import { connectHttp, startHttpBroker, type ConnectedClient } from '../transports/harness.js';

let broker: StartedBroker | undefined;
const dirs: string[] = [];
/** A new temporary folder, removed after the tests. */
function folder(): string {
  const d = mkdtempSync(join(tmpdir(), 'mcp-broker-flow-fs-'));
  dirs.push(d);
  return d;
}

afterEach(async () => {
  await broker?.close();
  broker = undefined;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const outcome = (r: CallToolResult) => (r._meta as Record<string, unknown> | undefined)?.['mcp-broker/outcome'];

interface Answer {
  success: boolean;
  flowId: string;
  failedStep?: string;
  error?: string;
  steps: Array<{ id: string; tool: string; outcome: string; callId?: string; data: CallToolResult }>;
  rolledBack: Array<{ step: string; tool: string; args: Record<string, unknown>; outcome: string; applied: boolean; fromFailedStep?: true }>;
  unapplied: Array<{ step: string; tool: string; args: Record<string, unknown>; call: string; fromFailedStep?: true }>;
  onFailure?: { tool: string; outcome: string };
  snapshot?: { kind: string; restored: boolean };
}

async function kv(extra: Record<string, unknown> = {}, servers: Record<string, unknown> = {}) {
  broker = await startBroker({ servers: { kv: nodeServer(fixture('kv.mjs')), ...servers }, extra });
  return broker;
}

async function flow(args: Record<string, unknown>): Promise<{ result: CallToolResult; answer: Answer }> {
  const result = (await broker!.client.callTool({ name: 'broker__flow_run', arguments: args })) as CallToolResult;
  return { result, answer: result.structuredContent as unknown as Answer };
}

async function dump(): Promise<Record<string, unknown>> {
  const r = (await broker!.client.callTool({ name: 'kv__dump', arguments: {} })) as CallToolResult;
  return (r.structuredContent as { entries: Record<string, unknown> }).entries;
}

const put = (id: string, key: string, value: unknown) => ({ id, tool: 'kv__put', args: { key, value } });
const partial = (id: string, entries: Record<string, unknown>, failAt: string) => ({ id, tool: 'kv__put_many', args: { entries: { ...entries, [failAt]: 0 }, failAt } });

describe('broker__flow_run', () => {
  it('a flow whose steps all succeed answers ok, fits its outputSchema, and passes a result to a later step', async () => {
    await kv();
    const tool = (await broker!.client.listTools()).tools.find((t) => t.name === 'broker__flow_run')!;
    expect(tool.outputSchema).toBeDefined();
    const { result, answer } = await flow({ steps: [put('a', 'a', { n: 1 }), put('b', 'b', '${steps.a.result.value}')] });
    expect(outcome(result)).toBe('ok');
    expect(result.isError).toBeUndefined();
    expect(answer).toMatchObject({ success: true, rolledBack: [], unapplied: [] });
    expect((result.content[0] as { text: string }).text).toBe('flow ok: 2 step(s) ran');
    expect(await dump()).toEqual({ a: { n: 1 }, b: { n: 1 } });
    // What a parent flow would harvest: both inverses, in the order they landed.
    expect((result._meta as Record<string, unknown>)['mcp-broker/rollback']).toEqual([
      { tool: 'kv__delete', args: { key: 'a' }, step: 'a' },
      { tool: 'kv__delete', args: { key: 'b' }, step: 'b' },
    ]);
  });

  it('a step whose handler reports failure fails the flow (called directly, the same answer is a tool_error with its body)', async () => {
    await kv();
    const direct = (await broker!.client.callTool({ name: 'kv__put_many', arguments: { entries: { a: 1, b: 2 }, failAt: 'b' } })) as CallToolResult;
    expect(outcome(direct)).toBe('tool_error');
    expect(direct.structuredContent).toEqual({ success: false, error: 'cannot set "b"; 1 key(s) were set before it', applied: ['a'] });
    expect((direct._meta as Record<string, unknown>)['mcp-broker/rollback']).toEqual([{ tool: 'kv__delete', args: { key: 'a' } }]);

    const { result, answer } = await flow({ steps: [partial('many', { c: 3 }, 'd'), put('after', 'e', 5)] });
    expect(outcome(result)).toBe('tool_error');
    expect(result.isError).toBe(true);
    expect(answer.success).toBe(false);
    expect(answer.failedStep).toBe('many');
    expect(answer.steps.map((s) => [s.id, s.outcome])).toEqual([['many', 'tool_error']]);
    // The step's whole handler body is in `data`.
    expect(answer.steps[0]!.data.structuredContent).toEqual({ success: false, error: 'cannot set "d"; 1 key(s) were set before it', applied: ['c'] });
    expect(await dump()).toEqual({ a: 1, c: 3 });
  });

  it('rolls back newest first, the failing step\'s partial write first, and records every call with the flow and step ids', async () => {
    await kv();
    const { result, answer } = await flow({
      steps: [put('first', 'a', 1), put('second', 'b', 2), partial('many', { c: 3, d: 4 }, 'x'), put('never', 'z', 9)],
      rollback_on_failure: true,
    });
    expect(answer.success).toBe(false);
    expect(answer.failedStep).toBe('many');
    expect(answer.rolledBack.map((r) => [r.step, r.tool, r.args.key, r.applied, r.fromFailedStep ?? false])).toEqual([
      ['many', 'kv__delete', 'd', true, true],
      ['many', 'kv__delete', 'c', true, true],
      ['second', 'kv__delete', 'b', true, false],
      ['first', 'kv__delete', 'a', true, false],
    ]);
    expect(answer.unapplied).toEqual([]);
    expect(answer.error).toMatch(/step "many" \(kv__put_many\) ended tool_error.*rolled back 4 inverse\(s\)/);
    expect(await dump()).toEqual({});

    const records = await broker!.records();
    const flowRecord = records.find((r) => r.name === 'broker__flow_run')!;
    expect(flowRecord.outcome).toBe('tool_error');
    expect(flowRecord.callId).toBe(answer.flowId);
    const inFlow = records.filter((r) => (r.flow as { id?: string } | undefined)?.id === answer.flowId);
    expect(inFlow.map((r) => [r.name, r.outcome, r.flow])).toEqual([
      ['kv__put', 'ok', { id: answer.flowId, step: 'first' }],
      ['kv__put', 'ok', { id: answer.flowId, step: 'second' }],
      ['kv__put_many', 'tool_error', { id: answer.flowId, step: 'many' }],
      ['kv__delete', 'ok', { id: answer.flowId, step: 'many', phase: 'rollback' }],
      ['kv__delete', 'ok', { id: answer.flowId, step: 'many', phase: 'rollback' }],
      ['kv__delete', 'ok', { id: answer.flowId, step: 'second', phase: 'rollback' }],
      ['kv__delete', 'ok', { id: answer.flowId, step: 'first', phase: 'rollback' }],
    ]);
    expect(answer.steps.map((s) => s.callId)).toEqual(inFlow.slice(0, 3).map((r) => r.callId));
    expect(result.content[0]).toMatchObject({ type: 'text' });
  });

  it('a failing inverse is reported as failing, the others still run', async () => {
    await kv();
    const { answer } = await flow({ steps: [put('keep', 'a', 1), put('stuck', 'sticky1', 1), partial('many', {}, 'x')], rollback_on_failure: true });
    expect(answer.rolledBack.map((r) => [r.step, r.outcome, r.applied])).toEqual([
      ['stuck', 'tool_error', false],
      ['keep', 'ok', true],
    ]);
    expect(answer.error).toContain('rollback INCOMPLETE: 1 of 2 inverse(s) failed: kv__delete {"key":"sticky1"} (step "stuck", tool_error');
    expect(await dump()).toEqual({ sticky1: 1 });
  });

  it('without rollback_on_failure the unapplied inverses are named in the error text as calls to run, and as a field', async () => {
    await kv();
    const { result, answer } = await flow({ steps: [put('one', 'a', 1), put('two', 'a', 2), partial('many', { b: 1 }, 'x')] });
    const calls = ['kv__delete {"key":"b"}', 'kv__put {"key":"a","value":1}', 'kv__delete {"key":"a"}'];
    expect(answer.unapplied.map((u) => u.call)).toEqual(calls);
    expect(answer.unapplied.map((u) => [u.step, u.fromFailedStep ?? false])).toEqual([['many', true], ['two', false], ['one', false]]);
    expect(answer.rolledBack).toEqual([]);
    const text = (result.content[0] as { text: string }).text;
    expect(text).toContain(`not rolled back (rollback_on_failure is off); to undo what landed, run in this order: 1. ${calls[0]} 2. ${calls[1]} 3. ${calls[2]}`);
    // The record's reason carries the same line.
    const record = (await broker!.records()).find((r) => r.name === 'broker__flow_run')!;
    expect(record.reason).toContain(`1. ${calls[0]}`);
    expect(await dump()).toEqual({ a: 2, b: 1 });
    // Each call runs as printed.
    for (const u of answer.unapplied) expect(outcome((await broker!.client.callTool({ name: u.tool, arguments: u.args })) as CallToolResult)).toBe('ok');
    expect(await dump()).toEqual({});
  });

  it('a nested flow bubbles its inverses up: a child that succeeded and a child that failed are both undone by the parent', async () => {
    await kv();
    const child = (id: string, steps: unknown[]) => ({ id, tool: 'broker__flow_run', args: { steps } });
    const { answer } = await flow({
      steps: [put('x', 'x', 1), child('ok-child', [put('y', 'y', 1)]), child('bad-child', [put('z', 'z', 1), partial('many', { w: 1 }, 'q')])],
      rollback_on_failure: true,
    });
    expect(answer.failedStep).toBe('bad-child');
    expect(answer.steps.map((s) => [s.id, s.outcome])).toEqual([['x', 'ok'], ['ok-child', 'ok'], ['bad-child', 'tool_error']]);
    const childAnswer = answer.steps[2]!.data.structuredContent as unknown as Answer;
    expect(childAnswer.failedStep).toBe('many');
    expect(answer.rolledBack.map((r) => [r.step, r.args.key, r.applied])).toEqual([
      ['bad-child/many', 'w', true],
      ['bad-child/z', 'z', true],
      ['ok-child/y', 'y', true],
      ['x', 'x', true],
    ]);
    expect(await dump()).toEqual({});
    // The child's steps are recorded under the child's own flow id; the child call under the parent's.
    const records = await broker!.records();
    const childRecord = records.find((r) => r.callId === childAnswer.flowId)!;
    expect(childRecord.flow).toEqual({ id: answer.flowId, step: 'bad-child' });
    expect(records.filter((r) => (r.flow as { id?: string } | undefined)?.id === childAnswer.flowId).map((r) => (r.flow as { step: string }).step)).toEqual(['z', 'many']);
  });

  it('a step to a tool the policy denies fails the flow denied; so does an inverse to one', async () => {
    await kv({ policy: { rules: [{ tools: ['kv__delete'], action: 'deny' }] } });
    const direct = (await broker!.client.callTool({ name: 'kv__delete', arguments: { key: 'a' } })) as CallToolResult;
    expect(outcome(direct)).toBe('denied');
    const { answer } = await flow({ steps: [put('a', 'a', 1), { id: 'del', tool: 'kv__delete', args: { key: 'a' } }], rollback_on_failure: true });
    expect(answer.failedStep).toBe('del');
    expect(answer.steps.map((s) => [s.id, s.outcome])).toEqual([['a', 'ok'], ['del', 'denied']]);
    // The inverse (kv__delete) is denied too: reported as not applied, the key stays.
    expect(answer.rolledBack.map((r) => [r.step, r.outcome, r.applied])).toEqual([['a', 'denied', false]]);
    expect(await dump()).toEqual({ a: 1 });
    const records = await broker!.records();
    expect(records.filter((r) => r.name === 'kv__delete').map((r) => [r.outcome, r.flow ?? null])).toEqual([
      ['denied', null],
      ['denied', { id: answer.flowId, step: 'del' }],
      ['denied', { id: answer.flowId, step: 'a', phase: 'rollback' }],
    ]);
  });

  it('a denied flow tool runs no step', async () => {
    await kv({ policy: { rules: [{ tools: ['broker__flow_run'], action: 'deny' }] } });
    const { result } = await flow({ steps: [put('a', 'a', 1)] });
    expect(outcome(result)).toBe('denied');
    expect(await dump()).toEqual({});
  });

  it('a flow the client cancels still rolls back what landed', async () => {
    const log = join(mkdtempSync(join(tmpdir(), 'mcp-broker-flow-log-')), 'kv.log');
    dirs.push(dirname(log));
    broker = await startBroker({ servers: { kv: nodeServer(fixture('kv.mjs'), { env: { FIXTURE_LOG: log } }) } });
    const aborter = new AbortController();
    const running = broker.client
      .callTool({ name: 'broker__flow_run', arguments: { steps: [put('a', 'a', 1), { id: 'wait', tool: 'kv__slow', args: {} }], rollback_on_failure: true } }, { signal: aborter.signal })
      .catch((err: unknown) => err);
    await waitFor(() => existsSync(log) && readFileSync(log, 'utf8').includes('"tool":"slow"'), 'the slow step to start');
    aborter.abort();
    expect(await running).toBeInstanceOf(Error);
    const records = await waitFor(async () => {
      const all = await broker!.records();
      // The flow's own record is written after its rollback's: wait for both.
      const rolledBack = all.some((r) => (r.flow as { phase?: string } | undefined)?.phase === 'rollback');
      return rolledBack && all.some((r) => r.name === 'broker__flow_run') ? all : undefined;
    }, 'the rollback record and the flow\'s own');
    expect(records.filter((r) => r.flow).map((r) => [r.name, r.outcome, (r.flow as { phase?: string }).phase ?? 'step'])).toEqual([
      ['kv__put', 'ok', 'step'],
      ['kv__slow', 'cancelled', 'step'],
      ['kv__delete', 'ok', 'rollback'],
    ]);
    expect(records.find((r) => r.name === 'broker__flow_run')?.outcome).toBe('cancelled');
    expect(await dump()).toEqual({});
  });

  it('on_failure runs after the rollback', async () => {
    await kv();
    const { answer } = await flow({
      steps: [put('a', 'a', 1), partial('many', {}, 'x')],
      rollback_on_failure: true,
      on_failure: { tool: 'kv__put', args: { key: 'failed', value: '${steps.a.result.key}' } },
    });
    expect(answer.onFailure).toMatchObject({ tool: 'kv__put', outcome: 'ok' });
    const records = await broker!.records();
    expect(records.filter((r) => r.flow).map((r) => (r.flow as { phase?: string }).phase ?? 'step')).toEqual(['step', 'step', 'rollback', 'on_failure']);
    expect(await dump()).toEqual({ failed: 'a' });
  });
});

describe('flows and the scrubber', () => {
  it('a secret in a step\'s arguments or result is redacted from the answer, the unapplied calls and the records', async () => {
    const secret = 'flow-canary-7f3a9c2e51b8d640';
    broker = await startBroker({
      servers: { kv: nodeServer(fixture('kv.mjs'), { env: { API_TOKEN: '${env:FLOW_E2E_SECRET}' } }) },
      env: { FLOW_E2E_SECRET: secret },
    });
    const { result, answer } = await flow({ steps: [put('a', 'a', secret), put('b', 'a', 'other'), partial('many', {}, 'x')] });
    expect(answer.unapplied.map((u) => u.call)).toContain('kv__put {"key":"a","value":"[REDACTED]"}');
    expect(JSON.stringify(result)).not.toContain(secret);
    expect(JSON.stringify(await broker.records())).not.toContain(secret);
  });
});

describe('flows over server-filesystem', () => {

  it('references an earlier result, and a declared inverse restores a file when a later step fails', async () => {
    const root = folder();
    writeFileSync(join(root, 'a.txt'), 'old');
    broker = await startBroker({ servers: { fs: { command: 'node', args: [npmServer('server-filesystem'), root] } } });
    const { answer } = await flow({
      steps: [
        { id: 'read', tool: 'fs__read_text_file', args: { path: join(root, 'a.txt') } },
        { id: 'copy', tool: 'fs__write_file', args: { path: join(root, 'b.txt'), content: 'copy of ${steps.read.result.content}' } },
        { id: 'write', tool: 'fs__write_file', args: { path: join(root, 'a.txt'), content: 'new' }, inverse: { tool: 'fs__write_file', args: { path: join(root, 'a.txt'), content: '${steps.read.result.content}' } } },
        { id: 'missing', tool: 'fs__read_text_file', args: { path: join(root, 'no-such-file.txt') } },
      ],
      rollback_on_failure: true,
    });
    expect(answer.steps.map((s) => [s.id, s.outcome])).toEqual([['read', 'ok'], ['copy', 'ok'], ['write', 'ok'], ['missing', 'tool_error']]);
    expect(readFileSync(join(root, 'b.txt'), 'utf8')).toBe('copy of old');
    expect(answer.rolledBack.map((r) => [r.step, r.applied])).toEqual([['write', true]]);
    expect(readFileSync(join(root, 'a.txt'), 'utf8')).toBe('old');
  });

  for (const kind of ['copy', 'git'] as const) {
    it(`snapshot "estate" restores the estate root's files on failure (${kind})`, async () => {
      const root = folder();
      writeFileSync(join(root, 'keep.txt'), 'before');
      if (kind === 'git') {
        execFileSync('git', ['init', '-q', root]);
        execFileSync('git', ['-C', root, '-c', 'user.email=t@t', '-c', 'user.name=t', 'commit', '-q', '--allow-empty', '-m', 'init']);
      }
      broker = await startBroker({ servers: { fs: { command: 'node', args: [npmServer('server-filesystem'), root] } }, extra: { estate: { root } } });
      const { answer } = await flow({
        steps: [
          { id: 'change', tool: 'fs__write_file', args: { path: join(root, 'keep.txt'), content: 'after' } },
          { id: 'create', tool: 'fs__write_file', args: { path: join(root, 'created.txt'), content: 'x' } },
          { id: 'missing', tool: 'fs__read_text_file', args: { path: join(root, 'no-such-file.txt') } },
        ],
        snapshot: 'estate',
      });
      expect(answer.failedStep).toBe('missing');
      expect(answer.snapshot).toEqual({ kind, restored: true });
      expect(readFileSync(join(root, 'keep.txt'), 'utf8')).toBe('before');
      expect(existsSync(join(root, 'created.txt'))).toBe(false);
      if (kind === 'git') expect(execFileSync('git', ['-C', root, 'status', '--porcelain']).toString()).toBe('?? keep.txt\n');
    });
  }
});

describe("flows: snapshot \"estate\" and a hard link to the broker's records file inside the root", () => {
  for (const kind of ['copy', 'git'] as const) {
    it(`the link is neither saved nor put back as a plain file; the records stay the broker's (${kind}) (the restore wrote the audit records back as an estate file)`, async () => {
      const root = folder();
      writeFileSync(join(root, 'keep.txt'), 'before');
      mkdirSync(join(root, 'notes'));
      if (kind === 'git') {
        execFileSync('git', ['init', '-q', root]);
        execFileSync('git', ['-C', root, '-c', 'user.email=t@t', '-c', 'user.name=t', 'commit', '-q', '--allow-empty', '-m', 'init']);
      }
      broker = await startBroker({ servers: { fs: { command: 'node', args: [npmServer('server-filesystem'), root] } }, extra: { estate: { root } } });
      const b = broker;
      // A call, so the records file holds a record; then a hard link to it inside the estate root.
      expect(outcome((await b.client.callTool({ name: 'estate__stat', arguments: { path: 'keep.txt' } })) as CallToolResult)).toBe('ok');
      await waitFor(async () => (await b.records()).length > 0, 'a record written');
      const link = join(root, 'notes', 'today.txt');
      linkSync(b.recordsPath, link);
      const { answer } = await flow({
        steps: [
          { id: 'change', tool: 'fs__write_file', args: { path: join(root, 'keep.txt'), content: 'after' } },
          { id: 'missing', tool: 'fs__read_text_file', args: { path: join(root, 'no-such-file.txt') } },
        ],
        snapshot: 'estate',
      });
      expect(answer.failedStep).toBe('missing');
      expect(answer.snapshot).toEqual({ kind, restored: true });
      expect(readFileSync(join(root, 'keep.txt'), 'utf8')).toBe('before');
      // Still the records file under another name: not a plain copy of old records.
      expect(lstatSync(link).ino).toBe(lstatSync(b.recordsPath).ino);
      const read = (await b.client.callTool({ name: 'estate__read_file', arguments: { path: 'notes/today.txt' } })) as CallToolResult;
      expect(outcome(read)).toBe('guard_error');
      expect(JSON.stringify(read.content)).not.toContain('callId');
      if (kind === 'git') {
        // Nothing of the records went into the repository's objects (inside the estate root).
        const objects = execFileSync('git', ['-C', root, 'cat-file', '--batch-all-objects', '--batch']).toString();
        expect(objects).not.toContain('callId');
      }
    });
  }
});

describe('flows: snapshot "estate" with estate.root a symlink', () => {
  let linked: StartedBroker | undefined;
  afterEach(async () => linked?.close());

  it('saves and puts back the folder the link names (restoring emptied that folder, then failed: every file lost)', async () => {
    const real = folder();
    writeFileSync(join(real, 'keep.txt'), 'before');
    mkdirSync(join(real, 'd'));
    writeFileSync(join(real, 'd', 'inner.txt'), 'inner');
    const link = join(folder(), 'root-link');
    symlinkSync(real, link);
    linked = await startBroker({ servers: { fs: { command: 'node', args: [npmServer('server-filesystem'), real] } }, extra: { estate: { root: link } } });
    const result = (await linked.client.callTool({
      name: 'broker__flow_run',
      arguments: {
        steps: [
          { id: 'change', tool: 'fs__write_file', args: { path: join(real, 'keep.txt'), content: 'after' } },
          { id: 'missing', tool: 'fs__read_text_file', args: { path: join(real, 'no-such-file.txt') } },
        ],
        snapshot: 'estate',
      },
    })) as CallToolResult;
    const answer = result.structuredContent as unknown as Answer;
    expect(answer.snapshot).toEqual({ kind: 'copy', restored: true });
    expect(readFileSync(join(real, 'keep.txt'), 'utf8')).toBe('before');
    expect(readFileSync(join(real, 'd', 'inner.txt'), 'utf8')).toBe('inner');
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
  });
});

describe('flows: snapshot "estate" is an operator\'s', () => {
  it('a user principal asking for snapshot "estate" is refused before any step runs; an operator may (regression: any caller could restore the shared root over other principals\' changes)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'mcp-broker-flow-fs-'));
    dirs.push(root);
    writeFileSync(join(root, 'keep.txt'), 'before');
    const tokens = { USER_TOKEN: 'user-token-0123456789abcdef', OPS_TOKEN: 'ops-token-0123456789abcdef0' };
    const http = await startHttpBroker({
      servers: { fs: { command: 'node', args: [npmServer('server-filesystem'), root] } },
      extra: { estate: { root }, principals: { user: { token: '${env:USER_TOKEN}' }, ops: { token: '${env:OPS_TOKEN}', role: 'operator' } } },
      env: tokens,
    });
    const clients: ConnectedClient[] = [];
    try {
      const steps = [
        { id: 'change', tool: 'fs__write_file', args: { path: join(root, 'keep.txt'), content: 'after' } },
        { id: 'missing', tool: 'fs__read_text_file', args: { path: join(root, 'no-such-file.txt') } },
      ];
      const run = async (token: string) => {
        const c = await connectHttp(http.url, 'streamable', { token });
        clients.push(c);
        const result = (await c.client.callTool({ name: 'broker__flow_run', arguments: { steps, snapshot: 'estate' } })) as CallToolResult;
        return { result, answer: result.structuredContent as Answer };
      };
      const user = await run(tokens.USER_TOKEN);
      expect(user.result.isError).toBe(true);
      expect(user.answer).toMatchObject({ success: false, steps: [] });
      expect(user.answer.error).toContain('only an operator may ask for it');
      expect(readFileSync(join(root, 'keep.txt'), 'utf8')).toBe('before'); // no step ran
      const ops = await run(tokens.OPS_TOKEN);
      expect(ops.answer.failedStep).toBe('missing');
      expect(ops.answer.snapshot).toMatchObject({ restored: true });
      expect(readFileSync(join(root, 'keep.txt'), 'utf8')).toBe('before');
    } finally {
      for (const c of clients) await c.close();
      await http.close();
    }
  });
});

describe('flows: what a newcomer found (issue 16 D1-D7)', () => {
  const stepRecords = async (flowId: string) =>
    (await broker!.records()).filter((r) => (r.flow as { id?: string } | undefined)?.id === flowId).map((r) => [r.name, r.outcome, r.flow]);

  it('D1: on_failure whose reference cannot be read is refused invalid_arguments, recorded, and nothing is sent', async () => {
    await kv();
    for (const ref of ['${steps.many.result.error}', '${steps.nope.result}']) {
      const { answer } = await flow({ steps: [partial('many', {}, 'x')], on_failure: { tool: 'kv__put', args: { key: 'failed', value: ref } } });
      expect(answer.onFailure).toMatchObject({ tool: 'kv__put', outcome: 'invalid_arguments' });
      expect(answer.error).toMatch(/on_failure kv__put ended invalid_arguments: .*reference that cannot be read.*nothing was sent/);
      expect((await stepRecords(answer.flowId)).at(-1)).toEqual(['kv__put', 'invalid_arguments', { id: answer.flowId, step: 'on_failure', phase: 'on_failure' }]);
    }
    expect(await dump()).toEqual({});
  });

  it('D2: an inverse whose reference cannot be read is not sent, is reported applied:false with the reason, and listed as unapplied', async () => {
    await kv();
    const { answer } = await flow({
      steps: [{ ...put('a', 'a', 1), inverse: { tool: 'kv__put', args: { key: 'a', value: '${steps.nope.result}' } } }, partial('many', {}, 'x')],
      rollback_on_failure: true,
    });
    expect(answer.rolledBack.map((r) => [r.step, r.outcome, r.applied])).toEqual([['a', 'invalid_arguments', false]]);
    expect(answer.error).toContain('rollback INCOMPLETE: 1 of 1 inverse(s) failed');
    expect(answer.unapplied.map((u) => [u.step, u.call])).toEqual([['a', 'kv__put {"key":"a","value":"${steps.nope.result}"}']]);
    expect(await dump()).toEqual({ a: 1 });
  });

  it('D3: a withheld step (its write landed) keeps its rollback descriptor: rolled back, or listed as unapplied', async () => {
    await kv({ policy: { output: { deny: ['WITHHELD-ME'] } } });
    const rolled = await flow({ steps: [put('w', 'w', 'WITHHELD-ME')], rollback_on_failure: true });
    expect(rolled.answer.steps.map((s) => [s.id, s.outcome])).toEqual([['w', 'withheld']]);
    expect(rolled.answer.rolledBack.map((r) => [r.step, r.tool, r.applied, r.fromFailedStep])).toEqual([['w', 'kv__delete', true, true]]);
    expect(await dump()).toEqual({});
    const kept = await flow({ steps: [put('w', 'w', 'WITHHELD-ME')] });
    expect(kept.answer.unapplied.map((u) => u.call)).toEqual(['kv__delete {"key":"w"}']);
    expect(kept.answer.error).toContain('1. kv__delete {"key":"w"}');
  });

  it('D4: a flow the client cancels without rollback ends cancelled, and its record names the calls left to run', async () => {
    const log = join(mkdtempSync(join(tmpdir(), 'mcp-broker-flow-log-')), 'kv.log');
    dirs.push(dirname(log));
    broker = await startBroker({ servers: { kv: nodeServer(fixture('kv.mjs'), { env: { FIXTURE_LOG: log } }) } });
    const aborter = new AbortController();
    const running = broker.client
      .callTool({ name: 'broker__flow_run', arguments: { steps: [put('a', 'a', 1), { id: 'wait', tool: 'kv__slow', args: {} }] } }, { signal: aborter.signal })
      .catch((err: unknown) => err);
    await waitFor(() => existsSync(log) && readFileSync(log, 'utf8').includes('"tool":"slow"'), 'the slow step to start');
    aborter.abort();
    expect(await running).toBeInstanceOf(Error);
    const record = await waitFor(async () => (await broker!.records()).find((r) => r.name === 'broker__flow_run'), 'the flow record');
    expect(record.outcome).toBe('cancelled');
    expect(record.reason).toContain('cancelled by the client; flow failed: step "wait" (kv__slow) ended cancelled');
    expect(record.reason).toContain('to undo what landed, run in this order: 1. kv__delete {"key":"a"}');
    expect(await dump()).toEqual({ a: 1 });
  });

  it('a flow that runs out of budget still rolls back what landed: inverses are never refused budget_exhausted', async () => {
    await kv({ broker: { budgetPerUnit: 3 } });
    const { answer } = await flow({ steps: [put('a', 'a', 1), put('b', 'b', 1), put('c', 'c', 1)], rollback_on_failure: true });
    expect(answer.steps.map((s) => [s.id, s.outcome])).toEqual([['a', 'ok'], ['b', 'ok'], ['c', 'budget_exhausted']]);
    expect(answer.rolledBack.map((r) => [r.step, r.outcome, r.applied])).toEqual([['b', 'ok', true], ['a', 'ok', true]]);
  });

  it('D5: a step refused for a reference that cannot be read leaves a record line with the flow and step', async () => {
    await kv();
    const { answer } = await flow({ steps: [put('a', 'a', 1), put('b', 'b', '${steps.nope.result}')] });
    expect(answer.steps.map((s) => [s.id, s.outcome])).toEqual([['a', 'ok'], ['b', 'invalid_arguments']]);
    expect(await stepRecords(answer.flowId)).toEqual([
      ['kv__put', 'ok', { id: answer.flowId, step: 'a' }],
      ['kv__put', 'invalid_arguments', { id: answer.flowId, step: 'b' }],
    ]);
    expect(await dump()).toEqual({ a: 1 });
  });

  it('D6: a nested flow\'s calls to run are named once, and not at all when the parent rolls them back', async () => {
    await kv();
    const child = { id: 'child', tool: 'broker__flow_run', args: { steps: [put('z', 'z', 1), partial('many', {}, 'q')] } };
    const rolled = await flow({ steps: [child], rollback_on_failure: true });
    expect(rolled.answer.rolledBack.map((r) => [r.step, r.applied])).toEqual([['child/z', true]]);
    expect(rolled.answer.error).not.toContain('run in this order');
    expect(rolled.answer.error).toContain('step "many" (kv__put_many) ended tool_error');
    const kept = await flow({ steps: [child] });
    expect(kept.answer.unapplied.map((u) => u.call)).toEqual(['kv__delete {"key":"z"}']);
    expect(kept.answer.error!.split('run in this order').length).toBe(2);
    expect(kept.answer.error!.split('1. kv__delete').length).toBe(2);
  });

  it('D7: a misspelt top-level or step argument is invalid_arguments and runs nothing; the input schema forbids extra properties', async () => {
    await kv();
    const tool = (await broker!.client.listTools()).tools.find((t) => t.name === 'broker__flow_run')!;
    const schema = tool.inputSchema as unknown as { additionalProperties?: unknown; required?: string[]; properties: { steps: { items: { additionalProperties?: unknown; required?: string[] } } } };
    expect(schema.additionalProperties).toBe(false);
    expect(schema.properties.steps.items.additionalProperties).toBe(false);
    expect(schema.properties.steps.items.required).toEqual(['id', 'tool']);
    for (const args of [{ steps: [put('a', 'a', 1)], rollback: true }, { steps: [{ ...put('a', 'a', 1), invers: { tool: 'kv__delete' } }] }]) {
      const { result } = await flow(args);
      expect(outcome(result)).toBe('invalid_arguments');
    }
    expect(await dump()).toEqual({});
  });
});
