/**
 * The broker's ask path: one approval question put to the human behind a downstream session
 * through `elicitation/create` (form mode, no fields: accepting is approving). Shared by the
 * judge (`policy` action `ask`, broker/judge.ts and broker/primitive-judge.ts) and the router
 * (`requireApproval` function tools, seed 003_208e7d69e85a85fd.txt), so both ask the same way
 * and read the answer the same way. It lives in router/ (DESIGN.md "Folders": approvals), the
 * lower of the two layers, so both import it along the one-way arrow broker → router.
 *
 * Never throws: every way an ask can end is an {@link AskVerdict}.
 */
import type { ElicitRequestFormParams } from '@modelcontextprotocol/server';
import { isRequestTimeout } from '../shared/sdk-errors.js';
import { joinLines } from '../shared/errors.js';
import type { CallerSession } from './call.js';

/**
 * The `elicitation/create` params of an approval question: form mode, no fields (accepting is
 * approving). The same for a legacy session's live request and a modern caller's input request
 * (broker/ask-input.ts).
 */
export function approvalRequestParams(message: string): ElicitRequestFormParams {
  return { mode: 'form', message, requestedSchema: { type: 'object', properties: {} } };
}

/** How an ask ended. Only `approved` lets a call go on. */
export type AskVerdict =
  | { readonly approved: true }
  | {
      readonly approved: false;
      /**
       * `declined` / `cancelled`: the human said no or dismissed the prompt; `timeout`: no answer
       * within `timeoutMs`; `unavailable`: the client declared no elicitation; `failed`: the
       * request itself failed (connection gone, protocol error).
       */
      readonly why: 'declined' | 'cancelled' | 'timeout' | 'unavailable' | 'failed';
      /**
       * One line for the call's `reason`. Not cut: a `failed` one carries the client's own error
       * message whole, as a cut through a secret in it would leave its first characters
       * unrecognised; whoever passes it on scrubs it, then cuts it (the scrub stage, a
       * primitive's record and refusal: `cutReason` of broker/failure.ts).
       */
      readonly reason: string;
    };

export interface AskOptions {
  /** The question, one or two lines; names the tool, never raw argument values. */
  readonly message: string;
  /** How long the prompt waits, in ms (`policy.askTimeoutMs`, see src/config/schema.ts). */
  readonly timeoutMs: number;
  /** Aborts the prompt (the call's signal). */
  readonly signal?: AbortSignal;
}

/** Asks `session` to approve; see {@link AskVerdict} for the ways it ends. */
export async function askApproval(session: CallerSession, options: AskOptions): Promise<AskVerdict> {
  if (!session.elicit) {
    return { approved: false, why: 'unavailable', reason: 'approval needed, and the client cannot be asked (it declared no elicitation capability)' };
  }
  try {
    const answer = await session.elicit(approvalRequestParams(options.message), { timeoutMs: options.timeoutMs, signal: options.signal });
    if (answer.action === 'accept') return { approved: true };
    if (answer.action === 'decline') return { approved: false, why: 'declined', reason: 'approval declined by the user' };
    return { approved: false, why: 'cancelled', reason: 'approval prompt dismissed by the user' };
  } catch (err) {
    if (isRequestTimeout(err) && !options.signal?.aborted) {
      return { approved: false, why: 'timeout', reason: `approval not given within ${options.timeoutMs} ms` };
    }
    const text = err instanceof Error ? joinLines(err.message) : String(err);
    return { approved: false, why: 'failed', reason: `approval could not be asked: ${text}` };
  }
}

/** How long the liveness ping after an approval waits for the client's answer, in ms. */
export const LIVENESS_PING_TIMEOUT_MS = 10_000;

/**
 * Whether the caller can still receive an answer, after an approval (seed 003). `isLive()` alone
 * is not enough: a client that answers "accept" and closes at once sends the answer and its EOF
 * together, and the EOF is read in a later event-loop turn than the answer. So the caller is
 * also pinged on the call's stream (when it can be): a client that has closed never answers, and
 * its close rejects the ping. No answer within {@link LIVENESS_PING_TIMEOUT_MS} counts as gone.
 */
export async function stillLive(session: CallerSession, signal: AbortSignal): Promise<boolean> {
  if (!session.isLive()) return false;
  if (!session.ping) return true;
  try {
    await session.ping({ timeoutMs: LIVENESS_PING_TIMEOUT_MS, signal });
  } catch {
    return false;
  }
  return session.isLive();
}
