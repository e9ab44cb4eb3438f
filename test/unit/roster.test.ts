import { EventEmitter } from 'node:events';
import type { Tool } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { silentLogger } from '../../src/shared/logger.js';
import { Registry } from '../../src/upstream/registry.js';
import { Roster, toolHash, type RosterSource } from '../../src/upstream/roster.js';
import type { CatalogKind, Upstream, UpstreamCatalog, UpstreamEvents, UpstreamStatus } from '../../src/upstream/types.js';

const tool = (name: string, extra: Partial<Tool> = {}): Tool => ({ name, inputSchema: { type: 'object' }, ...extra });
const source = (server: string, tools: Tool[], more: Partial<RosterSource> = {}): RosterSource => ({
  server,
  prefix: server,
  tools,
  prompts: [],
  resources: [],
  resourceTemplates: [],
  ...more,
});

describe('Roster.build', () => {
  it('merges every upstream under <prefix>__<name>, routing by table to the original name', () => {
    const roster = Roster.build([
      source('fs', [tool('read_file'), tool('write.file')]),
      source('mem', [tool('read_file')]),
      source('bare', [tool('lonely')], { prefix: '' }),
    ]);
    expect([...roster.tools.keys()]).toEqual(['fs__read_file', 'fs__write_file', 'mem__read_file', 'lonely']);
    expect(roster.tools.get('fs__write_file')).toMatchObject({ server: 'fs', toolName: 'write.file' });
    expect(roster.tools.get('lonely')).toMatchObject({ server: 'bare', toolName: 'lonely' });
    expect(roster.tools.get('fs__write_file')!.definition.name).toBe('fs__write_file');
    expect(roster.collisions).toEqual([]);
  });

  it('F15: schemas, annotations and other fields pass through unchanged', () => {
    const inputSchema = {
      type: 'object' as const,
      properties: { item: { $ref: '#/definitions/Item' } },
      definitions: { Item: { type: 'string' } },
    };
    const outputSchema = { type: 'object' as const, properties: { t: { anyOf: [{ $ref: '#/$defs/T' }, { type: 'null' }] } }, $defs: { T: { type: 'number' } } };
    const original = tool('t', { inputSchema, outputSchema, annotations: { readOnlyHint: true }, title: 'T', _meta: { k: 1 } });
    const snapshot = structuredClone(original);
    const def = Roster.build([source('s', [original])]).tools.get('s__t')!.definition;
    expect(def).toStrictEqual({ ...snapshot, name: 's__t' });
    expect(original).toStrictEqual(snapshot);
  });

  it('F13: a later tool that would take an existing name is withheld and reported, the first keeps it', () => {
    const roster = Roster.build([source('a', [tool('x.y')]), source('a2', [tool('z')], { prefix: 'a' }), source('a3', [tool('x_y')], { prefix: 'a' })]);
    expect(roster.tools.get('a__x_y')).toMatchObject({ server: 'a', toolName: 'x.y' });
    expect(roster.tools.get('a__z')).toMatchObject({ server: 'a2' });
    expect(roster.collisions).toEqual([{ kind: 'tool', name: 'a__x_y', kept: 'a/x.y', withheld: 'a3/x_y' }]);
  });

  it('F14: tools (and prompts) of one upstream that sanitise to one name each get their own, whatever the order, and none keeps the shared one (the second was withheld, and exit 2 at start)', () => {
    const names = ['a.b', 'a/b', 'a_b', 'c.d', 'c d'];
    const built = (order: string[]) => Roster.build([source('s', order.map((n) => tool(n)), { prompts: order.map((name) => ({ name })) })]);
    const roster = built(names);
    expect(roster.collisions).toEqual([]);
    const routed = new Map([...roster.tools.values()].map((t) => [t.toolName, t.name]));
    expect(routed.size).toBe(names.length);
    expect(new Set(routed.values()).size).toBe(names.length);
    for (const n of routed.values()) expect(n).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    // Each of a group that would share a name gets its hash suffix, "a_b" (which needed no change) too: none keeps the shared name.
    for (const original of ['a.b', 'a/b', 'a_b']) expect(routed.get(original)).toMatch(/^s__a_b_[0-9a-f]{8}$/);
    for (const original of ['c.d', 'c d']) expect(routed.get(original)).toMatch(/^s__c_d_[0-9a-f]{8}$/);
    expect(roster.tools.has('s__a_b')).toBe(false);
    for (const [original, name] of routed) expect(roster.tools.get(name)).toMatchObject({ server: 's', toolName: original, definition: { name } });
    expect([...roster.prompts.values()].map((p) => [p.promptName, p.name])).toEqual([...routed]);
    // Deterministic: the listing order changes no name.
    const reversed = built([...names].reverse());
    expect(new Map([...reversed.tools.values()].map((t) => [t.toolName, t.name]))).toEqual(routed);
  });

  it('disabled tools are not listed but known, so the judge can refuse them', () => {
    const roster = Roster.build([source('s', [tool('keep'), tool('hide')], { isDisabled: (t: string) => t === 'hide' })]);
    expect([...roster.tools.keys()]).toEqual(['s__keep']);
    expect(roster.disabled.get('s__hide')).toEqual({ server: 's', toolName: 'hide' });
  });

  it('merges prompts (prefixed, collisions reported), resources (first URI wins, not rewritten) and templates', () => {
    const roster = Roster.build([
      source('a', [], {
        prompts: [{ name: 'greet' }],
        resources: [{ uri: 'file:///x', name: 'x' }],
        resourceTemplates: [{ uriTemplate: 'a://{id}', name: 'ta' }],
      }),
      source('b', [], {
        prompts: [{ name: 'greet' }],
        resources: [{ uri: 'file:///x', name: 'x from b' }, { uri: 'b://y', name: 'y' }],
        resourceTemplates: [{ uriTemplate: 'b://{id}', name: 'tb' }],
      }),
    ]);
    expect([...roster.prompts.keys()]).toEqual(['a__greet', 'b__greet']);
    expect(roster.prompts.get('b__greet')).toMatchObject({ server: 'b', promptName: 'greet', definition: { name: 'b__greet' } });
    expect(roster.resources.get('file:///x')).toMatchObject({ server: 'a', resource: { name: 'x' } });
    expect(roster.resources.get('b://y')!.server).toBe('b');
    expect(roster.resourceTemplates.map((t) => [t.server, t.template.uriTemplate])).toEqual([
      ['a', 'a://{id}'],
      ['b', 'b://{id}'],
    ]);
  });
});

