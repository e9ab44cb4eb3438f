/**
 * A legacy (2025-11-25) upstream's -32042 (URL elicitation required) during a modern
 * (2026-07-28) caller's `tools/call`. The 2026-07-28 revision has no -32042 (its
 * `basic/index.mdx`: "2025-11-25 only"); its way to send a user to a URL is an `input_required`
 * answer whose input requests are URL-mode `elicitation/create` requests (`client/elicitation.mdx`).
 * So, for a caller whose request declared `elicitation.url`:
 *
 * - The round the upstream answered -32042 becomes the broker's `input_required` answer: one
 *   input request per entry of the error's `data.elicitations` that carries a `url`
 *   (`{method: "elicitation/create", params: {mode: "url", message, url, elicitationId}}`, taken
 *   from the error as the connection scrubbed it, upstream/upstream-scrub.ts), under the key
 *   `<server>/url/<n>` (n from 1, in the error's order), and a `requestState` sealed by the broker
 *   ({@link SealedStates}, kind `url`) bound to the principal, the upstream, the upstream's tool
 *   name, a digest of the arguments, the keys, a one-time nonce and an expiry (`policy.askTimeoutMs`).
 *   The round is recorded as a relay round is: outcome `ok`, `resultType: "input_required"`.
 * - The caller's retry with that state: every key answered `accept` (the user agreed to open the
 *   URL) sends the call again, to the same upstream and tool with the same arguments, as a
 *   2025-11-25 client retries after -32042; the upstream decides whether the out-of-band step is
 *   done (its answer, or -32042 again, which becomes the next `input_required`). Any key answered
 *   `decline` or `cancel` ends the call without sending it: outcome `cancelled` (the user, on the
 *   client's side, stopped the call; not `denied` or `approval_required`, which are the policy's).
 *   Either answer spends the nonce. A state whose keys are not all answered is a retry without
 *   answers: the call is sent again as a fresh call would be (the upstream asks anew), the state
 *   left unspent.
 * - A state that does not open (altered, forged, expired), was made for another principal,
 *   upstream, tool or arguments, was spent already, or carries an answer that is not an
 *   elicitation result is refused as a relay state is: JSON-RPC -32602, recorded
 *   `invalid_arguments`, nothing sent.
 * - A caller whose request did not declare `elicitation.url` cannot answer a URL elicitation:
 *   it keeps the `upstream_error` refusal result naming the -32042.
 *
 * `notifications/elicitation/complete` for these elicitations: a modern caller has no session and
 * its revision no completion notification, so the connection remembers no session for them and
 * drops the upstream's completion with a debug log (upstream/connection.ts); the caller learns
 * the outcome by its retry, as the 2026-07-28 revision says.
 */
import { randomUUID } from 'node:crypto';
import type { InputRequiredResult } from '@modelcontextprotocol/server';
import { URL_ELICITATION_REQUIRED } from './failure.js';
import { argumentsDigest, kindOf, type SealedStates } from './sealed-state.js';
import type { CallerSession, WireError } from './types.js';

/** The infix of the input request keys of a -32042's elicitations: `<server>/url/<n>`. */
export const URL_KEY_INFIX = '/url/';

/** What a URL-elicitation state is bound to (as a relay state: broker/relay-input.ts `RelayBinding`). */
export interface UrlBinding {
  readonly principal: string;
  /** Server key of the upstream. */
  readonly server: string;
  /** The upstream's own tool name. */
  readonly target: string;
  readonly args: unknown;
}

/** Whether `state` names the URL-elicitation kind (read without opening it). */
export function isUrlState(state: unknown): state is string {
  return kindOf(state) === 'url';
}

/** The URL-mode `elicitation/create` params of a -32042's `data.elicitations` (entries without a string `url` left out). */
export function urlElicitationRequests(data: unknown): Record<string, unknown>[] {
  const list = (data as { elicitations?: unknown } | null | undefined)?.elicitations;
  if (!Array.isArray(list)) return [];
  return list.flatMap((entry) => {
    const e = entry as Record<string, unknown> | null;
    if (!e || typeof e !== 'object' || typeof e.url !== 'string') return [];
    return [{ mode: 'url', message: typeof e.message === 'string' ? e.message : '', url: e.url, ...(typeof e.elicitationId === 'string' && { elicitationId: e.elicitationId }) }];
  });
}

/**
 * The broker's `input_required` answer for an upstream's -32042 `error`, or undefined when it
 * is no -32042 or carries no URL elicitation (then the refusal stands). Rejects only when the
 * store fails (the sealing key).
 */
