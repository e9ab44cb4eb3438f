/**
 * The ask path for a modern (2026-07-28) caller: there are no server-to-client requests, so the
 * approval question is answered to the `tools/call` itself as an `input_required` result that
 * carries one `elicitation/create` input request (the same message and schema the legacy
 * elicitation uses, {@link approvalRequestParams}) under {@link APPROVAL_INPUT_KEY}, and a sealed
 * `requestState` (broker/approval-state.ts). The client retries the same call with the
 * `inputResponses` and the `requestState`; the state is checked against the retry (principal,
 * tool, arguments, expiry), spent once, and the answer read: accept approves, decline and cancel
 * refuse as a legacy prompt's do.
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
  | {
      readonly kind: 'refused';
      /**
       * `declined` / `cancelled`: the human said no or dismissed the prompt; `unavailable`: the
       * request declared no elicitation capability; `no_state`: an answer came without the
       * broker's `requestState`; `malformed`: the answer is not an elicitation result; else why
       * the state did not count ({@link StateRefusal}).
       */
      readonly why: 'declined' | 'cancelled' | 'unavailable' | 'no_state' | 'malformed' | StateRefusal['why'];
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
  // The same rule as a legacy session's `elicit`: form-mode elicitation declared (`{}` counts; URL mode only does not).
  if (!supportsFormElicitation(session.clientCapabilities)) {
    return { kind: 'refused', why: 'unavailable', reason: 'approval needed, and the client cannot be asked (its request declared no elicitation capability for form mode)' };
  }
  const binding = { principal: session.principal, tool: options.tool, args: options.args };
  const answer = inputResponse(session.inputResponses, APPROVAL_INPUT_KEY);
  const state = session.requestState;
  if (state === undefined) {
    if (session.inputResponses?.[APPROVAL_INPUT_KEY] !== undefined) {
      return { kind: 'refused', why: 'no_state', reason: "an approval answer came without the broker's requestState; call the tool again to be asked" };
    }
    return ask(options, binding);
  }
  const opened = await options.states.open(state, binding);
  if (!opened.ok) return { kind: 'refused', why: opened.why, reason: `${opened.reason}; it did not run, call the tool again to be asked anew` };
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

async function ask(options: InputAskOptions, binding: { principal: string; tool: string; args: unknown }): Promise<InputAskVerdict> {
  const requestState = await options.states.issue(binding, options.callId);
  const result = inputRequired({
    inputRequests: { [APPROVAL_INPUT_KEY]: inputRequired.elicit(approvalRequestParams(await options.message())) },
    requestState,
  });
  return { kind: 'ask', result };
}
