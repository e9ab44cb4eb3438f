/**
 * URL-mode elicitation (2025-11-25, `client/elicitation`) at the upstream boundary: where an
 * upstream's `notifications/elicitation/complete` goes, and which client may get a URL
 * elicitation at all.
 *
 * The spec says a server sends the completion "only to the client that initiated the elicitation
 * request", with the `elicitationId` of that request. Behind the broker many downstream sessions
 * share one upstream connection, so each connection keeps one {@link UrlElicitations}: an
 * `elicitationId` is remembered with each session it was relayed to (and that session's
 * principal), by a live `elicitation/create` (`mode: "url"`) or in the `data.elicitations` of a
 * -32042 (URL elicitation required) error, and the completion goes once to each of those sessions
 * and to no other. The completion names the id only: when the upstream sent one id toward
 * sessions of more than one principal, whose completion it is cannot be told, so it goes to none
 * of them (each learns the outcome by calling again) rather than to another principal. An id this
 * upstream never sent toward a session, or one already completed, is dropped (clients must ignore
 * those anyway). Ids are per connection, so two upstreams using the same id never meet.
 */
import type { ClientCapabilities } from '@modelcontextprotocol/client';

/** Pending URL elicitations kept per upstream connection; past it the oldest is forgotten. */
export const MAX_PENDING_URL_ELICITATIONS = 1000;

/** How long a relayed URL elicitation waits for its completion before it is forgotten, in ms (1 h). */
export const URL_ELICITATION_TTL_MS = 60 * 60_000;

/** The notification as relayed to the session. */
export interface ElicitationCompleteNotification {
  method: 'notifications/elicitation/complete';
  params: { elicitationId: string };
}

/** Sends a notification to one downstream session, outside any call; must not throw. */
export type SessionNotify = (notification: ElicitationCompleteNotification) => void;

/**
 * Whether a client that declared `capabilities` may be sent a URL-mode elicitation: only one
 * that declared `elicitation.url` (an empty `elicitation: {}` means form mode only).
 */
export function supportsUrlElicitation(capabilities: ClientCapabilities | undefined): boolean {
  return capabilities?.elicitation?.url !== undefined;
}

/**
 * Whether a client that declared `capabilities` may be sent a form-mode elicitation (the
 * broker's approval question is one): `elicitation.form` declared, or `elicitation` declared
 * without `url` (the spec's backwards-compatible reading of `{}`).
 */
export function supportsFormElicitation(capabilities: ClientCapabilities | undefined): boolean {
  const elicitation = capabilities?.elicitation;
  if (!elicitation) return false;
  return elicitation.form !== undefined || elicitation.url === undefined;
}

/** The `elicitationId`s of a -32042 error's `data.elicitations` (the URL-mode ones that carry one). */
export function elicitationIdsOf(data: unknown): string[] {
  const list = (data as { elicitations?: unknown } | null | undefined)?.elicitations;
  if (!Array.isArray(list)) return [];
  return list.flatMap((e) => {
    const id = (e as { elicitationId?: unknown } | null)?.elicitationId;
    return typeof id === 'string' && id !== '' ? [id] : [];
  });
}

/** The relayed URL elicitations of one upstream connection awaiting their completion. */
export class UrlElicitations {
  /** One entry per (id, session), oldest first. */
  private readonly pending: Array<{ elicitationId: string; notify: SessionNotify; principal: string; expiresAt: number }> = [];

  /** @param now the clock, in ms since the epoch */
  constructor(private readonly now: () => number) {}

  /**
   * Remembers that `elicitationId` was relayed to the session `notify` reaches, of `principal`
   * (the same id relayed to that session again is remembered once, as the newest).
   */
  expect(elicitationId: string, notify: SessionNotify, principal: string): void {
    this.forget(elicitationId, notify);
    this.pending.push({ elicitationId, notify, principal, expiresAt: this.now() + URL_ELICITATION_TTL_MS });
    if (this.pending.length > MAX_PENDING_URL_ELICITATIONS) this.pending.splice(0, this.pending.length - MAX_PENDING_URL_ELICITATIONS);
  }

  /** Forgets `elicitationId` for the session `notify` reaches (its client declined or cancelled it); other sessions keep theirs. */
  forget(elicitationId: string, notify: SessionNotify): void {
    const at = this.pending.findIndex((e) => e.elicitationId === elicitationId && e.notify === notify);
    if (at >= 0) this.pending.splice(at, 1);
  }

  /**
   * The upstream sent `notifications/elicitation/complete` for `elicitationId`: relayed to each
   * session it was relayed to, and forgotten. `none`: an unknown, expired or completed id;
   * `ambiguous`: sessions of several principals were waiting on it (nothing sent, all forgotten).
   */
  complete(elicitationId: string): 'sent' | 'none' | 'ambiguous' {
    const now = this.now();
    const waiting = this.pending.filter((e) => e.elicitationId === elicitationId);
    if (!waiting.length) return 'none';
    for (const entry of waiting) this.pending.splice(this.pending.indexOf(entry), 1);
    const live = waiting.filter((e) => e.expiresAt > now);
    if (!live.length) return 'none';
    if (new Set(live.map((e) => e.principal)).size > 1) return 'ambiguous';
    for (const { notify } of live) notify({ method: 'notifications/elicitation/complete', params: { elicitationId } });
    return 'sent';
  }

  /** Number of pending (id, session) entries (for tests and the status page). */
  get size(): number {
    return this.pending.length;
  }
}