describe('Roster resource routing', () => {
  const res = (server: string, uris: string[], templates: string[], resourcePriority?: number) =>
    source(server, [], {
      resources: uris.map((uri) => ({ uri, name: `${server} ${uri}` })),
      resourceTemplates: templates.map((uriTemplate) => ({ uriTemplate, name: `${server} ${uriTemplate}` })),
      ...(resourcePriority === undefined ? {} : { resourcePriority }),
    });

  it('routes URIs of every RFC 6570 form to the server whose template they expand', () => {
    const roster = Roster.build([
      res('other', [], ['r://{x}']),
      res('t', [], ['r://search{?q,limit}', 'r://files{/path*}', 'r://doc{#frag}', 'r://file{.ext}', 'r://m{;p}']),
    ]);
    for (const uri of ['r://search', 'r://search?limit=3', 'r://files/a/b', 'r://doc#a/b', 'r://file', 'r://file.tar.gz', 'r://m', 'r://m;p=1']) {
      expect(roster.resourceServer(uri), uri).toBe('t');
    }
    expect(roster.resourceServer('r://search?limit=3&q=x')).toBeUndefined();
  });

  it('one URI or template from two servers: the higher resourcePriority keeps it, else config order; the clash is reported', () => {
    const byOrder = Roster.build([res('a', ['s://doc'], ['s://{id}']), res('b', ['s://doc'], ['s://{id}'])]);
    expect(byOrder.resources.get('s://doc')!.server).toBe('a');
    expect(byOrder.resourceTemplates.map((t) => t.server)).toEqual(['a']);
    expect(byOrder.resourceServer('s://7')).toBe('a');
    expect(byOrder.templateServer('s://{id}')).toBe('a');
    expect(byOrder.resourceClashes).toEqual([
      { kind: 'resource', uri: 's://doc', kept: 'a', withheld: 'b' },
      { kind: 'resourceTemplate', uri: 's://{id}', kept: 'a', withheld: 'b' },
    ]);
    const byPriority = Roster.build([res('a', ['s://doc'], ['s://{id}']), res('b', ['s://doc'], ['s://{id}'], 5)]);
    expect(byPriority.resources.get('s://doc')!.server).toBe('b');
    expect(byPriority.templateServer('s://{id}')).toBe('b');
    expect(byPriority.resourceServer('s://7')).toBe('b');
    expect(byPriority.resourceClashes.map((c) => [c.kept, c.withheld])).toEqual([
      ['b', 'a'],
      ['b', 'a'],
    ]);
  });

  it('overlapping templates: priority, then the more specific, then config order; a listed URI before any template', () => {
    const roster = Roster.build([res('a', [], ['s://item/{id}', 's://{+any}']), res('b', ['s://item/listed'], ['s://item/b-{id}', 's://{+all}'])]);
    expect(roster.resourceServer('s://item/b-7')).toBe('b');
    expect(roster.resourceServer('s://item/c-7')).toBe('a');
    expect(roster.resourceServer('s://item/listed')).toBe('b');
    expect(roster.resourceServer('s://x/y')).toBe('a');
    expect(Roster.build([res('a', [], ['s://item/b-{id}']), res('b', [], ['s://{+all}'], 1)]).resourceServer('s://item/b-7')).toBe('b');
  });

  it('completion routes by the template string, even one that is no valid template', () => {
    const roster = Roster.build([res('a', [], ['s://{id}']), res('b', [], ['s://files{/path*}', 'bad{'])]);
    expect(roster.templateServer('s://files{/path*}')).toBe('b');
    expect(roster.templateServer('bad{')).toBe('b');
    expect(roster.resourceServer('bad{')).toBeUndefined();
    expect(roster.templateServer('s://nothing{x}')).toBeUndefined();
  });
});

