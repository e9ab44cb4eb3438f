/**
 * Resource routing across upstreams: which upstream serves a resource URI or completes a
 * resource template, and resource subscriptions counted across downstream sessions so each
 * upstream is subscribed once per URI: a legacy upstream by `resources/subscribe`, a modern one
 * in its `subscriptions/listen` (`Upstream.subscribeResource`). A legacy client's
 * `resources/subscribe` and a modern client's listen with `resourceSubscriptions` both land here.
 *
 * The broker holds the upstream subscription of a URI while at least one of its subscribers may
 * have it now ({@link MayHave}, the policy as it is): it is let go (`resources/unsubscribe`, or
 * the URI dropped from the upstream listen) when the last subscriber leaves, and also when a
 * config reload denies it to every subscriber left ({@link ResourceRouter.recheck}); a later
 * reload that allows it to one of them again, while that subscriber is still there, takes it
 * again. The subscribers themselves stay (a denied one hears no update meanwhile: the sessions
 * and the listen bus judge each update).
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

/**
 * Whether one subscriber may have resource `uri` (served by upstream `server`) now: the policy's
 * verdict for its principal (a legacy session: not denied; a modern listen, which cannot be
 * asked: allowed outright). Judged when the subscription is counted and at each
 * {@link ResourceRouter.recheck}; a throw counts as no.
 */
export type MayHave = (uri: string, server: string) => boolean;

/** A subscriber that gave no {@link MayHave}: it may have every resource. */
const ANYONE: MayHave = () => true;

export class ResourceRouter {
  /** The subscribers per URI, each by its {@link MayHave} (once per subscription). */
  private readonly subscribers = new Map<string, MayHave[]>();
  /** The URIs the broker holds an upstream subscription for, with the upstream that has it. */
  private readonly held = new Map<string, Upstream>();

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

  /**
   * One more subscriber of `uri` (`may`: whether it may have it now, default always); the first
   * that may sends the upstream `resources/subscribe` (a failure is logged, not thrown). The
   * subscriber leaves with {@link unsubscribe} and the same `may`.
   */
  async subscribe(uri: string, may: MayHave = ANYONE): Promise<void> {
    const list = this.subscribers.get(uri);
    if (list) list.push(may);
    else this.subscribers.set(uri, [may]);
    await this.settle(uri);
  }

  /**
   * One subscriber of `uri` fewer (the one subscribed with `may`; without it, any one; a `may`
   * no subscriber of `uri` has: nothing); when no one left may have it, the upstream
   * `resources/unsubscribe` is sent (failures ignored).
   */
  async unsubscribe(uri: string, may?: MayHave): Promise<void> {
    const list = this.subscribers.get(uri);
    if (!list) return;
    const at = may ? list.indexOf(may) : list.length - 1;
    // Another subscriber's place is never given up for one that is not there.
    if (at < 0) return;
    list.splice(at, 1);
    if (list.length === 0) this.subscribers.delete(uri);
    await this.settle(uri);
  }

  /**
   * Judges every subscription again (the gateway calls it after a config reload): the upstream
   * subscription of a URI no subscriber may have any more is let go, one a subscriber may have
   * again is taken again, and one whose upstream the reload replaced moves to the new upstream.
   */
  async recheck(): Promise<void> {
    await Promise.all([...new Set([...this.subscribers.keys(), ...this.held.keys()])].map((uri) => this.settle(uri)));
  }

  /** Holds the upstream subscription of `uri` exactly when a subscriber may have it now. */
  private async settle(uri: string): Promise<void> {
    const had = this.held.get(uri);
    // The upstream that has it keeps it while it is only down (re-dialling, its lists withdrawn
    // meanwhile: the URI may route to another ready upstream until it is back); it takes it to
    // its next dial (a modern one in its listen, a legacy one by `resources/subscribe` again). A URI no upstream routes now is judged against the one that has it.
    const down = had !== undefined && had.status.state !== 'ready' && this.deps.registry.upstream(had.name) === had;
    const upstream = down ? had : (this.upstreamFor(uri) ?? had);
    const wanted = upstream !== undefined && (this.subscribers.get(uri) ?? []).some((may) => judge(may, uri, upstream.name));
    const { timeoutMs } = this.deps;
    if (had && (!wanted || had !== upstream)) {
      this.held.delete(uri);
      if (had.capabilities?.resources?.subscribe) {
        const unsubscribed = had.unsubscribeResource ? had.unsubscribeResource(uri, timeoutMs) : had.request('resources/unsubscribe', { uri }, { timeoutMs });
        await unsubscribed.catch(() => undefined);
      }
    }
    if (!wanted || this.held.has(uri) || !upstream.capabilities?.resources?.subscribe) return;
    this.held.set(uri, upstream);
    const subscribed = upstream.subscribeResource ? upstream.subscribeResource(uri, timeoutMs) : upstream.request('resources/subscribe', { uri }, { timeoutMs });
    await subscribed.catch((err) => {
      this.deps.logger.warn({ uri, err: messageOf(err) }, 'upstream resource subscription failed');
    });
  }
}

function judge(may: MayHave, uri: string, server: string): boolean {
  try {
    return may(uri, server);
  } catch {
    return false;
  }
}
