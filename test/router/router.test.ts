/**
 * The router's dispatch rules (seed 003_208e7d69e85a85fd.txt), one test per rule, on the real
 * ToolRouter with a real Registry. Time is a ManualClock; nothing sleeps.
 */
import { EventEmitter } from 'node:events';
import type { CallToolResult, ElicitResult } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Broker } from '../../src/broker/broker.js';
import { deadlineStage } from '../../src/broker/deadline.js';
import { invokeStage } from '../../src/broker/invoke.js';
import type { BrokerCall, CallerSession } from '../../src/broker/types.js';
import { defineFunctionTool, LIVENESS_PING_TIMEOUT_MS, ToolDeniedError, type PrimaryHandler, ToolRouter } from '../../src/router/index.js';
import { BrokerError } from '../../src/shared/errors.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { Registry } from '../../src/upstream/registry.js';
import type { CallOptions, Upstream, UpstreamCatalog } from '../../src/upstream/types.js';

let seq = 0;

function session(over: Partial<CallerSession> = {}): CallerSession {
  return { sessionId: 's-1', principal: 'local', unit: 's-1', isLive: () => true, ...over };
}

function makeCall(name: string, args: Record<string, unknown> = {}, caller: CallerSession = session(), signal = new AbortController().signal): BrokerCall {
  return {
    callId: `call-${++seq}`,
    request: { name, args, signal },
    session: caller,
    startedAt: 0,
    signal,
    attempts: 0,
    bytesOut: 0,
    notes: {},
  };
}

function newRouter(registry = new Registry(silentLogger())): ToolRouter {
  return new ToolRouter(registry, new ManualClock(), { askTimeoutMs: 5_000 });
}

/** A promise with its resolve exposed. */
function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const text = (r: CallToolResult) => (r.content[0] as { text: string }).text;

describe('defineFunctionTool', () => {
  it('generates the advertised inputSchema from the zod schema (input side: defaulted fields are optional)', () => {
    const tool = defineFunctionTool({
      name: 'forecast',
      description: 'd',
      parameters: z.object({ city: z.string().min(1).describe('City'), units: z.enum(['c', 'f']).default('c') }),
      handler: () => 'x',
    });
    expect(tool.definition.inputSchema).toEqual({
      type: 'object',
      properties: { city: { type: 'string', minLength: 1, description: 'City' }, units: { type: 'string', enum: ['c', 'f'], default: 'c' } },
      required: ['city'],
    });
    expect(tool.definition.name).toBe('forecast');
  });

  it('refuses names outside ^[A-Za-z0-9_-]{1,64}$ and non-object parameters', () => {
    expect(() => defineFunctionTool({ name: 'a.b', description: '', parameters: z.object({}), handler: () => 1 })).toThrow(/must match/);
    expect(() => defineFunctionTool({ name: 'x'.repeat(65), description: '', parameters: z.object({}), handler: () => 1 })).toThrow(/must match/);
    expect(() => defineFunctionTool({ name: 'ok', description: '', parameters: z.string(), handler: () => 1 })).toThrow(/z\.object/);
  });
});

describe('ToolRouter: register', () => {
  it('counts newly registered names, skips what is not a defineFunctionTool result, and re-binds in place', async () => {
    const router = newRouter();
    const one = defineFunctionTool({ name: 'one', description: '', parameters: z.object({}), handler: () => 'first' });
    const again = defineFunctionTool({ name: 'one', description: '', parameters: z.object({}), handler: () => 'second' });
    const literal = { name: 'literal', description: '', inputSchema: { type: 'object' }, handler: () => 'x' };
    expect(router.register([one, literal])).toBe(1);
    expect(router.register([again])).toBe(0);
    expect(router.register(null)).toBe(0);
    expect(router.list().map((t) => t.name)).toEqual(['one']);
    expect(text(await router.dispatch(makeCall('one')))).toBe('second');
  });
});

