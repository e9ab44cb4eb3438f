/**
 * broker__reconnect's answer (seed 004_359de2f3ce5e2188.txt) on a real Registry with an
 * in-process upstream whose re-dial result the test chooses: `reason` scrubbed then cut at 300
 * characters, `toolNames` present iff the roster holds tools of the server the caller may see, concurrent calls
 * sharing one re-dial. The end-to-end behaviour is in test/e2e/reconnect.test.ts.
 */
import { EventEmitter } from 'node:events';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { reconnectTool, type ReconnectAnswer } from '../../src/builtins/reconnect.js';
import { invokeStage } from '../../src/broker/invoke.js';
import { judgeStage } from '../../src/broker/judge.js';
import { compilePolicy, isPrivilegedPrincipal } from '../../src/broker/policy.js';
import { compose } from '../../src/broker/runner.js';
import type { BrokerCall } from '../../src/broker/types.js';
import { principalSchema, policySchema } from '../../src/config/schema.js';
import { SqliteStore } from '../../src/store/index.js';
import { ToolRouter } from '../../src/router/index.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { Scrubber } from '../../src/shared/scrub.js';
import { Registry } from '../../src/upstream/registry.js';
import type { Upstream, UpstreamCatalog, UpstreamStatus } from '../../src/upstream/types.js';

const SECRET = 'hunter2-upstream-secret';

/** An upstream whose `reconnect()` ends as the test says, emitting `changed` like the real one. */
class ScriptedUpstream extends EventEmitter {
  readonly kind = 'stdio' as const;
  readonly secrets = [SECRET];
  status: UpstreamStatus = { state: 'ready' };
  capabilities = { tools: {} };
  catalog: UpstreamCatalog = {
    tools: [
      { name: 'a', inputSchema: { type: 'object' } },
      { name: 'b', inputSchema: { type: 'object' } },
    ],
    prompts: [],
    resources: [],
    resourceTemplates: [],
  };
  redials = 0;
  constructor(
    readonly name: string,
    private readonly next: () => UpstreamStatus,
  ) {
    super();
  }
  async reconnect(): Promise<UpstreamStatus> {
    this.redials++;
    const had = this.catalog.tools;
    this.catalog = { ...this.catalog, tools: [] };
    if (had.length) this.emit('changed', 'tools');
    await new Promise((r) => setTimeout(r, 5));
    this.status = this.next();
    if (this.status.state === 'ready') {
      this.catalog = { ...this.catalog, tools: had };
      this.emit('changed', 'tools');
    }
    return this.status;
  }
}

function setup(next: () => UpstreamStatus, rules: unknown[] = []) {
  const registry = new Registry(silentLogger());
  const upstream = new ScriptedUpstream('dev', next);
  registry.add({ upstream: upstream as unknown as Upstream, prefix: 'dev' });
  registry.rebuild();
  const scrubber = new Scrubber([SECRET]);
  const router = new ToolRouter(registry, new ManualClock());
  const policy = compilePolicy(policySchema.parse({ rules }));
  const visibility = { policy, resolve: (name: string) => router.resolve(name), isReadOnly: () => false, isPrivileged: (p: string) => p === 'local' };
  router.register([reconnectTool({ registry, scrubber, visibility: () => visibility })], { server: 'broker' });
  const run = async (server: string, principal = 'local'): Promise<ReconnectAnswer> => {
    const signal = new AbortController().signal;
    const call: BrokerCall = {
      callId: 'c',
      request: { name: 'broker__reconnect', args: { server }, signal },
      session: { sessionId: 's', principal, unit: 's', isLive: () => true },
      startedAt: 0,
      signal,
      attempts: 0,
      bytesOut: 0,
      notes: {},
    };
    const result: CallToolResult = await router.dispatch(call);
    return result.structuredContent as unknown as ReconnectAnswer;
  };
  return { registry, upstream, router, scrubber, run };
}

