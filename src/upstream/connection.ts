/**
 * One MCP upstream over stdio, Streamable HTTP or SSE: dial, list, serve calls, watch for
 * crashes and restart with capped exponential backoff (cases F08, F10, F12).
 *
 * - A dial is complete only when every catalog list it declared has been fetched with
 *   pagination followed; a failing `tools/list` fails the dial and it is retried, never left
 *   "connected with zero tools" (F12).
 * - A crash rejects every in-flight request at once (the SDK rejects pending requests with
 *   `SdkError` `ConnectionClosed` when the transport closes; F08), withdraws the catalog (`changed`), and schedules a
 *   restart after `initialDelayMs · 2^n` (jittered, capped at `maxDelayMs`).
 * - Progress uses the broker's own token per call, so no progress event is lost to the SDK's
 *   response/notification ordering, and each update reaches exactly the call it belongs to (F02).
 * - Timeouts are always explicit (F18): the SDK's 60 s default never applies.
 */
import { EventEmitter } from 'node:events';
import { Client } from '@modelcontextprotocol/client';
import type { Transport, CallToolResult, ClientCapabilities, ServerCapabilities } from '@modelcontextprotocol/client';
import { z } from 'zod';
import type { HttpServerConfig, SseServerConfig, StdioServerConfig } from '../config/schema.js';
import { BrokerError, messageOf } from '../shared/errors.js';
import { credentialValues } from '../shared/scrub.js';
import type { Clock } from '../shared/clock.js';
import type { Logger } from '../shared/logger.js';
import { ChildProcessTransport } from './child-transport.js';
import { DirectCalls } from './direct-calls.js';
import { createUpstreamTransport, dialFailure } from './upstream-transport.js';
import type {
  CallOptions,
  CatalogKind,
  ServerRequestHandler,
  Upstream,
  UpstreamCatalog,
  UpstreamEvents,
  UpstreamStatus,
} from './types.js';

/** Results pass through untouched: no schema copy of large payloads on the hot path. */
const AnyObject = z.custom<Record<string, unknown>>((v) => typeof v === 'object' && v !== null);

/** Most pages followed for one list, so a looping cursor cannot hang a dial. */
const MAX_PAGES = 1000;
/** A connection that stayed ready this long resets its restart backoff, in ms. */
const STABLE_AFTER_MS = 10_000;
/** Headroom given to the SDK's own timer beyond ours, so our deadline always fires first, in ms. */
const SDK_TIMEOUT_HEADROOM_MS = 5_000;

export interface McpUpstreamOptions {
  name: string;
  config: StdioServerConfig | HttpServerConfig | SseServerConfig;
  logger: Logger;
  clock: Clock;
  /** Names inherited from our environment by stdio children. */
  inheritEnv: readonly string[];
  maxMessageBytes: number;
  restart: { initialDelayMs: number; maxDelayMs: number };
  /** Capabilities offered to the upstream (those the downstream client declared). */
  clientCapabilities?: ClientCapabilities;
  /** Used for `node` commands; default `process.execPath`. */
  nodePath?: string;
  /** Injected `fetch` for HTTP kinds (tests). */
  fetch?: typeof fetch;
  version?: string;
}

const EMPTY_CATALOG = (): UpstreamCatalog => ({ tools: [], prompts: [], resources: [], resourceTemplates: [] });

export class McpUpstream extends EventEmitter<UpstreamEvents> implements Upstream {
  readonly name: string;
  readonly kind: 'stdio' | 'http' | 'sse';
  readonly secrets: readonly string[];
  status: UpstreamStatus = { state: 'idle' };
  catalog: UpstreamCatalog = EMPTY_CATALOG();
  capabilities: ServerCapabilities | undefined;

  private client?: Client;
  private transport?: Transport;
  /** `tools/call` on the current transport, past the SDK `Protocol` (issue 6). */
  private direct?: DirectCalls;
  private generation = 0;
  private failures = 0;
  private readyAt = 0;
  private cancelRestart?: () => void;
  private autoRestart = true;
  private progressSeq = 0;
  private readonly progress = new Map<string, NonNullable<CallOptions['onProgress']>>();
  /** Calls in flight with a handler for upstream→client requests, newest last. */
  private readonly requestRoutes = new Map<number, ServerRequestHandler>();
  private routeSeq = 0;
  private refreshing = new Map<CatalogKind, Promise<void>>();
  private clientCapabilities: ClientCapabilities;

