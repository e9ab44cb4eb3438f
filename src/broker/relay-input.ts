/**
 * A modern (2026-07-28) upstream's `input_required` relayed to a modern caller (the spec's
 * `basic/patterns/mrtr.mdx`): the upstream's input requests reach the caller in the broker's own
 * `input_required` answer, and the upstream's `requestState` travels inside the broker's sealed
 * state ({@link SealedStates}, kind `relay`), bound to the principal, the upstream's server key,
 * the method, the upstream's own tool or prompt name (or resource URI), a digest of the arguments
 * and an expiry (`policy.askTimeoutMs` from the round that asked). The caller's retry opens it:
 * its answers go, under the upstream's own keys, with the upstream's own state, to that upstream
 * and nothing else. A state that does not open (altered, forged, expired) or was made for another
 * principal, upstream, tool or arguments is refused and nothing is sent upstream.
 *
 * Keys: an upstream's key is passed unchanged, except one in the broker's own namespace
 * (`mcp-broker/…`, where the approval question lives: `mcp-broker/approval`), which becomes
 * `mcp-broker/upstream/<server>/<key>` ({@link relayedKey}). Each relayed round carries the
 * requests of exactly one upstream (the one the call went to, named in the sealed state), so keys
 * of two upstreams never meet in one answer, and the approval question is never asked in the same
 * round as an upstream's. The upstream's own keys are kept because callers (the conformance suite
 * among them) answer by the key the server documents. On the retry, the broker's own keys are
 * dropped and this upstream's namespaced ones restored ({@link upstreamResponses}); answers on a
 * call without a state go to the called tool's upstream the same way (MRTR lets a client answer
 * unasked, and the call names its upstream).
 *
 * Approval: a round the judge approved (a policy `ask`) seals a one-time approval into its relay
 * state, so the retry is not asked again; the judge spends it (`ApprovalStates.redeemRelay`), and
 * a replayed state is asked anew rather than run twice.
 *
 * What is recorded: each round is a call of its own through the whole broker path (judged,
 * charged, recorded). A round the upstream answered `input_required` is outcome `ok` (the
 * upstream answered and reported no failure; DESIGN.md's closed outcome set has no other fitting
 * entry) with `resultType: "input_required"` in its record. A refused state is outcome
 * `invalid_arguments` (status 400; nothing sent) and the caller gets JSON-RPC -32602, as the spec
 * says a server rejects state that fails verification. A refused held-request state
 * (`CallRequest.heldStateRefused`, transports/held-calls.ts) is recorded the same way by the judge
 * (broker/judge.ts), and answered with the refusal result.
 */
import { randomUUID } from 'node:crypto';
import type { InputRequiredResult } from '@modelcontextprotocol/server';
import type { InputRelay } from '../upstream/types.js';
import { SETTLED, splitStage, type Stage } from './runner.js';
import { supportsUrlElicitation } from '../upstream/url-elicitations.js';
import { argumentsDigest, kindOf, type RelayClaim, type SealedStates, type UrlClaim } from './sealed-state.js';
import { refuse, type BrokerCall, type CallerSession, type ToolTarget } from './types.js';
import { isUrlState, openUrlRetry, urlAnswersRefusal, urlInputRequired } from './url-input.js';

/** The broker's own namespace of input request keys (and `_meta` keys). */
export const BROKER_KEY_NAMESPACE = 'mcp-broker/';
/** Where an upstream's key that falls in the broker's namespace is moved: `mcp-broker/upstream/<server>/<key>`. */
export const UPSTREAM_KEY_PREFIX = 'mcp-broker/upstream/';

/** The key an upstream's input request `key` is relayed under. */
export function relayedKey(server: string, key: string): string {
  return key.startsWith(BROKER_KEY_NAMESPACE) ? `${UPSTREAM_KEY_PREFIX}${server}/${key}` : key;
}

/** The caller's answers as `server` is to get them: its namespaced keys restored, every other key of the broker's namespace dropped. */
export function upstreamResponses(server: string, responses: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!responses || typeof responses !== 'object') return undefined;
  const own = `${UPSTREAM_KEY_PREFIX}${server}/`;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(responses)) {
    if (key.startsWith(own)) out[key.slice(own.length)] = value;
    else if (!key.startsWith(BROKER_KEY_NAMESPACE)) out[key] = value;
  }
  return out;
}

/** The caller's answers that go to `binding`'s upstream (none: `{}`). */
function answersFor(session: CallerSession, binding: RelayBinding): InputRelay {
  const inputResponses = upstreamResponses(binding.server, session.inputResponses);
  return inputResponses && Object.keys(inputResponses).length ? { inputResponses } : {};
}

