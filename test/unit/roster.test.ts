import { EventEmitter } from 'node:events';
import type { Tool } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
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
    registry.add({ upstream: a as unknown as Upstream, prefix: 'a', disabledTools: new Set() });
    registry.add({ upstream: never as unknown as Upstream, prefix: 'never', disabledTools: new Set() });
    registry.add({ upstream: custom as unknown as Upstream, prefix: 'cx', disabledTools: new Set() });
    registry.add({ upstream: bare as unknown as Upstream, prefix: '', disabledTools: new Set() });
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

  it('forwards resource updates and logs with the upstream name', () => {
    const { registry, a } = setup();
    const seen: unknown[] = [];
    registry.on('resourceUpdated', (uri, server) => seen.push([uri, server]));
    registry.on('log', (p, server) => seen.push([p.data, server]));
    a.emit('resourceUpdated', 'fixture://a');
    a.emit('log', { level: 'info', data: 'x' });
    expect(seen).toEqual([
      ['fixture://a', 'a'],
      ['x', 'a'],
    ]);
  });
});
