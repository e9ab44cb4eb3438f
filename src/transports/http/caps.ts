/**
 * Caps on what callers hold open on the HTTP face: the refusal both caps answer with, and the
 * count of open event streams ({@link StreamCaps}). Session caps live in the session table,
 * which can end an idle session to make room (`SessionTable.admit`).
 *
 * A cap of one principal refuses with 429 (that principal alone is turned away); a cap in all
 * with 503 (the broker is full). The answer is a JSON-RPC error body naming the setting.
 */
import type { ServerResponse } from 'node:http';
import type { Logger } from '../../shared/logger.js';
import type { Principal } from './auth.js';
import { jsonRpcError, pathOf, sendJson } from './guards.js';

/** The `http` settings a cap is read from. */
export type CapSetting = 'http.maxSessions' | 'http.maxSessionsPerPrincipal' | 'http.maxStreams' | 'http.maxStreamsPerPrincipal';

/** Why a new session or stream was refused. */
export interface CapRefusal {
  /** 429 for a cap of one principal, 503 for a cap in all. */
  readonly status: 429 | 503;
  readonly setting: CapSetting;
  /** The cap's value. */
  readonly limit: number;
  /** What is capped. */
  readonly what: 'sessions' | 'streams';
}

/** The refusal for `setting` at `limit`: 429 for a per-principal cap, 503 for one in all. */
export function capRefusal(setting: CapSetting, limit: number): CapRefusal {
  return {
    status: setting.endsWith('PerPrincipal') ? 429 : 503,
    setting,
    limit,
    what: setting.startsWith('http.maxSessions') ? 'sessions' : 'streams',
  };
}

/** The one-line message of a refusal (no principal name, no id). */
export function capMessage(refusal: CapRefusal): string {
  const { status, setting, limit, what } = refusal;
  const busy = what === 'sessions' ? ', and none is idle' : '';
  if (status === 429) return `Too Many Requests: this principal has ${limit} ${what} open, the most ${setting} allows${busy}; close one first`;
  return `Service Unavailable: ${limit} ${what} are open, the most ${setting} allows${busy}; try again later`;
}

/** Answers `res` with the refusal's status and a JSON-RPC error (-32000) naming the setting, and logs it. */
export function answerOverCap(res: ServerResponse, refusal: CapRefusal, principal: Principal, logger: Logger): void {
  logger.warn({ path: pathOf(res.req), principal: principal.name, setting: refusal.setting, limit: refusal.limit }, `http ${refusal.what} cap reached`);
  sendJson(res, refusal.status, jsonRpcError(-32000, capMessage(refusal)));
}

/** A stream slot taken by {@link StreamCaps.acquire}, or the refusal. */
export type StreamAdmission = { readonly ok: true; release(): void } | { readonly ok: false; readonly refusal: CapRefusal };

/**
 * Counts the open event streams (`GET /sse`, `GET /mcp`, `GET /api/v1/events`, a 2026-07-28
 * `subscriptions/listen`), per principal, per era and in all, against `http.maxStreamsPerPrincipal` and `http.maxStreams` (defaults in the
 * schema). A stream over a cap is refused, never a live one closed to make room. A `POST`'s
 * response stream ends with its answer and is not counted.
 */
export class StreamCaps {
  private readonly byPrincipal = new Map<string, number>();
  /** How to close each open stream, by principal (a reload that revokes a principal closes its streams). */
  private readonly closers = new Map<string, Set<() => void>>();
  private total = 0;
  private modern = 0;

  constructor(private readonly limits: { readonly maxStreams: number; readonly maxStreamsPerPrincipal: number }) {}

  /** Open streams in all. */
  get size(): number {
    return this.total;
  }

  /** Open streams of one era: `modern` (2026-07-28 listens) or `legacy` (every other stream). */
  sizeOf(era: 'legacy' | 'modern'): number {
    return era === 'modern' ? this.modern : this.total - this.modern;
  }

  /** Open streams of `principal`. */
  countOf(principal: string): number {
    return this.byPrincipal.get(principal) ?? 0;
  }

  /**
   * Takes a slot for one stream of `principal`; `release()` (idempotent) gives it back: call it
   * when the response closes. Refused (and nothing taken) at either cap. `era` only labels it
   * (metrics); both eras share the caps. Default `legacy`. `close` ends the stream (destroys its
   * response) when {@link closePrincipals} names its principal.
   */
  acquire(principal: Principal, era: 'legacy' | 'modern' = 'legacy', close?: () => void): StreamAdmission {
    const name = principal.name;
    const mine = this.countOf(name);
    if (mine >= this.limits.maxStreamsPerPrincipal) return { ok: false, refusal: capRefusal('http.maxStreamsPerPrincipal', this.limits.maxStreamsPerPrincipal) };
    if (this.total >= this.limits.maxStreams) return { ok: false, refusal: capRefusal('http.maxStreams', this.limits.maxStreams) };
    this.byPrincipal.set(name, mine + 1);
    this.total++;
    if (era === 'modern') this.modern++;
    if (close) {
      let set = this.closers.get(name);
      if (!set) this.closers.set(name, (set = new Set()));
      set.add(close);
    }
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        if (close) this.closers.get(name)?.delete(close);
        this.total--;
        if (era === 'modern') this.modern--;
        const left = this.countOf(name) - 1;
        if (left > 0) this.byPrincipal.set(name, left);
        else this.byPrincipal.delete(name);
      },
    };
  }

  /** Closes every open stream of the named principals (their token or role changed, or they were removed). */
  closePrincipals(names: ReadonlySet<string>): void {
    for (const name of names) for (const close of [...(this.closers.get(name) ?? [])]) close();
  }
}