export async function urlInputRequired(
  states: SealedStates,
  error: WireError,
  binding: UrlBinding,
  options: { readonly callId: string; readonly ttlMs: number; readonly approved?: boolean },
): Promise<InputRequiredResult | undefined> {
  if (error.code !== URL_ELICITATION_REQUIRED) return undefined;
  const requests = urlElicitationRequests(error.data);
  if (!requests.length) return undefined;
  const keys = requests.map((_, i) => `${binding.server}${URL_KEY_INFIX}${i + 1}`);
  const requestState = await states.seal('url', {
    principal: binding.principal,
    server: binding.server,
    method: 'tools/call',
    target: binding.target,
    argsDigest: argumentsDigest(binding.args),
    keys,
    nonce: randomUUID(),
    callId: options.callId,
    expiresAt: states.now() + options.ttlMs,
    ...(options.approved && { approvalNonce: randomUUID() }),
  });
  const inputRequests = Object.fromEntries(keys.map((key, i) => [key, { method: 'elicitation/create', params: requests[i] }]));
  return { resultType: 'input_required', inputRequests, requestState } as InputRequiredResult;
}

/**
 * Why the answers of a retry to the URL elicitations under `keys` are refused, read without
 * spending anything: every key answered, and one answer is not an elicitation result (action
 * `accept`, `decline` or `cancel`). Undefined when they are not refused for that (some key not
 * answered is a retry without answers: {@link openUrlRetry}). The judge asks this, through
 * broker/relay-input.ts `relayStateRefusal`, before it spends the approval a state carries.
 */
export function urlAnswersRefusal(keys: readonly string[], responses: Record<string, unknown> | undefined): string | undefined {
  const answers = keys.map((key) => responses?.[key] as { action?: unknown } | undefined);
  if (answers.some((a) => a === undefined)) return undefined;
  const actions = answers.map((a) => (a && typeof a === 'object' ? a.action : undefined));
  return actions.every((a) => a === 'accept' || a === 'decline' || a === 'cancel')
    ? undefined
    : 'an answer to a URL elicitation is not an elicitation result (action accept, decline or cancel); nothing was sent';
}

/**
 * What a retry carrying a URL-elicitation state does: `send` the call again, `ended` (the user
 * declined or dismissed; nothing sent) or `refused` (-32602; nothing sent), each with a one-line reason.
 */
export type UrlRetry = { readonly kind: 'send' } | { readonly kind: 'ended'; readonly reason: string } | { readonly kind: 'refused'; readonly reason: string };

/** Opens the caller's URL-elicitation state against the call `binding` and reads its answers; see {@link UrlRetry}. */
export async function openUrlRetry(states: SealedStates, session: CallerSession, binding: UrlBinding): Promise<UrlRetry> {
  const opened = await states.openAs('url', session.requestState);
  if (!opened.ok) {
    const why = opened.why === 'expired' ? 'expired' : 'does not verify (altered, or not sealed by this broker)';
    return { kind: 'refused', reason: `the requestState ${why}; nothing was sent, call again without it to be asked anew` };
  }
  const claim = opened.claim;
  const same =
    claim.principal === binding.principal && claim.server === binding.server && claim.target === binding.target && claim.argsDigest === argumentsDigest(binding.args);
  if (!same) return { kind: 'refused', reason: 'the requestState was made for another call (principal, upstream, tool or arguments); nothing was sent' };
  const answers = claim.keys.map((key) => session.inputResponses?.[key] as { action?: unknown } | undefined);
  // Not every elicitation answered: a retry without answers, sent as a fresh call is.
  if (answers.some((a) => a === undefined)) return { kind: 'send' };
  const malformed = urlAnswersRefusal(claim.keys, session.inputResponses);
  if (malformed !== undefined) return { kind: 'refused', reason: malformed };
  const actions = answers.map((a) => (a as { action?: unknown }).action);
  if (!(await states.spendOnce(claim.nonce, claim.expiresAt))) {
    return { kind: 'refused', reason: 'the requestState was used already (one retry per URL elicitation round); nothing was sent, call again without it' };
  }
  if (actions.includes('decline')) return { kind: 'ended', reason: `the user declined the upstream's URL elicitation; "${binding.server}/${binding.target}" was not called again` };
  if (actions.includes('cancel')) return { kind: 'ended', reason: `the user dismissed the upstream's URL elicitation; "${binding.server}/${binding.target}" was not called again` };
  return { kind: 'send' };
}