describe('ToolRouter: batch dispatch (seed 003 "Dispatch policy")', () => {
  it('a batch with ANY unknown name is denied as a whole, at once, and runs nothing', async () => {
    const router = newRouter();
    let ran = 0;
    router.register([defineFunctionTool({ name: 'known', description: '', parameters: z.object({}), handler: () => (ran++, 'ran') })]);
    const outcomes = await router.dispatchBatch([makeCall('known'), makeCall('nobody_has_this'), makeCall('known')]);
    expect(outcomes).toHaveLength(3);
    for (const o of outcomes) {
      expect(o.outcome).toBe('denied');
      expect(o).toMatchObject({ code: 'unknown_tool' });
      expect((o as { message: string }).message).toContain('nobody_has_this');
    }
    expect(ran).toBe(0);
  });

  it('a claimed batch runs every call in parallel and answers positionally', async () => {
    const router = newRouter();
    const gates = { a: deferred<string>(), b: deferred<string>() };
    const started: string[] = [];
    router.register(
      (['a', 'b'] as const).map((name) =>
        defineFunctionTool({
          name,
          description: '',
          parameters: z.object({}),
          handler: () => {
            started.push(name);
            return gates[name].promise;
          },
        }),
      ),
    );
    const pending = router.dispatchBatch([makeCall('a'), makeCall('b')]);
    await Promise.resolve();
    await Promise.resolve();
    await Promise.resolve();
    // Both started before either finished: parallel.
    expect(started.sort()).toEqual(['a', 'b']);
    gates.b.resolve('B');
    gates.a.resolve('A');
    const outcomes = await pending;
    expect(outcomes.map((o) => (o.outcome === 'ok' ? text(o.result) : o.outcome))).toEqual(['A', 'B']);
  });

  it('each call is isolated: a throw, a ToolDeniedError and a success in one batch get their own outcomes', async () => {
    const router = newRouter();
    router.register([
      defineFunctionTool({ name: 'boom', description: '', parameters: z.object({}), handler: () => { throw new Error('it broke'); } }),
      defineFunctionTool({ name: 'nope', description: '', parameters: z.object({}), handler: () => { throw new ToolDeniedError('not for you'); } }),
      defineFunctionTool({ name: 'fine', description: '', parameters: z.object({}), handler: async () => ({ ok: 1 }) }),
    ]);
    const [boom, nope, fine] = await router.dispatchBatch([makeCall('boom'), makeCall('nope'), makeCall('fine')]);
    expect(boom).toMatchObject({ outcome: 'error', code: 'handler_error', message: 'it broke' });
    expect(nope).toMatchObject({ outcome: 'denied', code: 'denied', message: 'not for you' });
    expect(fine).toMatchObject({ outcome: 'ok', result: { structuredContent: { ok: 1 }, content: [{ type: 'text', text: '{"ok":1}' }] } });
  });
});

describe('ToolRouter: primary handlers win over the fallback table', () => {
  it('an attached primary handler serves its name ahead of a function tool of the same name; detached, the function tool serves again', async () => {
    const router = newRouter();
    let fallbackRan = 0;
    router.register([defineFunctionTool({ name: 'shared', description: 'fallback', parameters: z.object({}), handler: () => (fallbackRan++, 'from function tool') })]);
    const primary: PrimaryHandler = {
      server: 'primary',
      tools: [{ name: 'shared', description: 'primary', inputSchema: { type: 'object' } }],
      async call(name, args) {
        return { content: [{ type: 'text', text: `from primary (${name}, ${JSON.stringify(args)})` }] };
      },
    };
    const detach = router.attach(primary);
    expect(router.resolve('shared')).toMatchObject({ server: 'primary', source: 'local' });
    expect(router.list().filter((t) => t.name === 'shared')).toEqual([primary.tools[0]]);
    expect(text(await router.dispatch(makeCall('shared', { x: 1 })))).toBe('from primary (shared, {"x":1})');
    expect(fallbackRan).toBe(0);
    detach();
    expect(router.resolve('shared')).toMatchObject({ server: 'functions', source: 'local' });
    expect(text(await router.dispatch(makeCall('shared')))).toBe('from function tool');
    expect(fallbackRan).toBe(1);
    expect(router.detach(primary)).toBe(false);
  });
});

describe('ToolRouter: argument parsing', () => {
  const seen: unknown[] = [];
  const tool = defineFunctionTool({
    name: 'parse',
    description: '',
    parameters: z.object({
      city: z.string().trim().transform((s) => s.toUpperCase()),
      units: z.enum(['c', 'f']).default('c'),
      tags: z.array(z.string()).default([]),
      count: z.string().transform((s) => s.length),
    }),
    handler: (args) => {
      seen.push(args);
      return 'ok';
    },
  });

  it('the handler gets the parsed output: defaults applied, transforms run', async () => {
    const router = newRouter();
    router.register([tool]);
    const [out] = await router.dispatchBatch([makeCall('parse', { city: '  paris ', count: 'abcd' })]);
    expect(out!.outcome).toBe('ok');
    expect(seen.at(-1)).toEqual({ city: 'PARIS', units: 'c', tags: [], count: 4 });
  });

  it('a parse failure is error/invalid_arguments with the formatted zod issues, and the handler does not run', async () => {
    const router = newRouter();
    router.register([tool]);
    const before = seen.length;
    const [out] = await router.dispatchBatch([makeCall('parse', { units: 'kelvin', count: 3 })]);
    expect(out).toMatchObject({ outcome: 'error', code: 'invalid_arguments' });
    const message = (out as { message: string }).message;
    expect(message).toContain('→ at city');
    expect(message).toContain('→ at units');
    expect(message).toContain('→ at count');
    expect(message).not.toContain('\n');
    expect(seen.length).toBe(before);
  });
});

