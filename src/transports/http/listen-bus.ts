/**
 * The change-event bus of the modern face's `subscriptions/listen` streams (the `bus` option of
 * the SDK's `createMcpHandler`, whose listen router subscribes one listener per open stream and
 * filters by each listen's honoured subset). A listen's `resourceSubscriptions` were judged when
 * it opened (`subscriptions.ts`: only what its principal has outright); each
 * `notifications/resources/updated` is judged again here for the principal of each stream, so
 * once a config reload denies a resource (or makes it `ask`), no update of it reaches that
 * principal's streams, as on stdio (`session.ts`). `list_changed` reaches every stream.
 *
 * A stream belongs to the principal whose request {@link ListenBus.serving} was running when the
 * SDK subscribed it (the router subscribes while it serves the listen request); a stream
 * subscribed outside of it gets no resource update (fail closed).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { ServerEvent, ServerEventBus } from '@modelcontextprotocol/server';

type Listener = (event: ServerEvent) => void;

export class ListenBus implements ServerEventBus {
  /** Each open stream's listener, with its principal (undefined: subscribed outside {@link serving}). */
  private readonly listeners = new Map<Listener, string | undefined>();
  /** The principal whose request the SDK is serving. */
  private readonly principal = new AsyncLocalStorage<string>();
  /** Requests in {@link serving} now. */
  private served = 0;

  constructor(
    /** Whether `principal` may have resource `uri` of upstream `server` now, with nobody asked. */
    private readonly allowed: (principal: string, uri: string, server: string) => boolean,
    /** Told of a listener that threw (the others still get the event). */
    private readonly onerror: (err: unknown) => void,
  ) {}

  /**
   * Runs `serve` (the SDK's handler for one listen request of `principal`): a stream it opens
   * before its promise settles is that principal's. The context storage is released when no
   * request is being served: on Node 20 an enabled `AsyncLocalStorage` hooks every promise of
   * the process, so only listen requests, while served, pay for it.
   */
  async serving<T>(principal: string, serve: () => T | Promise<T>): Promise<T> {
    this.served++;
    try {
      return await this.principal.run(principal, serve);
    } finally {
      if (--this.served === 0) this.principal.disable();
    }
  }

  /**
   * Delivers a `list_changed` event to every stream (the router keeps it to those that asked).
   * A `resource_updated` published here names no upstream, so it cannot be judged: dropped
   * (send those with {@link resourceUpdated}).
   */
  publish(event: ServerEvent): void {
    if (event.kind !== 'resource_updated') this.deliver(event, () => true);
  }

  /** Delivers `notifications/resources/updated` of `uri` (served by upstream `server`) to the streams whose principal may have it now. */
  resourceUpdated(uri: string, server: string): void {
    const verdicts = new Map<string, boolean>();
    const judged = (principal: string) => {
      let allowed = verdicts.get(principal);
      if (allowed === undefined) verdicts.set(principal, (allowed = this.allowed(principal, uri, server)));
      return allowed;
    };
    this.deliver({ kind: 'resource_updated', uri }, (principal) => principal !== undefined && judged(principal));
  }

  subscribe(listener: Listener): () => void {
    this.listeners.set(listener, this.principal.getStore());
    return () => void this.listeners.delete(listener);
  }

  private deliver(event: ServerEvent, to: (principal: string | undefined) => boolean): void {
    for (const [listener, principal] of [...this.listeners]) {
      if (!to(principal)) continue;
      try {
        listener(event);
      } catch (err) {
        this.onerror(err);
      }
    }
  }
}