  constructor(private readonly options: McpUpstreamOptions) {
    super();
    this.name = options.name;
    const config = options.config;
    this.kind = 'command' in config ? 'stdio' : config.type === 'sse' ? 'sse' : 'http';
    this.secrets = credentialValues('command' in config ? config.env : config.headers);
    this.clientCapabilities = options.clientCapabilities ?? {};
  }

  /** Sets the capabilities offered at the next dial. */
  setClientCapabilities(capabilities: ClientCapabilities): void {
    this.clientCapabilities = capabilities;
  }

  async start(): Promise<void> {
    if (this.options.config.disabled) {
      this.setStatus({ state: 'disabled' });
      return;
    }
    await this.dial();
  }

  async reconnect(): Promise<UpstreamStatus> {
    this.autoRestart = false;
    this.cancelRestart?.();
    await this.teardown('reconnect');
    this.failures = 0;
    await this.dial();
    // A manual redial that fails leaves the upstream disconnected (seed 004): no silent retries.
    this.autoRestart = this.status.state === 'ready';
    return this.status;
  }

  async close(): Promise<void> {
    this.autoRestart = false;
    this.cancelRestart?.();
    await this.teardown('close');
    this.setStatus({ state: 'closed' });
  }

  /** Ends a stdio child's process group at once (shutdown by signal). */
  kill(): void {
    this.autoRestart = false;
    this.cancelRestart?.();
    if (this.transport instanceof ChildProcessTransport) this.transport.kill();
  }

  async callTool(toolName: string, args: Record<string, unknown> | undefined, options: CallOptions): Promise<CallToolResult> {
    const client = this.readyClient();
    const meta: Record<string, unknown> = { ...options.meta };
    let token: string | undefined;
    if (options.onProgress) {
      token = `${this.name}#${++this.progressSeq}`;
      this.progress.set(token, options.onProgress);
      meta.progressToken = token;
    }
    const routeId = ++this.routeSeq;
    if (options.onServerRequest) this.requestRoutes.set(routeId, options.onServerRequest);
    const params: Record<string, unknown> = { name: toolName, arguments: args ?? {} };
    if (Object.keys(meta).length) params._meta = meta;
    try {
      if (this.direct) {
        return (await this.direct.request('tools/call', params, { signal: options.signal, timeoutMs: options.timeoutMs + SDK_TIMEOUT_HEADROOM_MS })) as CallToolResult;
      }
      return (await client.request({ method: 'tools/call', params }, AnyObject, {
        signal: options.signal,
        timeout: options.timeoutMs + SDK_TIMEOUT_HEADROOM_MS,
      })) as CallToolResult;
    } finally {
      this.requestRoutes.delete(routeId);
      // Progress sent just before the response is dispatched a tick after it; keep the route briefly.
      if (token) setImmediate(() => this.progress.delete(token!));
    }
  }

  async request(
    method: string,
    params: Record<string, unknown> | undefined,
    options: { signal?: AbortSignal; timeoutMs: number },
  ): Promise<Record<string, unknown>> {
    const client = this.readyClient();
    return client.request({ method, params } as never, AnyObject, {
      signal: options.signal,
      timeout: options.timeoutMs,
    });
  }

  private readyClient(): Client {
    if (this.status.state !== 'ready' || !this.client) {
      throw new BrokerError('upstream_unavailable', `upstream "${this.name}" is not connected (${this.status.state}${this.status.message ? `: ${this.status.message}` : ''})`, {
        data: { status: this.status },
      });
    }
    return this.client;
  }