describe('ToolRouter: requireApproval', () => {
  function gated(ran: { n: number }) {
    return defineFunctionTool({
      name: 'launch',
      description: '',
      parameters: z.object({ target: z.string() }),
      requireApproval: true,
      handler: () => {
        ran.n++;
        return 'launched';
      },
    });
  }

  it('approval followed by a dead connection leaves the handler unrun (error/connection_lost; dispatch → cancelled)', async () => {
    const router = newRouter();
    const ran = { n: 0 };
    router.register([gated(ran)]);
    let live = true;
    const asked: string[] = [];
    const caller = session({
      isLive: () => live,
      async elicit(params): Promise<ElicitResult> {
        asked.push(params.message);
        live = false; // the wire dies while the human is deciding
        return { action: 'accept', content: {} };
      },
    });
    const [out] = await router.dispatchBatch([makeCall('launch', { target: 'moon' }, caller)]);
    expect(out).toMatchObject({ outcome: 'error', code: 'connection_lost' });
    expect(ran.n).toBe(0);
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain('"launch"');
    expect(asked[0]).not.toContain('moon'); // names arguments, never their values
    live = true;
    const again = makeCall('launch', { target: 'moon' }, { ...caller, isLive: () => false, elicit: async () => ({ action: 'accept' }) });
    await expect(router.dispatch(again)).rejects.toMatchObject({ code: 'cancelled' });
    expect(ran.n).toBe(0);
  });

  it('an accept whose connection closed right after (isLive still true) ran the handler: now the liveness ping fails and it does not run', async () => {
    const router = newRouter();
    const ran = { n: 0 };
    router.register([gated(ran)]);
    const pings: number[] = [];
    const caller = session({
      isLive: () => true, // the close has not been read yet
      elicit: async () => ({ action: 'accept', content: {} }),
      ping: async ({ timeoutMs }) => {
        pings.push(timeoutMs);
        throw new Error('Connection closed');
      },
    });
    const [out] = await router.dispatchBatch([makeCall('launch', { target: 'moon' }, caller)]);
    expect(out).toMatchObject({ outcome: 'error', code: 'connection_lost' });
    expect(ran.n).toBe(0);
    expect(pings).toEqual([LIVENESS_PING_TIMEOUT_MS]);
    const answered = session({ elicit: async () => ({ action: 'accept', content: {} }), ping: async () => {} });
    expect(text(await router.dispatch(makeCall('launch', { target: 'moon' }, answered)))).toBe('launched');
    expect(ran.n).toBe(1);
  });

  it('approval given and the connection live: the handler runs once', async () => {
    const router = newRouter();
    const ran = { n: 0 };
    router.register([gated(ran)]);
    const caller = session({ elicit: async () => ({ action: 'accept', content: {} }) });
    expect(text(await router.dispatch(makeCall('launch', { target: 'moon' }, caller)))).toBe('launched');
    expect(ran.n).toBe(1);
  });

  it('declined, or a client that cannot be asked: denied/approval_required, handler unrun', async () => {
    const router = newRouter();
    const ran = { n: 0 };
    router.register([gated(ran)]);
    const [declined] = await router.dispatchBatch([makeCall('launch', { target: 'x' }, session({ elicit: async () => ({ action: 'decline' }) }))]);
    expect(declined).toMatchObject({ outcome: 'denied', code: 'approval_required' });
    const [unaskable] = await router.dispatchBatch([makeCall('launch', { target: 'x' }, session())]);
    expect(unaskable).toMatchObject({ outcome: 'denied', code: 'approval_required' });
    expect((unaskable as { message: string }).message).toMatch(/elicitation/);
    expect(ran.n).toBe(0);
  });
});