describe('toolHash', () => {
  it('ignores key order, changes with the description or a schema', () => {
    const a = tool('t', { description: 'd', inputSchema: { type: 'object', properties: { x: { type: 'string' }, y: { type: 'number' } } } });
    const b = { inputSchema: { properties: { y: { type: 'number' }, x: { type: 'string' } }, type: 'object' as const }, description: 'd', name: 't' };
    expect(toolHash(a)).toBe(toolHash(b));
    expect(toolHash({ ...a, description: 'other' })).not.toBe(toolHash(a));
    expect(toolHash({ ...a, inputSchema: { type: 'object' } })).not.toBe(toolHash(a));
    expect(toolHash(a)).toMatch(/^[0-9a-f]{64}$/);
  });
});

/** A stand-in upstream for the registry: only its catalog and events matter to it. */
class StaticUpstream extends EventEmitter<UpstreamEvents> {
  readonly kind = 'stdio' as const;
  readonly secrets: string[] = [];
  status: UpstreamStatus = { state: 'ready' };
  capabilities = undefined;
  constructor(
    readonly name: string,
    public catalog: UpstreamCatalog,
  ) {
    super();
  }
  set(kind: CatalogKind, items: unknown[]) {
    (this.catalog as unknown as Record<string, unknown[]>)[kind] = items;
    this.emit('changed', kind);
  }
}
const catalog = (tools: Tool[]): UpstreamCatalog => ({ tools, prompts: [], resources: [], resourceTemplates: [] });

