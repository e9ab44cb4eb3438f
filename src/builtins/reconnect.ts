/**
 * `broker__reconnect {server}`: re-dial ONE named upstream inside the session (seed
 * 004_359de2f3ce5e2188.txt). One server, required; there is no "all" form (closing every healthy
 * connection is exactly what this verb must not do).
 *
 * A transaction, not a refresh: the old connection is closed BEFORE the new dial (a stdio server
 * that owns a device or port allows no other order), so a failed dial costs a working connection:
 * the upstream stays disconnected (no automatic restart), its tools are withdrawn from the roster
 * (`notifications/tools/list_changed`), and its in-flight calls fail.
 *
 * The answer (`structuredContent`, and the same JSON as one text line), always a result, never
 * `isError`: `outcome` is the only discriminant.
 *   `{server, outcome, status: {state, errorCode?, httpStatus?}, reason?, toolNames?}`
 *  - `accepted`: the re-dial succeeded (`status.state` is `ready`);
 *  - `refused`: the dial failed (the upstream's `status`; `errorCode: "reconnect_failed"` when
 *    the re-dial threw without one), or no upstream has that name
 *    (`status: {state: "unknown", errorCode: "not_declared"}`), or it is configured `disabled`;
 *  - `unsupported`: no upstream is configured at all (`errorCode: "reconnect_unavailable"`).
 * Act on `status.errorCode` / `status.httpStatus` (`http_status` 401 is a re-authorisation,
 * `spawn_failed` a missing binary); `reason` is human text (scrubbed, at most
 * {@link REASON_MAX_CHARS} characters), never to be parsed. `toolNames` is present iff the
 * roster holds tools of that server after the call that the caller's principal may see (those
 * `tools/list` shows it: broker/visible-tools.ts), whatever the outcome.
 *
 * Every upstream is shared: the broker holds ONE connection per upstream, used by every
 * downstream session of every principal, so a re-dial fails other sessions' in-flight calls.
 * Hence the tool is `requiresPrivilege`: the judge denies it (outcome `denied`, before the
 * server name is even looked at) to a principal that is neither `local` nor an `operator`,
 * unless a `policy.rules` entry allows `broker__reconnect` by name (src/broker/policy.ts). The
 * admin route `POST /v1/sessions/:id/mcp/reconnect` runs this very tool through the broker
 * (src/transports/http/reconnect-route.ts): there is no other way in.
 */
import { z } from 'zod';
import { defineFunctionTool, type FunctionTool } from '../router/function-tool.js';
import { joinLines, messageOf } from '../shared/errors.js';
import { visibleTools, type VisibleToolsDeps } from '../broker/visible-tools.js';
import type { Scrubber } from '../shared/scrub.js';
import type { Registry } from '../upstream/registry.js';
import type { UpstreamStatus } from '../upstream/types.js';

/** The capability key advertised under `experimental` in every session's `initialize` result. */
export const RECONNECT_CAPABILITY = 'mcp-broker/reconnect';
/** Longest `reason`, in characters. */
export const REASON_MAX_CHARS = 300;

/** The answer's shape; advertised as the tool's `outputSchema`. */
export const ReconnectAnswerSchema = z.object({
  server: z.string(),
  outcome: z.enum(['accepted', 'refused', 'unsupported']),
  status: z.object({
    state: z.string().describe('idle, connecting, ready, backoff, failed, closed, disabled, or unknown'),
    errorCode: z.string().optional(),
    httpStatus: z.number().int().optional(),
  }),
  reason: z.string().max(REASON_MAX_CHARS).optional(),
  toolNames: z.array(z.string()).optional(),
});

export type ReconnectAnswer = z.infer<typeof ReconnectAnswerSchema>;

export interface ReconnectDeps {
  registry: Registry;
  scrubber: Scrubber;
  /**
   * What a principal may see of the roster, read at call time: `toolNames` leaves out the tools
   * `tools/list` hides from the caller (a policy deny). Absent: no tool is named.
   */
  visibility?: () => VisibleToolsDeps | undefined;
}

/** The advertised name of the tool. */
export const RECONNECT_TOOL = 'broker__reconnect';