describe('ToolRouter: cancellation', () => {
  it('a handler that never settles does not hold the call: dispatch rejects with the abort reason', async () => {
    const router = newRouter();
    router.register([defineFunctionTool({ name: 'hang', description: '', parameters: z.object({}), handler: () => new Promise(() => {}) })]);
    const controller = new AbortController();
    const pending = router.dispatch(makeCall('hang', {}, session(), controller.signal));
    controller.abort(new Error('deadline'));
    await expect(pending).rejects.toThrow('deadline');
  });
});

/** A minimal in-process upstream: serves `catalog.tools` and answers calls through `answer`. */
class StubUpstream extends EventEmitter implements Pick<Upstream, 'name' | 'kind' | 'callTool'> {
  readonly kind = 'stdio' as const;
  readonly secrets = [];
  status = { state: 'ready' as const };
  capabilities = { tools: {} };
  calls: { toolName: string; args: unknown }[] = [];
  catalog: UpstreamCatalog = { tools: [{ name: 'remote', inputSchema: { type: 'object' } }], prompts: [], resources: [], resourceTemplates: [] };
  constructor(readonly name: string) {
    super();
  }
  /** Set: `callTool` fails with it (`sync`: throws before it returns a promise). */
  failure?: { error: unknown; sync?: boolean };
  readonly answer: CallToolResult = { content: [{ type: 'text', text: 'from upstream' }] };
  callTool(toolName: string, args: Record<string, unknown> | undefined, _options: CallOptions): Promise<CallToolResult> {
    this.calls.push({ toolName, args });
    if (this.failure?.sync) throw this.failure.error;
    if (this.failure) return Promise.reject(this.failure.error);
    if (toolName === 'remote') return Promise.resolve(this.answer);
    return Promise.reject(new BrokerError('upstream_unavailable', 'no'));
  }
}

describe('ToolRouter: upstream tools go through the same dispatch point', () => {
  it('a batch mixing a function tool and an upstream tool is claimed and both run; local names are listed first', async () => {
    const registry = new Registry(silentLogger());
    const upstream = new StubUpstream('up');
    registry.add({ upstream: upstream as unknown as Upstream, prefix: 'up' });
    registry.rebuild();
    const router = newRouter(registry);
    router.register([defineFunctionTool({ name: 'local_one', description: '', parameters: z.object({}), handler: () => 'local' })]);
    expect(router.list().map((t) => t.name)).toEqual(['local_one', 'up__remote']);
    const outcomes = await router.dispatchBatch([makeCall('local_one'), makeCall('up__remote', { a: 1 })]);
    expect(outcomes.map((o) => (o.outcome === 'ok' ? text(o.result) : o.outcome))).toEqual(['local', 'from upstream']);
    expect(upstream.calls).toEqual([{ toolName: 'remote', args: { a: 1 } }]);
  });
});

describe("ToolRouter.dispatch: an upstream tool's answer and failures", () => {
  function setup() {
    const registry = new Registry(silentLogger());
    const upstream = new StubUpstream('up');
    registry.add({ upstream: upstream as unknown as Upstream, prefix: 'up' });
    registry.rebuild();
    return { upstream, router: newRouter(registry) };
  }
  const denial = () => new ToolDeniedError('the upstream says no');

  it('answers with the upstream\'s result object as it came', async () => {
    const { upstream, router } = setup();
    await expect(router.dispatch(makeCall('up__remote'))).resolves.toBe(upstream.answer);
  });

  it.each([false, true])('an upstream ToolDeniedError is a denied BrokerError with its message (thrown at once: %s)', async (sync) => {
    const { upstream, router } = setup();
    upstream.failure = { error: denial(), sync };
    const answer = router.dispatch(makeCall('up__remote'));
    await expect(answer).rejects.toBeInstanceOf(BrokerError);
    await expect(answer).rejects.toMatchObject({ code: 'denied', message: 'the upstream says no' });
  });

  it('a call already aborted keeps the denial as it came (the deadline stage names the outcome)', async () => {
    const { upstream, router } = setup();
    const error = denial();
    upstream.failure = { error };
    const controller = new AbortController();
    controller.abort(new Error('deadline'));
    await expect(router.dispatch(makeCall('up__remote', {}, session(), controller.signal))).rejects.toBe(error);
  });

  it.each([false, true])('any other failure is rejected as it is, the same object (thrown at once: %s)', async (sync) => {
    const { upstream, router } = setup();
    const error = new Error('HTTP 503');
    upstream.failure = { error, sync };
    await expect(router.dispatch(makeCall('up__remote'))).rejects.toBe(error);
  });

  it('an upstream whose callTool gives back a bare result (not a promise) is answered with it, as await would', async () => {
    const { upstream, router } = setup();
    (upstream as { callTool: unknown }).callTool = () => upstream.answer;
    let answer: Promise<CallToolResult> | undefined;
    expect(() => (answer = router.dispatch(makeCall('up__remote')))).not.toThrow();
    await expect(answer).resolves.toBe(upstream.answer);
  });

  it('a failure whose message cannot be read rejects with the error reading it raised', async () => {
    const { upstream, router } = setup();
    upstream.failure = { error: Object.create(null) };
    await expect(router.dispatch(makeCall('up__remote'))).rejects.toBeInstanceOf(TypeError);
  });

  it('a rejection with nothing is an upstream_error', async () => {
    const { upstream, router } = setup();
    upstream.failure = { error: undefined };
    await expect(router.dispatch(makeCall('up__remote'))).rejects.toMatchObject({ code: 'upstream_error' });
  });

  it('a target naming an upstream that is gone is a rejection (upstream_unavailable), not a throw; an unknown name is denied', async () => {
    const { router } = setup();
    const gone = makeCall('gone__x');
    gone.target = { source: 'upstream', name: 'gone__x', server: 'gone', toolName: 'x' } as BrokerCall['target'];
    let answer: Promise<CallToolResult> | undefined;
    expect(() => (answer = router.dispatch(gone))).not.toThrow();
    await expect(answer).rejects.toMatchObject({ code: 'upstream_unavailable' });
    await expect(router.dispatch(makeCall('nobody'))).rejects.toMatchObject({ code: 'denied', message: expect.stringContaining('no tool named "nobody"') });
  });
});

