/**
 * The broker's side of a modern `subscriptions/listen` (spec `basic/patterns/subscriptions.mdx`).
 * The SDK entry acknowledges it (the honoured subset: what our capabilities declare), tags every
 * notification with `io.modelcontextprotocol/subscriptionId` and ends it; this module makes
 * `resourceSubscriptions` real: before the entry sees the request, each URI is checked (a URI no
 * upstream serves, or one the policy denies the principal or would ask about, which a listen
 * cannot, is taken out, so the acknowledgement leaves it out too), and the broker subscribes upstream (`Gateway.subscribe`, counted across
 * sessions) for the rest while the listen is open and some subscriber may have them (a reload
 * that denies a URI to every one lets the upstream subscription go; `ResourceRouter.recheck`). It ends on `notifications/cancelled` naming
 * the listen's id or a response to it (stdio: the entry refusing or ending it,
 * {@link ListenSubscriptions.answered}), its response stream closing (HTTP), or
 * {@link ListenSubscriptions.close}.
 *
 * `list_changed` needs nothing here: the gateway's events reach the entry's router
 * (`session.ts` on stdio, the handler's notifier over HTTP), which filters per subscription.
 */
import type { Gateway } from '../gateway.js';
import type { MayHave } from '../upstream/resources.js';

type Filter = { resourceSubscriptions?: unknown; [key: string]: unknown };

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

export class ListenSubscriptions {
  /** Open listens, by typed request id, with the URIs the broker subscribed upstream for them. */
  private readonly open = new Map<string, string[]>();

  constructor(
    private readonly gateway: Gateway,
    private readonly principal = 'local',
  ) {}

  /**
   * Looks at one inbound message: a `subscriptions/listen` request has its
   * `resourceSubscriptions` narrowed in place to what is served and allowed, and opens; a
   * `notifications/cancelled` of an open listen closes it. Returns the listen's key when `message`
   * opened one.
   */
  observe(message: unknown): string | undefined {
    if (!isObject(message)) return undefined;
    if (message.method === 'notifications/cancelled') {
      const id = isObject(message.params) ? message.params.requestId : undefined;
      if (typeof id === 'string' || typeof id === 'number') void this.end(keyOf(id));
      return undefined;
    }
    if (message.method !== 'subscriptions/listen' || (typeof message.id !== 'string' && typeof message.id !== 'number')) return undefined;
    const filter = isObject(message.params) && isObject(message.params.notifications) ? (message.params.notifications as Filter) : undefined;
    const asked = filter?.resourceSubscriptions;
    if (!filter || !Array.isArray(asked)) return undefined;
    const uris = asked.filter((uri): uri is string => typeof uri === 'string' && this.allowed(uri));
    filter.resourceSubscriptions = uris;
    const key = keyOf(message.id);
    void this.end(key);
    this.open.set(key, uris);
    for (const uri of uris) void this.gateway.resources.subscribe(uri, this.mayHave).catch(() => undefined);
    return key;
  }

  /**
   * Looks at one outbound message: a response to an open listen ends it. The entry answers a
   * listen it refuses (-32602 for a malformed filter) or has nothing to honour with at once, after
   * {@link observe} subscribed upstream for it; no cancellation follows such an answer.
   */
  answered(message: unknown): void {
    if (this.open.size === 0 || !isObject(message) || 'method' in message || !('result' in message || 'error' in message)) return;
    const id = message.id;
    if (typeof id === 'string' || typeof id === 'number') void this.end(keyOf(id));
  }

  /** Closes one listen: the broker's upstream subscriptions for it are dropped. */
  async end(key: string): Promise<void> {
    const uris = this.open.get(key);
    if (!uris) return;
    this.open.delete(key);
    for (const uri of uris) await this.gateway.resources.unsubscribe(uri, this.mayHave).catch(() => undefined);
  }

  /** Closes every listen (the connection ended). */
  async close(): Promise<void> {
    for (const key of [...this.open.keys()]) await this.end(key);
  }

  private allowed(uri: string): boolean {
    const upstream = this.gateway.resources.upstreamFor(uri);
    return upstream !== undefined && this.mayHave(uri, upstream.name);
  }

  /**
   * Whether the listening principal may have `uri` now. A listen cannot ask: a URI the policy
   * would ask about is left out as a denied one is. Judged again by the resource router after a
   * config reload (the upstream subscription is held only while some subscriber may).
   */
  private readonly mayHave: MayHave = (uri, server) => this.gateway.primitives.allowedOutright(this.principal, { server, type: 'resource', name: uri });
}

function keyOf(id: string | number): string {
  return `${typeof id}:${String(id)}`;
}