  private async dial(): Promise<void> {
    const generation = ++this.generation;
    const log = this.options.logger;
    this.setStatus({ state: 'connecting' });
    let transport: Transport;
    try {
      transport = await createUpstreamTransport(this.options);
    } catch (err) {
      // The SDK's HTTP transport modules failed to load: a failed dial like any other.
      if (generation === this.generation) this.dialFailed(err);
      return;
    }
    if (generation !== this.generation) return;
    const client = new Client(
      { name: 'mcp-broker', version: this.options.version ?? '0.0.0' },
      { capabilities: this.clientCapabilities },
    );
    this.installHandlers(client);
    this.client = client;
    this.transport = transport;
    this.direct = undefined;
    const timeoutMs = this.options.config.connectTimeoutMs;
    try {
      await client.connect(transport, { timeout: timeoutMs });
      if (generation !== this.generation) return;
      this.direct = new DirectCalls(transport);
      this.capabilities = client.getServerCapabilities();
      const catalog = await this.fetchCatalog(client, timeoutMs);
      if (generation !== this.generation) return;
      this.catalog = catalog;
      this.readyAt = this.options.clock.now();
      client.onclose = () => this.onLost(generation);
      this.setStatus({ state: 'ready' });
      for (const kind of Object.keys(catalog) as CatalogKind[]) this.emit('changed', kind);
      log.info({ tools: catalog.tools.length, prompts: catalog.prompts.length, resources: catalog.resources.length }, 'upstream ready');
    } catch (err) {
      if (generation !== this.generation) return;
      client.onclose = undefined;
      await closeQuietly(client);
      this.client = undefined;
      this.dialFailed(err, transport);
    }
  }

  /** Records a failed dial (status `failed`, tools withdrawn) and schedules the next one. */
  private dialFailed(err: unknown, transport?: Transport): void {
    const status = dialFailure(err, transport);
    this.options.logger.error({ errorCode: status.errorCode, err: status.message }, 'upstream dial failed');
    this.withdraw();
    this.setStatus(status);
    this.scheduleRestart();
  }

  private installHandlers(client: Client): void {
    client.setNotificationHandler('notifications/progress', (n) => {
      const route = this.progress.get(String(n.params.progressToken));
      if (!route) return;
      const { progress, total, message } = n.params;
      route({ progress, total, message });
    });
    client.setNotificationHandler('notifications/tools/list_changed', () => void this.refresh('tools'));
    client.setNotificationHandler('notifications/prompts/list_changed', () => void this.refresh('prompts'));
    client.setNotificationHandler('notifications/resources/list_changed', async () => {
      await this.refresh('resources');
      await this.refresh('resourceTemplates');
    });
    client.setNotificationHandler('notifications/resources/updated', (n) => void this.emit('resourceUpdated', n.params.uri));
    client.setNotificationHandler('notifications/message', (n) => void this.emit('log', n.params, this.sessionsInFlight()));
    const caps = this.clientCapabilities;
    const route = (method: string) => async (req: { params?: unknown }, ctx: { mcpReq: { signal: AbortSignal } }) => {
      const handlers = [...this.requestRoutes.values()];
      const handler = handlers.at(-1);
      if (!handler) throw new BrokerError('no_caller', `${method} from upstream "${this.name}" arrived with no call in flight to route it to`);
      // The request carries no link to the call that caused it: with calls of several downstream
      // sessions in flight, any pick could hand one client's prompt to another. Refuse instead.
      const sessions = new Set(handlers.map((h) => h.sessionId ?? ''));
      if (sessions.size > 1) {
        throw new BrokerError('ambiguous_caller', `${method} from upstream "${this.name}" arrived while calls of ${sessions.size} downstream sessions were in flight; it cannot be routed to one of them safely`);
      }
      return handler({ method, params: req.params as Record<string, unknown> }, ctx.mcpReq.signal) as never;
    };
    if (caps.elicitation) client.setRequestHandler('elicitation/create', route('elicitation/create'));
    if (caps.sampling) client.setRequestHandler('sampling/createMessage', route('sampling/createMessage'));
    if (caps.roots) client.setRequestHandler('roots/list', route('roots/list'));
  }

  /** Downstream sessions with a call in flight on this upstream now. */
  private sessionsInFlight(): string[] {
    const ids = new Set<string>();
    for (const h of this.requestRoutes.values()) if (h.sessionId) ids.add(h.sessionId);
    return [...ids];
  }

  /** Re-fetches one list after `list_changed`; concurrent requests coalesce. */
  private refresh(kind: CatalogKind): Promise<void> {
    const running = this.refreshing.get(kind);
    if (running) return running.then(() => this.refresh(kind));
    const client = this.client;
    if (!client || this.status.state !== 'ready') return Promise.resolve();
    const task = (async () => {
      try {
        const items = await listAll(client, kind, this.options.config.connectTimeoutMs);
        if (this.client !== client) return;
        (this.catalog as unknown as Record<CatalogKind, unknown[]>)[kind] = items;
        this.emit('changed', kind);
      } catch (err) {
        this.options.logger.warn({ kind, err: messageOf(err) }, 'upstream list refresh failed');
      }
    })().finally(() => this.refreshing.delete(kind));
    this.refreshing.set(kind, task);
    return task;
  }

