/**
 * All upstreams and the roster built from them. Rebuilds the roster whenever an upstream's
 * catalog changes and emits `listChanged` with what changed, so every downstream session gets
 * `notifications/{tools,prompts,resources}/list_changed` (cases F01, F12).
 *
 * Two upstreams listing one resource URI or template string: the one with the higher
 * `resourcePriority` (equal: the earlier in config order) serves it, the other's copy is withheld,
 * and a warning naming both is logged once while the clash lasts. An upstream's
 * `resources/updated` for a URI another upstream serves is dropped.
 *
 * Tool states for the judge: a name in the roster is `active`; one configured `disabled` (or of
 * an upstream configured `disabled`) is `disabled`; a name of an upstream that is not running
 * (failed to start, crashed, restarting) is `down`, with the reason: a name seen before, or one
 * that starts with `<prefix>__` of exactly one configured upstream, since a server that never
 * connected has no tool list to check against; one seen before whose upstream is running but not
 * serving it now is `gone`; anything else is unknown (a JSON-RPC error, not a call). Names of
 * bare-name upstreams (`prefix: false`) cannot be attributed: unknown, with
 * {@link Registry.unknownToolHint} naming the ones not running.
 *
 * The registry is where upstream data turns toward downstream clients, so it scrubs it
 * ({@link UpstreamScrub}): catalogs as the roster is built, log messages as they are relayed,
 * and the replies and failures of {@link Registry.request}.
 */
import { EventEmitter } from 'node:events';
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/client';
import type { Logger } from '../shared/logger.js';
import { joinLines } from '../shared/errors.js';
import { Scrubber } from '../shared/scrub.js';
import { Roster, type RosterTool } from './roster.js';
import { withoutHostPaths } from './stderr-line.js';
import type { CatalogKind, RequestOptions, Upstream } from './types.js';
import { UpstreamScrub } from './upstream-scrub.js';

export type ToolState = 'active' | 'disabled' | 'gone' | 'down';

/** A tool the registry can say something about. */
export interface ResolvedTool {
  readonly state: ToolState;
  readonly server: string;
  readonly toolName: string;
  /** Present when `active`. */
  readonly tool?: RosterTool;
  /**
   * Why it cannot be called, one line, scrubbed and without host paths: present when `down`
   * (`upstream "x" is not running: <why>`) and for a `disabled` upstream.
   */
  readonly reason?: string;
}

export type ListKind = 'tools' | 'prompts' | 'resources';

export interface RegistryEvents {
  listChanged: [kind: ListKind];
  resourceUpdated: [uri: string, server: string];
  /** An upstream log message; `owner` as in `UpstreamEvents.log`. */
  log: [params: { level: string; logger?: string; data?: unknown }, server: string, owner: string | undefined];
}

export interface RegistryEntry {
  readonly upstream: Upstream;
  readonly prefix: string;
  /** Whether a tool (its own name, its advertised name) is configured `disabled`; default none. */
  readonly isDisabled?: (toolName: string, advertised: string) => boolean;
  /** `mcpServers.<key>.resourcePriority`; default 0. */
  readonly resourcePriority?: number;
}

export class Registry extends EventEmitter<RegistryEvents> {
  private readonly entries = new Map<string, RegistryEntry>();
  private current = new Roster();
  /** Every advertised tool name ever served, so a vanished one reads `gone`, not unknown. */
  private readonly seen = new Map<string, { server: string; toolName: string }>();
  private pending = new Set<ListKind>();
  /** Resource clashes of the current roster, already logged (`kind uri kept withheld`). */
  private loggedClashes = new Set<string>();
  private scheduled = false;

  /** Scrubs what upstreams send toward clients (lists, logs, replies). */
  readonly scrub: UpstreamScrub;

  /** @param scrubber the gateway's one scrubber; default one that knows no exact secrets (patterns only). */
  constructor(
    private readonly logger: Logger,
    scrubber: Scrubber = new Scrubber(),
  ) {
    super();
    this.scrub = new UpstreamScrub(scrubber);
  }

  /**
   * Adds an upstream (in config order). An entry of the same name is replaced in its place (a
   * config reload changed that server); the old upstream is the caller's to close.
   */
  add(entry: RegistryEntry): void {
    this.entries.set(entry.upstream.name, entry);
    entry.upstream.on('changed', (kind) => this.onChanged(kind));
    entry.upstream.on('resourceUpdated', (uri) => {
      const server = this.current.resourceServer(uri);
      if (server === undefined || server === entry.upstream.name) this.emit('resourceUpdated', uri, entry.upstream.name);
    });
    entry.upstream.on('log', (params, owner) => this.emit('log', this.scrub.log(params), entry.upstream.name, owner));
  }

  /** Forgets an upstream (a config reload removed it); the caller closes it. Rebuild to drop its tools. */
  remove(name: string): RegistryEntry | undefined {
    const entry = this.entries.get(name);
    this.entries.delete(name);
    return entry;
  }

  get upstreams(): Upstream[] {
    return [...this.entries.values()].map((e) => e.upstream);
  }

  upstream(name: string): Upstream | undefined {
    return this.entries.get(name)?.upstream;
  }

  /** Advertised-name prefix of a server (`''` for bare names); undefined for one not configured. */
  prefixOf(name: string): string | undefined {
    return this.entries.get(name)?.prefix;
  }

  get roster(): Roster {
    return this.current;
  }

