/**
 * The broker's own tools (DESIGN.md "Folders": builtins/, all served through router/):
 * `broker__reconnect` (seed 004_359de2f3ce5e2188.txt), `broker__flow_run` (seed
 * 000_13a5a3abd08ace07.txt, src/flows/) and the approval inbox's `broker__approvals_list` /
 * `broker__approvals_decide` (approvals.ts) under server `broker`, and the estate
 * relay's `estate__*` tools (issue 4) under server `estate`, when served (`estateServed`). Registered as function tools, so
 * every call to them passes the same broker path as an upstream call.
 */
import { isInputRequiredResult, type ServerCapabilities } from '@modelcontextprotocol/server';
import type { Broker } from '../broker/broker.js';
import { isPrivilegedPrincipal } from '../broker/policy.js';
import type { VisibleToolsDeps } from '../broker/visible-tools.js';
import type { LoadedConfig } from '../config/load.js';
import type { ToolRouter } from '../router/router.js';
import type { Clock } from '../shared/clock.js';
import type { Logger } from '../shared/logger.js';
import type { Scrubber } from '../shared/scrub.js';
import { SqliteStore } from '../store/sqlite.js';
import type { Store } from '../store/store.js';
import type { Registry } from '../upstream/registry.js';
import { flowTool, type FlowToolDeps } from '../flows/index.js';
import { brokerOwnPaths, EstateScope, estateServed, estateTools, type ProposalStore } from './estate/index.js';
import { RECONNECT_CAPABILITY, reconnectTool } from './reconnect.js';
import { approvalsTools } from './approvals.js';
import type { TaskEngine } from '../tasks/index.js';

/** The `experimental` member of the server capabilities: JSON objects keyed by capability name. */
export type ExperimentalCapabilities = NonNullable<ServerCapabilities['experimental']>;

/** What the builtins need of the gateway. */
export interface BuiltinHost {
  readonly config: LoadedConfig;
  readonly router: ToolRouter;
  readonly registry: Registry;
  readonly scrubber: Scrubber;
  readonly clock: Clock;
  readonly logger: Logger;
  /** The gateway's durable store, when it has one; otherwise the builtins open their own in `broker.dataDir`. */
  readonly store?: Store;
  /** The task engine (the approval inbox tools decide through it); read at call time. */
  readonly tasks?: TaskEngine;
  /**
   * The broker, read at call time (the gateway builds it after the builtins): `broker__flow_run`
   * runs its steps through it. Absent: a flow fails, naming the missing broker.
   */
  readonly broker?: Pick<Broker, 'call'>;
  /** What a principal may see of the roster (`broker__reconnect` names only those tools); read at call time. */
  readonly toolVisibility?: VisibleToolsDeps;
}

export interface Builtins {
  /** `experimental` capabilities every downstream session declares (`mcp-broker/reconnect`). */
  readonly experimental: ExperimentalCapabilities;
  /** Closes what the builtins opened (their own store, if any). */
  close(): Promise<void>;
}

/** Registers every built-in tool with the host's router. */
export function registerBuiltins(host: BuiltinHost): Builtins {
  let own: SqliteStore | undefined;
  const store = (): ProposalStore => host.store ?? (own ??= SqliteStore.open(host.config.broker.dataDir));
  host.router.register(
    [reconnectTool({ registry: host.registry, scrubber: host.scrubber, visibility: () => host.toolVisibility }), ...approvalsTools({ tasks: () => host.tasks, store: () => host.store ?? (own ??= SqliteStore.open(host.config.broker.dataDir)), clock: host.clock })],
    { server: 'broker' },
  );
  const callBroker: FlowToolDeps['call'] = async (request, session) => {
    if (!host.broker) throw new Error('broker__flow_run is served without a broker to run its steps');
    // A step cannot pause the flow for a modern caller's input request: it is asked the legacy
    // way (elicitation on a session), which a sessionless caller cannot answer, so an `ask` step
    // is refused `approval_required` with the approve hint, and the flow fails there.
    const { inputResponses: _responses, requestState: _state, ...rest } = session;
    const answer = await host.broker.call(request, { ...rest, era: 'legacy' });
    if (isInputRequiredResult(answer.result)) throw new Error('a flow step was answered with an input request');
    return { ...answer, result: answer.result };
  };
  const isPrivileged = (principal: string) => isPrivilegedPrincipal(host.config.principals, principal);
  const estate = new EstateScope(host.config.estate.root, brokerOwnPaths(host.config.broker));
  host.router.register([flowTool({ call: callBroker, estate, mayRestoreEstate: isPrivileged })], { server: 'broker' });
  if (estateServed(host.config.estate, host.logger)) {
    host.router.register(estateTools({ config: host.config.estate, scrubber: host.scrubber, store, clock: host.clock, isPrivileged, reserved: brokerOwnPaths(host.config.broker) }), { server: 'estate' });
  }
  const experimental: ExperimentalCapabilities = {};
  // Advertised where there is something to re-dial (seed 004: the capability bit and the verb derive from the same facts).
  if (host.registry.upstreams.length > 0) experimental[RECONNECT_CAPABILITY] = { tool: 'broker__reconnect' };
  return {
    experimental,
    async close() {
      await own?.close();
      own = undefined;
    },
  };
}

export { reconnectTool, RECONNECT_CAPABILITY, RECONNECT_TOOL, ReconnectAnswerSchema, REASON_MAX_CHARS, type ReconnectAnswer } from './reconnect.js';
export { estateServed, estateTools, type EstateOptions } from './estate/index.js';
export { approvalsTools, APPROVALS_LIST_TOOL, APPROVALS_DECIDE_TOOL, type ApprovalsDeps } from './approvals.js';