  private async fetchCatalog(client: Client, timeoutMs: number): Promise<UpstreamCatalog> {
    const caps = client.getServerCapabilities() ?? {};
    const catalog = EMPTY_CATALOG();
    try {
      if (caps.tools) catalog.tools = (await listAll(client, 'tools', timeoutMs)) as UpstreamCatalog['tools'];
      if (caps.prompts) catalog.prompts = (await listAll(client, 'prompts', timeoutMs)) as UpstreamCatalog['prompts'];
      if (caps.resources) {
        catalog.resources = (await listAll(client, 'resources', timeoutMs)) as UpstreamCatalog['resources'];
        catalog.resourceTemplates = (await listAll(client, 'resourceTemplates', timeoutMs).catch(() => [])) as UpstreamCatalog['resourceTemplates'];
      }
    } catch (err) {
      throw new BrokerError('list_failed', `listing failed after connect: ${messageOf(err)}`, { cause: err });
    }
    return catalog;
  }

  /** The transport closed on its own: fail in-flight calls (the SDK does), withdraw, restart. */
  private onLost(generation: number): void {
    if (generation !== this.generation) return;
    const stderr = this.transport instanceof ChildProcessTransport ? this.transport.stderr.trim().split('\n').pop() : undefined;
    this.client = undefined;
    this.generation++;
    this.withdraw();
    this.setStatus({ state: 'failed', errorCode: 'exited', message: `connection lost${stderr ? ` (last stderr: ${stderr.slice(0, 200)})` : ''}` });
    if (this.options.clock.now() - this.readyAt >= STABLE_AFTER_MS) this.failures = 0;
    this.scheduleRestart();
  }

  private scheduleRestart(): void {
    if (!this.autoRestart) return;
    const { initialDelayMs, maxDelayMs } = this.options.restart;
    const base = Math.min(maxDelayMs, initialDelayMs * 2 ** this.failures);
    const delay = Math.round(base / 2 + Math.random() * (base / 2));
    this.failures++;
    this.cancelRestart?.();
    this.setStatus({ ...this.status, state: 'backoff' });
    this.options.logger.info({ delayMs: delay, attempt: this.failures }, 'upstream restart scheduled');
    this.cancelRestart = this.options.clock.setTimer(delay, () => {
      this.cancelRestart = undefined;
      if (this.autoRestart) void this.dial();
    });
  }

  private withdraw(): void {
    const had = this.catalog;
    this.catalog = EMPTY_CATALOG();
    for (const kind of Object.keys(had) as CatalogKind[]) if (had[kind].length) this.emit('changed', kind);
  }

  private async teardown(why: string): Promise<void> {
    this.generation++;
    const client = this.client;
    this.client = undefined;
    this.withdraw();
    if (client) {
      client.onclose = undefined;
      await closeQuietly(client);
    } else if (this.transport) {
      await this.transport.close().catch(() => undefined);
    }
    this.options.logger.debug({ why }, 'upstream connection closed');
  }

  private setStatus(status: UpstreamStatus): void {
    this.status = status;
    this.emit('state', status);
  }
}

async function listAll(client: Client, kind: CatalogKind, timeoutMs: number): Promise<unknown[]> {
  const method = kind === 'resourceTemplates' ? 'resources/templates/list' : `${kind}/list`;
  const items: unknown[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const result = await client.request({ method, params: cursor ? { cursor } : {} } as never, AnyObject, { timeout: timeoutMs });
    const list = result[kind];
    if (Array.isArray(list)) items.push(...list);
    cursor = typeof result.nextCursor === 'string' && result.nextCursor ? result.nextCursor : undefined;
    if (!cursor) return items;
  }
  throw new BrokerError('list_failed', `${method} did not end after ${MAX_PAGES} pages`);
}

async function closeQuietly(client: Client): Promise<void> {
  try {
    await client.close();
  } catch {
    /* closing a broken connection may throw; it is closed either way */
  }
}
