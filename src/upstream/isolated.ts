/**
 * A stdio upstream isolated per principal (`isolation: "principal"`): one child process per
 * principal, so what a server keeps per connection (server-everything caches the roots of its
 * one stdio session) is never handed to another principal, and one principal's unanswered
 * sampling or elicitation request, which the owner gate makes others wait behind on a shared
 * stdio child (owner-gate.ts), holds up that principal's own calls only.
 *
 * - The primary connection (this object, an {@link McpUpstream}) is dialled at start as any
 *   upstream and alone drives the roster, catalog, status, subscriptions and the era verdict.
 * - A call made for principal P (`tools/call`, `prompts/get`, `resources/read`,
 *   `completion/complete` whose options name P) goes to P's own connection, dialled on P's first
 *   call with the same spawn spec and the same offered client capabilities; its era comes from
 *   the verdict the primary remembered in the store (era-memory.ts), so it is not probed again.
 *   The stdio client (`local`) and calls naming no principal use the primary.
 * - P's connection is closed once it has had no call in flight for `idleMs`; all of them close
 *   with the upstream (`close`, `kill`) and before `reconnect` re-dials the primary.
 * - At most `maxPrincipals` principal connections at once: a new principal past that closes the
 *   least recently used idle one; with none idle its call fails `upstream_error` (never the shared
 *   child: that would leak what the isolation is for).
 * - A principal's connection that crashes fails its own calls and restarts with its own backoff
 *   (McpUpstream); the others are untouched.
 * - Its `list_changed` is ignored (the primary's catalog is the roster), as are its resource
 *   updates (subscriptions ride the primary). Its log messages tied to a call (a session named)
 *   are relayed; those tied to no call (all of them on stdio) are dropped at debug, since they
 *   would otherwise reach every principal's sessions.
 */
import type { CallToolResult, ClientCapabilities } from '@modelcontextprotocol/client';
import { BrokerError } from '../shared/errors.js';
import { McpUpstream, type McpUpstreamOptions } from './connection.js';
import type { CallOptions, RequestOptions, UpstreamStatus } from './types.js';

/** Requests made for a caller that go to its principal's connection; any other (lists, subscriptions, ping) uses the primary. */
const CALLER_METHODS: ReadonlySet<string> = new Set(['prompts/get', 'resources/read', 'completion/complete']);

export interface IsolationOptions {
  /** A principal connection with no call in flight this long is closed, in ms. */
  idleMs: number;
  /** Most principal connections at once (the primary not counted). */
  maxPrincipals: number;
}

/** One principal's connection. */
interface PrincipalConnection {
  readonly upstream: McpUpstream;
  /** Its first dial (never rejects: a failure shows in its status). */
  readonly started: Promise<void>;
  inFlight: number;
  /** When its last call ended, or it was dialled (ms since the epoch). */
  lastUsed: number;
  cancelIdle?: () => void;
}

export class IsolatedUpstream extends McpUpstream {
  private readonly connections = new Map<string, PrincipalConnection>();
  private offeredCapabilities: ClientCapabilities;

  /**
   * @param options as for {@link McpUpstream} (a stdio config); each principal connection is made with them
   * @param isolation idle time and cap of the principal connections
   */
  constructor(
    private readonly upstreamOptions: McpUpstreamOptions,
    private readonly isolation: IsolationOptions,
  ) {
    super(upstreamOptions);
    this.offeredCapabilities = upstreamOptions.clientCapabilities ?? {};
  }

  /** Principals with a connection of their own now (open, dialling or restarting), for status and tests. */
  get principals(): string[] {
    return [...this.connections.keys()];
  }

  /** The connection of `principal`, when it has one. */
  connectionOf(principal: string): McpUpstream | undefined {
    return this.connections.get(principal)?.upstream;
  }

  override setClientCapabilities(capabilities: ClientCapabilities): void {
    this.offeredCapabilities = capabilities;
    super.setClientCapabilities(capabilities);
  }

  override async callTool(toolName: string, args: Record<string, unknown> | undefined, options: CallOptions): Promise<CallToolResult> {
    const connection = this.connectionFor(options.principal);
    if (!connection) return super.callTool(toolName, args, options);
    return this.using(connection, () => connection.upstream.callTool(toolName, args, options));
  }