describe('broker__reconnect answer', () => {
  it('a failed re-dial: refused, the reason scrubbed and cut at 300 characters, no toolNames, the roster withdrawn', async () => {
    const message = `spawn failed: ${SECRET} ${'x'.repeat(400)}\nsecond line`;
    const { run, registry } = setup(() => ({ state: 'failed', errorCode: 'spawn_failed', message }));
    const answer = await run('dev');
    expect(answer.outcome).toBe('refused');
    expect(answer.status).toEqual({ state: 'failed', errorCode: 'spawn_failed' });
    expect(answer.reason!.length).toBe(300);
    expect(answer.reason!.startsWith('spawn failed: [REDACTED] xxx')).toBe(true);
    expect(answer.reason).not.toContain(SECRET);
    expect(answer.reason!.endsWith('…')).toBe(true);
    expect(answer).not.toHaveProperty('toolNames');
    expect([...registry.roster.tools.keys()]).toEqual([]);
  });

  it('an http_status failure keeps the machine fields for the caller to act on', async () => {
    const { run } = setup(() => ({ state: 'failed', errorCode: 'http_status', httpStatus: 401, message: 'unauthorized' }));
    expect(await run('dev')).toEqual({ server: 'dev', outcome: 'refused', status: { state: 'failed', errorCode: 'http_status', httpStatus: 401 }, reason: 'unauthorized' });
  });

  it('a re-dial that throws is still an answer: refused, reconnect_failed, the reason scrubbed', async () => {
    const { run } = setup(() => {
      throw new Error(`dial exploded with ${SECRET}`);
    });
    const answer = await run('dev');
    expect(answer).toMatchObject({ server: 'dev', outcome: 'refused', status: { errorCode: 'reconnect_failed' } });
    expect(answer.reason).toContain('dial exploded');
    expect(answer.reason).not.toContain(SECRET);
  });

  it('a successful re-dial: accepted with the roster names; two calls at once share one re-dial', async () => {
    const { run, upstream } = setup(() => ({ state: 'ready' }));
    const [one, two] = await Promise.all([run('dev'), run('dev')]);
    expect(one).toEqual({ server: 'dev', outcome: 'accepted', status: { state: 'ready' }, toolNames: ['dev__a', 'dev__b'] });
    expect(two).toEqual(one);
    expect(upstream.redials).toBe(1);
  });

  it('names only the tools the caller may see: one the policy denies its principal is left out, as tools/list leaves it out', async () => {
    const { run } = setup(() => ({ state: 'ready' }), [{ tools: ['dev__b'], principals: ['bob'], action: 'deny' }]);
    expect((await run('dev', 'bob')).toolNames).toEqual(['dev__a']);
    expect((await run('dev', 'local')).toolNames).toEqual(['dev__a', 'dev__b']);
    // Every tool of the server denied: no toolNames at all.
    const { run: runAll } = setup(() => ({ state: 'ready' }), [{ tools: ['dev__*'], principals: ['bob'], action: 'deny' }]);
    expect(await runAll('dev', 'bob')).not.toHaveProperty('toolNames');
  });

  it('issue 12: through the judge, a plain user is denied and nothing is re-dialled; an operator re-dials', async () => {
    const { router, upstream, scrubber } = setup(() => ({ state: 'ready' }));
    expect(router.resolve('broker__reconnect')).toMatchObject({ server: 'broker', requiresPrivilege: true });
    const principals = {
      alice: principalSchema.parse({ token: 'a'.repeat(16) }),
      ops: principalSchema.parse({ token: 'o'.repeat(16), role: 'operator' }),
    };
    const path = compose([
      judgeStage({
        resolve: (name) => router.resolve(name),
        isReadOnly: () => false,
        policy: compilePolicy(policySchema.parse({})),
        store: SqliteStore.open(':memory:'),
        clock: new ManualClock(),
        askTimeoutMs: 1000,
        scrubArgs: (a) => scrubber.value(a),
        isPrivileged: (p) => isPrivilegedPrincipal(principals, p),
      }),
      invokeStage({ router }),
    ]);
    const as = (principal: string): BrokerCall => {
      const signal = new AbortController().signal;
      return {
        callId: `c-${principal}`,
        request: { name: 'broker__reconnect', args: { server: 'dev' }, signal },
        session: { sessionId: 's', principal, unit: 's', isLive: () => true },
        startedAt: 0,
        signal,
        attempts: 0,
        bytesOut: 0,
        notes: {},
      };
    };
    const alice = as('alice');
    await path(alice);
    expect(alice).toMatchObject({ outcome: 'denied', attempts: 0 });
    expect(upstream.redials).toBe(0);
    const ops = as('ops');
    await path(ops);
    expect(ops.outcome).toBe('ok');
    expect(ops.result?.structuredContent).toMatchObject({ outcome: 'accepted' });
    expect(upstream.redials).toBe(1);
  });
});
