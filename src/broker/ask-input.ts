/**
 * The ask path for a modern (2026-07-28) caller: there are no server-to-client requests, so the
 * approval question is answered to the `tools/call` itself as an `input_required` result that
 * carries one `elicitation/create` input request (the same message and schema the legacy
 * elicitation uses, {@link approvalRequestParams}) under {@link APPROVAL_INPUT_KEY}, and a sealed
 * `requestState` (broker/approval-state.ts). The client retries the same call with the
 * `inputResponses` and the `requestState`; the state is checked against the retry (principal,
 * tool, arguments, expiry), spent once, and the answer read: accept approves, decline and cancel
 * refuse as a legacy prompt's do. A state that is no approval state of this very request (it does
 * not verify, is of another kind, expired, or was sealed for another principal, tool or
 * arguments) makes the retry a malformed request (`invalid`: the caller answers -32602
 * `invalid_arguments`, as the relay stage does for its states); one used already, or answered
 * with a decline, stays a refusal of the approval (`approval_required`).
 *
 * Never throws except when the store fails (the sealing key, the spent nonces): the judge's
 * runner turns that into `guard_error` (fail closed).
 */
import { inputRequired, inputResponse, type InputRequiredResult } from '@modelcontextprotocol/server';
import type { ApprovalClaim, ApprovalStates, StateRefusal } from './approval-state.js';
import { approvalRequestParams } from '../router/ask.js';
import type { CallerSession } from './types.js';
import { supportsFormElicitation } from '../upstream/url-elicitations.js';

/** The key of the broker's approval question in `inputRequests` (namespaced like the broker's `_meta` keys). */
export const APPROVAL_INPUT_KEY = 'mcp-broker/approval';

/** How a modern ask ended for this round. Only `approved` lets a call go on. */
export type InputAskVerdict =
  | { readonly kind: 'approved'; readonly claim: ApprovalClaim }
  /** The question, to answer the call with; the call runs on the client's retry. */
  | { readonly kind: 'ask'; readonly result: InputRequiredResult }
  /** The retry's `requestState` is no approval state of this request ({@link approvalStateRefusal}): a malformed request, asked nothing. */
  | { readonly kind: 'invalid'; readonly reason: string }
  | {
      readonly kind: 'refused';
      /**
       * `declined` / `cancelled`: the human said no or dismissed the prompt; `unavailable`: the
       * request declared no elicitation capability; `no_state`: an answer came without the
       * broker's `requestState`; `malformed`: the answer is not an elicitation result; `spent`:
       * the state was used already.
       */
      readonly why: 'declined' | 'cancelled' | 'unavailable' | 'no_state' | 'malformed' | 'spent';
      readonly reason: string;
    };

export interface InputAskOptions {
  /** Builds the question (only when it is asked); names the tool, never raw argument values. */
  readonly message: () => Promise<string>;
  /** Advertised name of the tool asked about. */
  readonly tool: string;
  readonly args: unknown;
  /** The call asking (bound into the state, for the logs of the retry). */
  readonly callId: string;
  readonly states: ApprovalStates;
}

/** Asks `session` (a modern caller) to approve, or reads its answer on the retry; see {@link InputAskVerdict}. */
export async function askThroughInput(session: CallerSession, options: InputAskOptions): Promise<InputAskVerdict> {
  const binding = { principal: session.principal, tool: options.tool, args: options.args };
  const state = session.requestState;
  // A state that is no approval state of this request is malformed whatever the client declared: read first.
  const opened = state === undefined ? undefined : await options.states.open(state, binding);
  if (opened && !opened.ok) return { kind: 'invalid', reason: invalidReason(opened) };
  // The same rule as a legacy session's `elicit`: form-mode elicitation declared (`{}` counts; URL mode only does not).
  if (!supportsFormElicitation(session.clientCapabilities)) {
    return { kind: 'refused', why: 'unavailable', reason: 'approval needed, and the client cannot be asked (its request declared no elicitation capability for form mode)' };
  }
  const answer = inputResponse(session.inputResponses, APPROVAL_INPUT_KEY);
  if (opened === undefined) {
    if (session.inputResponses?.[APPROVAL_INPUT_KEY] !== undefined) {
      return { kind: 'refused', why: 'no_state', reason: "an approval answer came without the broker's requestState; call the tool again to be asked" };
    }
    return ask(options, binding);
  }
  // A valid state without our answer: asked again (MRTR: re-request what is missing), the old state left unspent.
  if (session.inputResponses?.[APPROVAL_INPUT_KEY] === undefined) return ask(options, binding);
  if (answer.kind !== 'elicit') return { kind: 'refused', why: 'malformed', reason: 'the approval answer is not an elicitation result' };
  if (!(await options.states.spend(opened.claim))) {
    return { kind: 'refused', why: 'spent', reason: 'the approval state was used already (one approval runs one call); call the tool again to be asked anew' };
  }
  if (answer.action === 'accept') return { kind: 'approved', claim: opened.claim };
  if (answer.action === 'decline') return { kind: 'refused', why: 'declined', reason: 'approval declined by the user' };
  return { kind: 'refused', why: 'cancelled', reason: 'approval prompt dismissed by the user' };
}

/**
 * Why a modern caller's `requestState` is no approval state of the request of `tool` with `args`
 * (it does not verify, is of another kind, expired, or was sealed for another principal, tool or
 * arguments), read without spending anything; undefined when there is none or it opens for it (a
 * state used already is not told apart here: its retry is `approval_required`). The judge asks
 * this before it parks a retry, so a malformed one is refused as it is without `ask`.
 */
export async function approvalStateRefusal(session: CallerSession, options: Pick<InputAskOptions, 'tool' | 'args' | 'states'>): Promise<string | undefined> {
  if (session.requestState === undefined) return undefined;
  const opened = await options.states.open(session.requestState, { principal: session.principal, tool: options.tool, args: options.args });
  return opened.ok ? undefined : invalidReason(opened);
}

function invalidReason(refusal: StateRefusal): string {
  return `${refusal.reason}; nothing was run or sent, call again without it to be asked anew`;
}

async function ask(options: InputAskOptions, binding: { principal: string; tool: string; args: unknown }): Promise<InputAskVerdict> {
  const requestState = await options.states.issue(binding, options.callId);
  const result = inputRequired({
    inputRequests: { [APPROVAL_INPUT_KEY]: inputRequired.elicit(approvalRequestParams(await options.message())) },
    requestState,
  });
  return { kind: 'ask', result };
}