  /** Rebuilds the roster now; returns it. Logs every collision (the tool is withheld). */
  rebuild(): Roster {
    const roster = Roster.build(
      [...this.entries.values()].map(({ upstream, prefix, isDisabled, resourcePriority }) => ({
        server: upstream.name,
        prefix,
        isDisabled,
        resourcePriority,
        ...this.scrub.catalog(upstream.catalog),
      })),
    );
    for (const c of roster.collisions) {
      this.logger.error({ name: c.name, kept: c.kept, withheld: c.withheld }, `two upstream ${c.kind}s share one advertised name; the second is withheld`);
    }
    const clashes = new Set<string>();
    for (const c of roster.resourceClashes) {
      const key = `${c.kind} ${c.uri} ${c.kept} ${c.withheld}`;
      clashes.add(key);
      if (this.loggedClashes.has(key)) continue;
      this.logger.warn(
        { [c.kind === 'resource' ? 'uri' : 'uriTemplate']: c.uri, kept: c.kept, withheld: c.withheld },
        `two upstreams serve one resource ${c.kind === 'resource' ? 'URI' : 'template'}; "${c.kept}" serves it, "${c.withheld}" is withheld (set "resourcePriority" to choose)`,
      );
    }
    this.loggedClashes = clashes;
    for (const [name, t] of roster.tools) this.seen.set(name, { server: t.server, toolName: t.toolName });
    this.current = roster;
    return roster;
  }

  /**
   * A request other than `tools/call` to upstream `server` on behalf of a downstream client
   * (`prompts/get`, `resources/read`, `completion/complete`): resolves with the reply scrubbed
   * ({@link UpstreamScrub.reply}); rejects with a `ProtocolError` whose message and data are
   * scrubbed ({@link UpstreamScrub.error}), -32602 when there is no such upstream.
   */
  async request(
    server: string,
    method: string,
    params: Record<string, unknown> | undefined,
    options: RequestOptions,
  ): Promise<Record<string, unknown>> {
    const upstream = this.upstream(server);
    if (!upstream) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `no upstream "${this.scrub.scrubber.text(server)}"`);
    let reply: Record<string, unknown>;
    try {
      reply = await upstream.request(method, params, options);
    } catch (err) {
      throw this.scrub.error(err, server);
    }
    return this.scrub.reply(reply);
  }

  /** What the judge needs to know about an advertised tool name; undefined = never heard of it. */
  resolveTool(name: string): ResolvedTool | undefined {
    const tool = this.current.tools.get(name);
    if (tool) return { state: 'active', server: tool.server, toolName: tool.toolName, tool };
    const disabled = this.current.disabled.get(name);
    if (disabled) return { state: 'disabled', ...disabled };
    const seen = this.seen.get(name);
    if (seen) return this.notRunning(seen.server, seen.toolName) ?? { state: 'gone', ...seen };
    const owners = [...this.entries.values()].filter((e) => e.prefix !== '' && name.length > e.prefix.length + 2 && name.startsWith(`${e.prefix}__`));
    if (owners.length !== 1) return undefined;
    const owner = owners[0]!;
    return this.notRunning(owner.upstream.name, name.slice(owner.prefix.length + 2));
  }

  /**
   * For the JSON-RPC error of an unknown name: the bare-name upstreams (`prefix: false`) that are
   * not running, whose tools the name may belong to (`` (not running now: "a", "b") ``); `''` when none.
   */
  unknownToolHint(): string {
    const down = [...this.entries.values()].filter((e) => e.prefix === '' && e.upstream.status.state !== 'ready').map((e) => JSON.stringify(e.upstream.name));
    return down.length ? ` (not running now, so not listed: upstream${down.length > 1 ? 's' : ''} ${down.join(', ')})` : '';
  }

  /** `down` (or `disabled`) for `server`'s tool `toolName` when that upstream is not running; undefined when it is. */
  private notRunning(server: string, toolName: string): ResolvedTool | undefined {
    const status = this.entries.get(server)?.upstream.status;
    if (!status || status.state === 'ready') return undefined;
    if (status.state === 'disabled') return { state: 'disabled', server, toolName, reason: `upstream "${server}" is disabled by configuration` };
    const why = status.message ? joinLines(withoutHostPaths(this.scrub.scrubber.text(status.message))) : undefined;
    const what =
      status.state === 'connecting'
        ? `it is starting${why ? `; the last attempt failed: ${why}` : ''}`
        : status.state === 'idle' || status.state === 'closed'
          ? `it is ${status.state === 'idle' ? 'not started' : 'closed'}`
          : `${why ?? status.state}${status.state === 'backoff' ? '; a restart is scheduled' : ''}`;
    return { state: 'down', server, toolName, reason: `upstream "${server}" is not running: ${what}` };
  }

  /**
   * Makes list `kind` of every upstream fresh by its cache hints before it is served
   * (`Upstream.freshen`: a modern upstream past its `ttlMs`), and the roster rebuilt from what
   * came back. Never throws: an upstream whose fetch fails keeps serving its stale list.
   */
  async freshen(kind: CatalogKind): Promise<void> {
    const fetches = this.upstreams.flatMap((u) => (u.freshen ? [u.freshen(kind)] : []));
    if (!fetches.length) return;
    await Promise.all(fetches);
    this.flush();
  }

  private onChanged(kind: CatalogKind): void {
    this.pending.add(kind === 'resourceTemplates' ? 'resources' : kind);
    if (this.scheduled) return;
    this.scheduled = true;
    // Coalesce the burst a dial or a crash produces into one rebuild and one notification per list.
    queueMicrotask(() => this.flush());
  }

  /** Rebuilds the roster for the changes noted so far and tells of each list; nothing when none is pending. */
  private flush(): void {
    this.scheduled = false;
    if (!this.pending.size) return;
    const kinds = this.pending;
    this.pending = new Set();
    this.rebuild();
    for (const k of kinds) this.emit('listChanged', k);
  }
}