/** What a relayed request is bound to. */
export interface RelayBinding {
  readonly principal: string;
  /** Server key of the upstream. */
  readonly server: string;
  /** `tools/call`, `prompts/get` or `resources/read`. */
  readonly method: string;
  /** The upstream's own tool or prompt name, or the resource URI. */
  readonly target: string;
  readonly args: unknown;
}

/** What a relay state must be bound to for the retry of `call` to the upstream tool `target` (the relay stage's, the judge's). */
export function toolCallBinding(call: BrokerCall, target: ToolTarget): RelayBinding {
  return { principal: call.session.principal, server: target.server, method: 'tools/call', target: target.toolName, args: call.request.args };
}

/**
 * How a modern caller's retry fields are to reach the upstream: `relay` with what to send (the
 * caller may have sent nothing: then `input` is empty), or `refused` with a one-line reason.
 */
export type RelayOpening = { readonly kind: 'relay'; readonly input: InputRelay } | { readonly kind: 'refused'; readonly reason: string };

/**
 * Opens a modern caller's `requestState` and answers for `binding`'s upstream. An approval state
 * (the judge's) carries no upstream state: only the answers go on. A held-request state is
 * refused here, as one that does not verify.
 */
export async function openRelay(states: SealedStates, session: CallerSession, binding: RelayBinding): Promise<RelayOpening> {
  const answers = answersFor(session, binding);
  if (session.requestState === undefined) return { kind: 'relay', input: answers };
  const opened = await states.open(session.requestState);
  // A held-request state belongs to the held call it names (transports/held-calls.ts), a
  // URL-elicitation state to a tools/call's relay stage (url-input.ts), never to this path.
  if (!opened.ok || opened.kind === 'held' || opened.kind === 'url') {
    return { kind: 'refused', reason: unopenedReason(!opened.ok && opened.why === 'expired' ? 'expired' : 'unreadable') };
  }
  if (opened.kind !== 'relay') return { kind: 'relay', input: answers };
  const claim = opened.claim;
  if (!madeFor(claim, binding)) return { kind: 'refused', reason: OTHER_CALL_REASON };
  return { kind: 'relay', input: { ...answers, ...(claim.state !== undefined && { requestState: claim.state }) } };
}

/**
 * Why the relay stage refuses a modern caller's retry of `binding`'s call for its `requestState`,
 * read without spending anything: a state naming the relay or URL-elicitation kind (in the clear)
 * that does not open (altered, forged, expired) or was made for another principal, upstream,
 * method, tool or arguments, or a URL-elicitation retry whose answers are not elicitation results
 * (`inputResponses`: the retry's). Undefined when it is not refused for that, and for any other kind
 * (an approval state is the judge's to read). The judge asks this before it asks or parks the
 * retry of an asked tool (broker/judge.ts), so such a retry is refused as it is without `ask`.
 */
export async function relayStateRefusal(
  states: SealedStates,
  state: string | undefined,
  binding: RelayBinding,
  inputResponses?: Record<string, unknown>,
): Promise<string | undefined> {
  const kind = kindOf(state);
  if (kind !== 'relay' && kind !== 'url') return undefined;
  const opened = await states.openAs(kind, state);
  if (!opened.ok) return unopenedReason(opened.why);
  if (!madeFor(opened.claim, binding)) return OTHER_CALL_REASON;
  // A URL-elicitation retry whose answers the relay stage refuses (openUrlRetry): refused before any approval it carries is spent.
  return kind === 'url' ? urlAnswersRefusal((opened.claim as UrlClaim).keys, inputResponses) : undefined;
}

/** The refusal of a state that does not open. */
function unopenedReason(why: 'unreadable' | 'expired'): string {
  return `the requestState ${why === 'expired' ? 'expired' : 'does not verify (altered, or not sealed by this broker)'}; nothing was sent, call again without it to be asked anew`;
}

const OTHER_CALL_REASON = 'the requestState was made for another call (principal, upstream, tool or arguments); nothing was sent';

/** Whether a relay or URL-elicitation claim was made for `binding`'s call. */
function madeFor(claim: RelayClaim | UrlClaim, binding: RelayBinding): boolean {
  return (
    claim.principal === binding.principal &&
    claim.server === binding.server &&
    claim.method === binding.method &&
    claim.target === binding.target &&
    claim.argsDigest === argumentsDigest(binding.args)
  );
}

/**
 * The broker's own `input_required` answer for an upstream's `result`: its keys as
 * {@link relayedKey} names them, its `requestState` sealed inside ours (valid `ttlMs`), its
 * other fields (`_meta` included) kept.
 */