/**
 * The `broker__reconnect` function tool (registered under server `broker`). Two calls at once
 * for one server (tool or admin route) share one re-dial rather than closing each other's new
 * connection.
 */
export function reconnectTool(deps: ReconnectDeps): FunctionTool {
  const inFlight = new Map<string, Promise<UpstreamStatus>>();
  return defineFunctionTool({
    name: RECONNECT_TOOL,
    title: 'Re-dial one upstream server',
    description:
      'Closes, then re-dials ONE named upstream server (the servers.json key). This is a transaction, not a free refresh: the old connection is closed before the new dial, so a failed re-dial leaves the server disconnected, withdraws its tools and fails its in-flight calls. Answer: {server, outcome: "accepted" | "refused" | "unsupported", status: {state, errorCode?, httpStatus?}, reason?, toolNames?}; branch on outcome and status, never on the reason text.',
    parameters: z.object({ server: z.string().min(1).describe('The upstream server key in servers.json') }),
    output: ReconnectAnswerSchema,
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    requiresPrivilege: true,
    privilegeReason: 'acts on upstream connections every session shares',
    async handler({ server }, { session }) {
      const answer = await reconnect(deps, inFlight, server, session.principal);
      return { content: [{ type: 'text', text: JSON.stringify(answer) }], structuredContent: answer };
    },
  });
}

async function reconnect(deps: ReconnectDeps, inFlight: Map<string, Promise<UpstreamStatus>>, server: string, principal: string): Promise<ReconnectAnswer> {
  const { registry } = deps;
  if (registry.upstreams.length === 0) {
    return finish(deps, principal, server, 'unsupported', { state: 'unknown', errorCode: 'reconnect_unavailable' }, 'no upstream servers are configured');
  }
  const upstream = registry.upstream(server);
  if (!upstream) {
    return finish(deps, principal, server, 'refused', { state: 'unknown', errorCode: 'not_declared' }, 'no upstream server by that name is configured');
  }
  if (upstream.status.state === 'disabled') {
    return finish(deps, principal, server, 'refused', { state: 'disabled', errorCode: 'disabled' }, 'the server is configured "disabled": true');
  }
  // Two calls at once share one re-dial rather than closing each other's new connection.
  let pending = inFlight.get(server);
  if (!pending) {
    pending = upstream.reconnect().finally(() => inFlight.delete(server));
    inFlight.set(server, pending);
  }
  let status: UpstreamStatus | undefined;
  let thrown: unknown;
  try {
    status = await pending;
  } catch (err) {
    thrown = err;
  }
  // The registry rebuilds the roster in a microtask after the upstream's `changed` events.
  await new Promise((resolve) => setImmediate(resolve));
  // A re-dial that throws instead of settling on a status failed, whatever state it left.
  if (!status) return finish(deps, principal, server, 'refused', { state: upstream.status.state, errorCode: 'reconnect_failed' }, messageOf(thrown));
  const outcome = status.state === 'ready' ? 'accepted' : 'refused';
  return finish(deps, principal, server, outcome, status, status.message);
}

function finish(
  deps: ReconnectDeps,
  principal: string,
  server: string,
  outcome: ReconnectAnswer['outcome'],
  status: UpstreamStatus | ReconnectAnswer['status'],
  reason: string | undefined,
): ReconnectAnswer {
  const answer: ReconnectAnswer = {
    server,
    outcome,
    status: {
      state: status.state,
      ...(status.errorCode ? { errorCode: status.errorCode } : {}),
      ...(typeof status.httpStatus === 'number' ? { httpStatus: status.httpStatus } : {}),
    },
  };
  if (reason) answer.reason = cut(deps.scrubber.text(joinLines(reason).trim()));
  const visibility = deps.visibility?.();
  const own = [...deps.registry.roster.tools.values()].filter((t) => t.server === server).map((t) => t.definition);
  const toolNames = visibility ? visibleTools(own, principal, visibility).map((t) => t.name) : [];
  if (toolNames.length) answer.toolNames = toolNames;
  return answer;
}

function cut(text: string): string {
  return text.length > REASON_MAX_CHARS ? `${text.slice(0, REASON_MAX_CHARS - 1)}…` : text;
}
