/**
 * Every live HTTP session (Streamable HTTP and legacy SSE), keyed by session id, with its
 * principal, its {@link DownstreamSession} and how it is used. Owns their end: `end(id)` closes
 * the session (its SDK `Server`, its transport, its subscriptions) and forgets it.
 *
 * Idle sessions (no request in progress, no open stream, nothing received for
 * `http.sessionIdleMs`) are reaped by a sweep on the injected clock. Live sessions are capped
 * per principal (`http.maxSessionsPerPrincipal`) and in all (`http.maxSessions`): a new one
 * past a cap ends the oldest idle session that counts against it, or is refused (429 / 503,
 * {@link CapRefusal}) when none is idle. An ended session's id is
 * kept for a while (bounded) so the admin API can tell "ended" (409) from "never existed" (404);
 * MCP requests on it get 404 either way, so clients re-initialize (case F11).
 */
import type { Clock } from '../../shared/clock.js';
import { sessionTag } from '../../shared/ids.js';
import { messageOf } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { DownstreamSession } from '../session.js';
import type { Principal } from './auth.js';
import { capRefusal, type CapRefusal } from './caps.js';

export { sessionTag };

/** How many ended session ids are remembered. */
const ENDED_KEPT = 1024;

export interface HttpSession {
  readonly id: string;
  /** `streamable` (`/mcp`) or `sse` (`GET /sse` + `POST /messages`). */
  readonly kind: 'streamable' | 'sse';
  readonly principal: Principal;
  readonly session: DownstreamSession;
  /** When the last request arrived or the last stream closed, in ms since the epoch. */
  lastSeenAt: number;
  /** Requests in progress and streams open on this session. */
  open: number;
}

/** What {@link SessionTable.find} knows of an id, as seen by one principal. */
export type SessionLookup =
  | { readonly state: 'live'; readonly entry: HttpSession }
  | { readonly state: 'ended'; readonly principal: string }
  | { readonly state: 'unknown' };

/** Why a session ended. */
export type EndReason = 'deleted' | 'idle' | 'evicted' | 'disconnected' | 'closed' | 'shutdown' | 'principal_changed';

export class SessionTable {
  private readonly live = new Map<string, HttpSession>();
  private readonly ended = new Map<string, string>();
  private readonly byPrincipal = new Map<string, number>();
  private cancelSweep?: () => void;

  constructor(
    private readonly deps: {
      clock: Clock;
      logger: Logger;
      /** `http.sessionIdleMs`. */
      idleMs: number;
      /** `http.maxSessions`; unlimited when absent. */
      maxSessions?: number;
      /** `http.maxSessionsPerPrincipal`; unlimited when absent. */
      maxSessionsPerPrincipal?: number;
    },
  ) {}

  /** Starts the idle sweep (every `idleMs / 4`, at least 1 s and at most 60 s). */
  startReaper(): void {
    const every = Math.max(1000, Math.min(60_000, Math.floor(this.deps.idleMs / 4)));
    const tick = () => {
      this.sweep();
      this.cancelSweep = this.deps.clock.setTimer(every, tick);
    };
    this.cancelSweep = this.deps.clock.setTimer(every, tick);
  }

  /**
   * Makes room for one more session of `principal`, or says why there is none. At
   * `maxSessionsPerPrincipal` the principal's oldest idle session (no request in progress, no
   * open stream; oldest by last use) is ended (reason `evicted`), else 429; then at
   * `maxSessions` the oldest idle session of anyone is ended, else 503. Call {@link add} before
   * anything is awaited, so two requests cannot both take the last place.
   * @returns undefined when the session may be added; else the refusal (nothing was ended)
   */
  admit(principal: Principal): CapRefusal | undefined {
    const { maxSessions = Infinity, maxSessionsPerPrincipal = Infinity } = this.deps;
    const own = (this.byPrincipal.get(principal.name) ?? 0) >= maxSessionsPerPrincipal;
    const ownVictim = own ? this.oldestIdle(principal.name) : undefined;
    if (own && !ownVictim) return capRefusal('http.maxSessionsPerPrincipal', maxSessionsPerPrincipal);
    // Ending the principal's own session makes room in all too.
    const full = this.live.size - (ownVictim ? 1 : 0) >= maxSessions;
    const victim = full ? this.oldestIdle() : undefined;
    if (full && (!victim || victim === ownVictim)) return capRefusal('http.maxSessions', maxSessions);
    if (ownVictim) void this.end(ownVictim.id, 'evicted');
    if (victim) void this.end(victim.id, 'evicted');
    return undefined;
  }