  override async request(method: string, params: Record<string, unknown> | undefined, options: RequestOptions): Promise<Record<string, unknown>> {
    const connection = CALLER_METHODS.has(method) ? this.connectionFor(options.principal) : undefined;
    if (!connection) return super.request(method, params, options);
    return this.using(connection, () => connection.upstream.request(method, params, options));
  }

  override async reconnect(): Promise<UpstreamStatus> {
    await this.closeConnections();
    return super.reconnect();
  }

  override async close(): Promise<void> {
    await this.closeConnections();
    await super.close();
  }

  override kill(): void {
    for (const c of this.connections.values()) c.upstream.kill();
    super.kill();
  }

  /**
   * `principal`'s connection, dialled now when it has none (counted against the cap); undefined
   * for the primary: no principal, `local`, or the primary not ready (its call then fails as
   * the primary's would, and no child is spawned for an upstream that is down).
   * @throws BrokerError `upstream_error` when the cap is reached and every connection has a call in flight
   */
  private connectionFor(principal: string | undefined): PrincipalConnection | undefined {
    if (principal === undefined || principal === 'local') return undefined;
    const known = this.connections.get(principal);
    if (known) return known;
    if (this.status.state !== 'ready') return undefined;
    if (this.connections.size >= this.isolation.maxPrincipals) this.evictOne();
    const upstream = new McpUpstream({
      ...this.upstreamOptions,
      clientCapabilities: this.offeredCapabilities,
      logger: this.upstreamOptions.logger.child({ principal }),
    });
    upstream.on('log', (params, owner) => {
      if (owner !== undefined) this.emit('log', params, owner);
      else this.upstreamOptions.logger.debug({ principal }, "log message of a principal's connection tied to no call: dropped");
    });
    const connection: PrincipalConnection = { upstream, started: upstream.start(), inFlight: 0, lastUsed: this.upstreamOptions.clock.now() };
    this.connections.set(principal, connection);
    this.upstreamOptions.logger.debug({ principal, connections: this.connections.size }, 'principal connection dialled');
    return connection;
  }

  /** Closes the least recently used principal connection with no call in flight, to make room. */
  private evictOne(): void {
    let oldest: [string, PrincipalConnection] | undefined;
    for (const entry of this.connections) if (entry[1].inFlight === 0 && (!oldest || entry[1].lastUsed < oldest[1].lastUsed)) oldest = entry;
    if (!oldest) {
      throw new BrokerError(
        'upstream_error',
        `upstream "${this.name}" is isolated per principal and its ${this.isolation.maxPrincipals} principal connections all have calls in flight; try again later (raise "isolationMaxPrincipals" to allow more)`,
      );
    }
    this.retire(oldest[0], oldest[1], 'least recently used, to make room');
  }

  /** Runs one call on `connection`, keeping it open meanwhile; idle from its end, it is closed after `idleMs`. */
  private async using<T>(connection: PrincipalConnection, call: () => Promise<T>): Promise<T> {
    connection.inFlight++;
    connection.cancelIdle?.();
    connection.cancelIdle = undefined;
    try {
      await connection.started;
      return await call();
    } finally {
      connection.inFlight--;
      connection.lastUsed = this.upstreamOptions.clock.now();
      if (connection.inFlight === 0) {
        const principal = [...this.connections].find(([, c]) => c === connection)?.[0];
        if (principal !== undefined) {
          connection.cancelIdle = this.upstreamOptions.clock.setTimer(this.isolation.idleMs, () => this.retire(principal, connection, 'idle'));
        }
      }
    }
  }

  /** Forgets and closes one principal connection (unless it was replaced or is busy again). */
  private retire(principal: string, connection: PrincipalConnection, why: string): void {
    if (this.connections.get(principal) !== connection || connection.inFlight > 0) return;
    connection.cancelIdle?.();
    this.connections.delete(principal);
    this.upstreamOptions.logger.debug({ principal, why }, 'principal connection closed');
    void connection.upstream.close().catch(() => undefined);
  }

  private async closeConnections(): Promise<void> {
    const all = [...this.connections.values()];
    this.connections.clear();
    for (const c of all) c.cancelIdle?.();
    await Promise.all(all.map((c) => c.upstream.close().catch(() => undefined)));
  }
}