describe('ToolRouter + invoke stage: router outcomes become broker outcomes', () => {
  const router = newRouter();
  router.register([
    defineFunctionTool({ name: 'ok_tool', description: '', parameters: z.object({}), handler: () => 'fine' }),
    defineFunctionTool({ name: 'throws', description: '', parameters: z.object({}), handler: () => { throw new Error('own failure'); } }),
    defineFunctionTool({ name: 'denies', description: '', parameters: z.object({}), handler: () => { throw new ToolDeniedError('no'); } }),
    defineFunctionTool({ name: 'strict', description: '', parameters: z.object({ n: z.number() }), handler: () => 1 }),
    defineFunctionTool({ name: 'escapes', description: '', parameters: z.object({}), handler: () => { throw new BrokerError('estate_scope_escape', 'outside'); } }),
    defineFunctionTool({ name: 'gated', description: '', parameters: z.object({}), requireApproval: true, handler: () => 1 }),
  ]);
  const broker = new Broker([invokeStage({ router })], new ManualClock());
  const call = (name: string, args: Record<string, unknown> = {}) =>
    broker.call({ name, args, signal: new AbortController().signal }, session(), router.resolve(name));

  it.each([
    ['ok_tool', {}, 'ok'],
    ['throws', {}, 'tool_error'],
    ['denies', {}, 'denied'],
    ['strict', { n: 'x' }, 'invalid_arguments'],
    ['escapes', {}, 'guard_error'],
    ['gated', {}, 'approval_required'],
  ])('%s → %s', async (name, args, outcome) => {
    const answer = await call(name, args as Record<string, unknown>);
    expect(answer.outcome).toBe(outcome);
  });

  it('a function tool that throws keeps its message in the tool_error body', async () => {
    const answer = await call('throws');
    expect(answer.result.isError).toBe(true);
    expect(text(answer.result as CallToolResult)).toBe('own failure');
  });
});

describe('ToolRouter + deadline stage', () => {
  it('a function tool that outlives its deadline is answered timeout (not tool_error) and the call does not wait for it', async () => {
    const clock = new ManualClock();
    const router = new ToolRouter(new Registry(silentLogger()), clock);
    router.register([defineFunctionTool({ name: 'hang', description: '', parameters: z.object({}), handler: () => new Promise(() => {}) })]);
    const broker = new Broker(
      [deadlineStage({ clock, timeoutFor: () => 1_000, extendOnProgress: false, maxTotalTimeoutMs: 10_000 }), invokeStage({ router })],
      clock,
    );
    const pending = broker.call({ name: 'hang', args: {}, signal: new AbortController().signal }, session(), router.resolve('hang'));
    await clock.advance(1_000);
    const answer = await pending;
    expect(answer.outcome).toBe('timeout');
  });
});
