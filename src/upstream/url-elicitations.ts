/**
 * URL-mode elicitation (2025-11-25, `client/elicitation`) at the upstream boundary: where an
 * upstream's `notifications/elicitation/complete` goes, and which client may get a URL
 * elicitation at all.
 *
 * The spec says a server sends the completion "only to the client that initiated the elicitation
 * request", with the `elicitationId` of that request. Behind the broker many downstream sessions
 * share one upstream connection, so each connection keeps one {@link UrlElicitations}: an
 * `elicitationId` is remembered with the session it was relayed to, by a live `elicitation/create`
 * (`mode: "url"`) or in the `data.elicitations` of a -32042 (URL elicitation required) error, and
 * the completion goes to that session once and to no other. An id this upstream never sent
 * toward a session, or one already completed, is dropped (clients must ignore those anyway).
 * Ids are per connection, so two upstreams using the same id never meet.
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
  private readonly pending = new Map<string, { notify: SessionNotify; expiresAt: number }>();

  /** @param now the clock, in ms since the epoch */
  constructor(private readonly now: () => number) {}

  /** Remembers that `elicitationId` was relayed to the session `notify` reaches (a newer relay of the same id wins). */
  expect(elicitationId: string, notify: SessionNotify): void {
    this.pending.delete(elicitationId);
    this.pending.set(elicitationId, { notify, expiresAt: this.now() + URL_ELICITATION_TTL_MS });
    while (this.pending.size > MAX_PENDING_URL_ELICITATIONS) this.pending.delete(this.pending.keys().next().value!);
  }

  /** Forgets `elicitationId` (the client declined or cancelled it). */
  forget(elicitationId: string): void {
    this.pending.delete(elicitationId);
  }

  /**
   * The upstream sent `notifications/elicitation/complete` for `elicitationId`: relayed to its
   * session and forgotten. Returns false (nothing sent) for an unknown, expired or completed id.
   */
  complete(elicitationId: string): boolean {
    const entry = this.pending.get(elicitationId);
    if (!entry) return false;
    this.pending.delete(elicitationId);
    if (entry.expiresAt <= this.now()) return false;
    entry.notify({ method: 'notifications/elicitation/complete', params: { elicitationId } });
    return true;
  }

  /** Number of pending ids (for tests and the status page). */
  get size(): number {
    return this.pending.size;
  }
}