export async function relayInputRequired(
  states: SealedStates,
  result: Record<string, unknown>,
  binding: RelayBinding,
  options: { readonly callId: string; readonly ttlMs: number; readonly approved?: boolean },
): Promise<InputRequiredResult> {
  const requests = result.inputRequests && typeof result.inputRequests === 'object' ? (result.inputRequests as Record<string, unknown>) : {};
  const inputRequests = Object.fromEntries(Object.entries(requests).map(([key, request]) => [relayedKey(binding.server, key), request]));
  const requestState = await states.seal('relay', {
    principal: binding.principal,
    server: binding.server,
    method: binding.method,
    target: binding.target,
    argsDigest: argumentsDigest(binding.args),
    ...(typeof result.requestState === 'string' && { state: result.requestState }),
    expiresAt: states.now() + options.ttlMs,
    callId: options.callId,
    ...(options.approved && { approvalNonce: randomUUID() }),
  });
  return { ...result, resultType: 'input_required', inputRequests, requestState } as InputRequiredResult;
}

export interface RelayDeps {
  states: SealedStates;
  /** How long a relayed state stays valid, in ms (`policy.askTimeoutMs`). */
  ttlMs: number;
}

/**
 * The relay stage, right after the judge: for a modern caller's call to an upstream tool, opens
 * its retry fields on the way in (`call.inputRelay`; a refused state settles the call
 * `invalid_arguments` with `call.requestError` -32602, before budget and breaker), and on the way
 * out turns an upstream's `input_required` result into the broker's own (`call.inputRequired`).
 * A legacy upstream's -32042 to a caller that declared `elicitation.url` becomes URL-mode input
 * requests the same way, and its retry is opened here too (broker/url-input.ts).
 */
export function relayStage(deps: RelayDeps): Stage {
  /** The call goes on with what `opening` says reaches the upstream, or is settled here. */
  const opened = (call: BrokerCall, binding: RelayBinding, opening: RelayOpening | { kind: 'ended'; reason: string }): RelayTicket | typeof SETTLED => {
    if (opening.kind === 'ended') {
      refuse(call, 'cancelled', opening.reason);
      return SETTLED;
    }
    if (opening.kind === 'refused') {
      refuse(call, 'invalid_arguments', opening.reason);
      call.requestError = { code: -32602, message: opening.reason };
      return SETTLED;
    }
    call.inputRelay = opening.input;
    return { binding };
  };
  return splitStage<RelayTicket>(
    'relay',
    (call) => {
      const target = call.target;
      if (call.session.era !== 'modern' || !target || target.source !== 'upstream') return NOT_RELAYED;
      const binding = toolCallBinding(call, target);
      const state = call.session.requestState;
      // No state: only the caller's answers go on, decided at once (the call keeps its turn).
      if (state === undefined) return opened(call, binding, { kind: 'relay', input: answersFor(call.session, binding) });
      // The retry of a round a legacy upstream answered -32042 (url-input.ts): sent again, ended, or refused.
      const opening = isUrlState(state)
        ? openUrlRetry(deps.states, call.session, binding).then((retry) => (retry.kind === 'send' ? ({ kind: 'relay', input: {} } as const) : retry))
        : openRelay(deps.states, call.session, binding);
      return opening.then((o) => opened(call, binding, o));
    },
    // Only a relayed call that the upstream asked, or answered -32042, has anything to do on the
    // way out; the others keep their turn.
    (call, { binding }) => (binding && (asksUrl(call) || asksInput(call)) ? relayOut(call, binding) : undefined),
  );

  function asksUrl(call: BrokerCall): boolean {
    return call.outcome === 'upstream_error' && call.wireError !== undefined && supportsUrlElicitation(call.session.clientCapabilities);
  }

  function asksInput(call: BrokerCall): boolean {
    return call.outcome === 'ok' && (call.result as Record<string, unknown> | undefined)?.resultType === 'input_required';
  }

  /** An upstream's `input_required` (or a legacy upstream's -32042 to a URL-mode caller) becomes the broker's own. */
  async function relayOut(call: BrokerCall, binding: RelayBinding): Promise<void> {
    if (asksUrl(call)) {
      const asked = await urlInputRequired(deps.states, call.wireError!, binding, { callId: call.callId, ttlMs: deps.ttlMs, approved: call.approved === true });
      if (!asked) return;
      call.outcome = 'ok';
      call.reason = undefined;
      call.wireError = undefined;
      call.inputRequired = asked;
      return;
    }
    if (!asksInput(call)) return;
    call.inputRequired = await relayInputRequired(deps.states, call.result as Record<string, unknown>, binding, { callId: call.callId, ttlMs: deps.ttlMs, approved: call.approved === true });
    call.result = undefined;
  }
}

/** The relay stage's ticket: the binding of a modern caller's call to an upstream tool; none for any other call. */
interface RelayTicket {
  readonly binding?: RelayBinding;
}

const NOT_RELAYED: RelayTicket = {};