  /** The idle session (of `principal`, or of anyone) used longest ago. */
  private oldestIdle(principal?: string): HttpSession | undefined {
    let oldest: HttpSession | undefined;
    for (const entry of this.live.values()) {
      if (entry.open > 0 || (principal !== undefined && entry.principal.name !== principal)) continue;
      if (!oldest || entry.lastSeenAt < oldest.lastSeenAt) oldest = entry;
    }
    return oldest;
  }

  /** Adds a live session (after {@link admit} let it in). */
  add(entry: Omit<HttpSession, 'lastSeenAt' | 'open'>): HttpSession {
    const full: HttpSession = { ...entry, lastSeenAt: this.deps.clock.now(), open: 0 };
    this.live.set(entry.id, full);
    this.byPrincipal.set(entry.principal.name, (this.byPrincipal.get(entry.principal.name) ?? 0) + 1);
    this.deps.logger.info({ session: sessionTag(entry.id), kind: entry.kind, principal: entry.principal.name }, 'http session opened');
    return full;
  }

  /** The live session `id` if `principal` owns it; foreign and unknown ids look the same. */
  get(id: string, principal: Principal): HttpSession | undefined {
    const entry = this.live.get(id);
    return entry && entry.principal.name === principal.name ? entry : undefined;
  }

  /**
   * What `principal` may know of `id`: its own sessions, or any session for an `operator`.
   * A session it may not see is `unknown`, exactly like one that never existed.
   */
  find(id: string, principal: Principal): SessionLookup {
    const maySee = (owner: string) => owner === principal.name || principal.role === 'operator';
    const entry = this.live.get(id);
    if (entry) return maySee(entry.principal.name) ? { state: 'live', entry } : { state: 'unknown' };
    const owner = this.ended.get(id);
    if (owner !== undefined && maySee(owner)) return { state: 'ended', principal: owner };
    return { state: 'unknown' };
  }

  /** Live sessions. */
  get size(): number {
    return this.live.size;
  }

  /** Every live session (for metrics and the status page; do not end sessions while iterating). */
  all(): IterableIterator<HttpSession> {
    return this.live.values();
  }

  /** Live sessions of `principal`. */
  countOf(principal: string): number {
    return this.byPrincipal.get(principal) ?? 0;
  }

  /** Marks a request (or stream) as started on `entry`; call the returned function when it ends. */
  begin(entry: HttpSession): () => void {
    entry.open++;
    entry.lastSeenAt = this.deps.clock.now();
    let done = false;
    return () => {
      if (done) return;
      done = true;
      entry.open--;
      entry.lastSeenAt = this.deps.clock.now();
    };
  }

  /** Ends session `id`: forgets it, then closes it. Idempotent. */
  async end(id: string, reason: EndReason): Promise<void> {
    const entry = this.live.get(id);
    if (!entry) return;
    this.live.delete(id);
    const left = this.countOf(entry.principal.name) - 1;
    if (left > 0) this.byPrincipal.set(entry.principal.name, left);
    else this.byPrincipal.delete(entry.principal.name);
    this.ended.set(id, entry.principal.name);
    if (this.ended.size > ENDED_KEPT) this.ended.delete(this.ended.keys().next().value!);
    this.deps.logger.info({ session: sessionTag(id), kind: entry.kind, principal: entry.principal.name, reason }, 'http session ended');
    await entry.session.close().catch((err) => this.deps.logger.warn({ session: sessionTag(id), err: messageOf(err) }, 'closing an http session failed'));
  }

  /** Ends every session that has been idle for `idleMs`; returns how many. */
  sweep(): number {
    const now = this.deps.clock.now();
    let reaped = 0;
    for (const entry of [...this.live.values()]) {
      if (entry.open === 0 && now - entry.lastSeenAt >= this.deps.idleMs) {
        reaped++;
        void this.end(entry.id, 'idle');
      }
    }
    return reaped;
  }

  /** Ends every session of the named principals (their token, role or entry changed on a config reload). */
  async endPrincipals(names: ReadonlySet<string>): Promise<void> {
    await Promise.all([...this.live.values()].filter((e) => names.has(e.principal.name)).map((e) => this.end(e.id, 'principal_changed')));
  }

  /** Stops the sweep and ends every session. */
  async closeAll(): Promise<void> {
    this.cancelSweep?.();
    this.cancelSweep = undefined;
    await Promise.all([...this.live.keys()].map((id) => this.end(id, 'shutdown')));
  }
}
