/**
 * Resource routing across upstreams: which upstream serves a resource URI or completes a
 * resource template, and resource subscriptions counted across downstream sessions so each
 * upstream is subscribed once per URI (and unsubscribed when the last session lets go): a legacy
 * upstream by `resources/subscribe`, a modern one in its `subscriptions/listen`
 * (`Upstream.subscribeResource`). A legacy client's `resources/subscribe` and a modern client's
 * listen with `resourceSubscriptions` both land here.
 * Built by the gateway over its {@link Registry}; sessions call it.
 */
import { messageOf } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import type { Registry } from './registry.js';
import type { Upstream } from './types.js';

export interface ResourceRouterDeps {
  registry: Registry;
  logger: Pick<Logger, 'warn'>;
  /** Deadline of an upstream `resources/subscribe` or `unsubscribe`, in ms (`broker.timeoutMs`). */
  timeoutMs: number;
}

export class ResourceRouter {
  /** Sessions subscribed per URI. */
  private readonly subscriptions = new Map<string, number>();

  constructor(private readonly deps: ResourceRouterDeps) {}

  /**
   * The upstream serving a resource URI: the one listing it, then the best template it is an
   * expansion of (`Roster.resourceServer`: `resourcePriority`, specificity, config order), then
   * the only ready upstream with resources. Undefined: none (the caller answers -32602, resource not found).
   */
  upstreamFor(uri: string): Upstream | undefined {
    const { registry } = this.deps;
    const server = registry.roster.resourceServer(uri);
    if (server !== undefined) return registry.upstream(server);
    const withResources = registry.upstreams.filter((u) => u.status.state === 'ready' && u.capabilities?.resources);
    return withResources.length === 1 ? withResources[0] : undefined;
  }

  /** The upstream to complete a `ref/resource` for: the one whose template string it is, else as {@link upstreamFor}. */
  upstreamForTemplate(uriTemplate: string): Upstream | undefined {
    const server = this.deps.registry.roster.templateServer(uriTemplate);
    return server !== undefined ? this.deps.registry.upstream(server) : this.upstreamFor(uriTemplate);
  }

  /** One more session subscribed to `uri`; the first sends the upstream `resources/subscribe` (a failure is logged, not thrown). */
  async subscribe(uri: string): Promise<void> {
    const count = this.subscriptions.get(uri) ?? 0;
    this.subscriptions.set(uri, count + 1);
    if (count > 0) return;
    const upstream = this.upstreamFor(uri);
    if (upstream?.capabilities?.resources?.subscribe) {
      const { timeoutMs } = this.deps;
      const subscribed = upstream.subscribeResource ? upstream.subscribeResource(uri, timeoutMs) : upstream.request('resources/subscribe', { uri }, { timeoutMs });
      await subscribed.catch((err) => {
        this.deps.logger.warn({ uri, err: messageOf(err) }, 'upstream resource subscription failed');
      });
    }
  }

  /** One session fewer subscribed to `uri`; the last sends the upstream `resources/unsubscribe` (failures ignored). */
  async unsubscribe(uri: string): Promise<void> {
    const count = this.subscriptions.get(uri) ?? 0;
    if (count <= 1) this.subscriptions.delete(uri);
    else return void this.subscriptions.set(uri, count - 1);
    if (count === 0) return;
    const upstream = this.upstreamFor(uri);
    if (upstream?.capabilities?.resources?.subscribe) {
      const { timeoutMs } = this.deps;
      const unsubscribed = upstream.unsubscribeResource ? upstream.unsubscribeResource(uri, timeoutMs) : upstream.request('resources/unsubscribe', { uri }, { timeoutMs });
      await unsubscribed.catch(() => undefined);
    }
  }
}