describe('Registry', () => {
  function setup() {
    const registry = new Registry(silentLogger());
    const a = new StaticUpstream('a', catalog([tool('one'), tool('off')]));
    const b = new StaticUpstream('b', catalog([tool('two')]));
    registry.add({ upstream: a as unknown as Upstream, prefix: 'a', isDisabled: (t: string) => t === 'off' });
    registry.add({ upstream: b as unknown as Upstream, prefix: 'b' });
    registry.rebuild();
    const events: string[] = [];
    registry.on('listChanged', (k) => events.push(k));
    return { registry, a, b, events };
  }

  it('resolves active, disabled, gone and unknown names', async () => {
    const { registry, a } = setup();
    expect(registry.resolveTool('a__one')).toMatchObject({ state: 'active', server: 'a', toolName: 'one' });
    expect(registry.resolveTool('a__off')).toMatchObject({ state: 'disabled', server: 'a', toolName: 'off' });
    expect(registry.resolveTool('zz__nothing')).toBeUndefined();
    a.set('tools', []);
    await Promise.resolve();
    expect(registry.resolveTool('a__one')).toMatchObject({ state: 'gone', server: 'a', toolName: 'one' });
    expect(registry.resolveTool('b__two')!.state).toBe('active');
  });

  it('issue 18: a tool of an upstream that is not running is `down` with the reason (a name seen before, or its prefix), not unknown', async () => {
    const registry = new Registry(silentLogger());
    const a = new StaticUpstream('a', catalog([tool('one')]));
    const never = new StaticUpstream('never', catalog([]));
    never.status = { state: 'backoff', errorCode: 'exited', message: "exited with code 1 before it was ready: Error: Cannot find module '/home/me/srv/missing-file.js'" };
    const custom = new StaticUpstream('custom', catalog([]));
    custom.status = { state: 'failed', errorCode: 'spawn_failed', message: 'cannot start "nope": command not found' };
    const bare = new StaticUpstream('bare', catalog([]));
    bare.status = { state: 'failed', errorCode: 'spawn_failed', message: 'cannot start "x": command not found' };
    registry.add({ upstream: a as unknown as Upstream, prefix: 'a' });
    registry.add({ upstream: never as unknown as Upstream, prefix: 'never' });
    registry.add({ upstream: custom as unknown as Upstream, prefix: 'cx' });
    registry.add({ upstream: bare as unknown as Upstream, prefix: '' });
    registry.rebuild();
    expect(registry.resolveTool('never__anything')).toEqual({
      state: 'down',
      server: 'never',
      toolName: 'anything',
      reason: "upstream \"never\" is not running: exited with code 1 before it was ready: Error: Cannot find module '…/missing-file.js'; a restart is scheduled",
    });
    // A per-server prefix is what counts, not the key.
    expect(registry.resolveTool('cx__t')).toMatchObject({ state: 'down', server: 'custom', toolName: 't', reason: 'upstream "custom" is not running: cannot start "nope": command not found' });
    expect(registry.resolveTool('custom__t')).toBeUndefined();
    // Bare names cannot be attributed: unknown, with a hint naming the bare-name upstreams down.
    expect(registry.resolveTool('whatever')).toBeUndefined();
    expect(registry.unknownToolHint()).toBe(' (not running now, so not listed: upstream "bare")');
    // A name seen before whose upstream crashed is down too; once it runs again without the tool, gone.
    a.status = { state: 'connecting', errorCode: 'exited', message: 'connection lost: exited with code 17' };
    a.set('tools', []);
    await Promise.resolve();
    expect(registry.resolveTool('a__one')).toMatchObject({ state: 'down', reason: 'upstream "a" is not running: it is starting; the last attempt failed: connection lost: exited with code 17' });
    a.status = { state: 'ready' };
    expect(registry.resolveTool('a__one')).toMatchObject({ state: 'gone' });
    expect(registry.resolveTool('a__never_seen')).toBeUndefined();
  });

  it('F12: a withdrawn catalog and its return each rebuild the roster and emit one list_changed per burst', async () => {
    const { registry, a, b, events } = setup();
    a.set('tools', []);
    b.set('tools', [tool('two'), tool('three')]);
    a.set('prompts', [{ name: 'p' }]);
    await Promise.resolve();
    expect(events.sort()).toEqual(['prompts', 'tools']);
    expect([...registry.roster.tools.keys()]).toEqual(['b__two', 'b__three']);
    events.length = 0;
    a.set('tools', [tool('one')]);
    a.set('resourceTemplates', []);
    await Promise.resolve();
    expect(events.sort()).toEqual(['resources', 'tools']);
    expect(registry.resolveTool('a__one')!.state).toBe('active');
  });

  it('logs a resource clash once while it lasts, naming both servers, and again when it comes back', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'warn' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const registry = new Registry(logger);
    const both = (): UpstreamCatalog => ({ tools: [], prompts: [], resources: [{ uri: 's://doc', name: 'doc' }], resourceTemplates: [] });
    const a = new StaticUpstream('a', both());
    const b = new StaticUpstream('b', both());
    registry.add({ upstream: a as unknown as Upstream, prefix: 'a' });
    registry.add({ upstream: b as unknown as Upstream, prefix: 'b', resourcePriority: 2 });
    registry.rebuild();
    registry.rebuild();
    a.set('tools', [tool('t')]);
    await Promise.resolve();
    const clashes = () => lines.filter((l) => String(l.msg).includes('two upstreams serve one resource'));
    expect(clashes()).toHaveLength(1);
    expect(clashes()[0]).toMatchObject({ level: 40, uri: 's://doc', kept: 'b', withheld: 'a' });
    b.set('resources', []);
    await Promise.resolve();
    b.set('resources', [{ uri: 's://doc', name: 'doc' }]);
    await Promise.resolve();
    expect(clashes()).toHaveLength(2);
  });

  it('drops resources/updated for a URI another upstream serves', () => {
    const registry = new Registry(silentLogger());
    const listing = (): UpstreamCatalog => ({ tools: [], prompts: [], resources: [{ uri: 's://doc', name: 'doc' }], resourceTemplates: [] });
    const a = new StaticUpstream('a', listing());
    const b = new StaticUpstream('b', listing());
    registry.add({ upstream: a as unknown as Upstream, prefix: 'a' });
    registry.add({ upstream: b as unknown as Upstream, prefix: 'b' });
    registry.rebuild();
    const seen: string[] = [];
    registry.on('resourceUpdated', (uri, server) => seen.push(`${server} ${uri}`));
    b.emit('resourceUpdated', 's://doc');
    a.emit('resourceUpdated', 's://doc');
    b.emit('resourceUpdated', 's://unlisted');
    expect(seen).toEqual(['a s://doc', 'b s://unlisted']);
  });

  it('forwards resource updates and logs with the upstream name', () => {
    const { registry, a } = setup();
    const seen: unknown[] = [];
    registry.on('resourceUpdated', (uri, server) => seen.push([uri, server]));
    registry.on('log', (p, server) => seen.push([p.data, server]));
    a.emit('resourceUpdated', 'fixture://a');
    a.emit('log', { level: 'info', data: 'x' }, undefined);
    expect(seen).toEqual([
      ['fixture://a', 'a'],
      ['x', 'a'],
    ]);
  });
});
