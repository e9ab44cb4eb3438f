/**
 * The judge stage (seed 002_7bce204a86c1c7ba.txt steps 1-3; issue 3 §1). Resolves the tool in
 * the registry (unknown, `disabled` or `gone` → `unregistered`; `down`, a tool of an upstream
 * that is not running → `upstream_error` with the registry's reason, before any budget is
 * spent or breaker counted), checks its pin (a changed
 * definition → `unregistered`, reason `changed`), and applies the policy ({@link decide}).
 * `deny` and an unanswered `ask` settle the call here, so neither ever reaches an upstream.
 *
 * Ask: when the downstream client declared elicitation, the human is asked with
 * `elicitation/create` (the message names the tool, what the call would do when the tool says
 * (`approvalDetail`), and a scrubbed summary of the arguments;
 * `policy.askTimeoutMs`); accept → the call goes on (a first use is remembered), decline,
 * cancel or no answer in time → `approval_required`. Without elicitation → `approval_required`,
 * and the reason says how to approve (`mcp-broker approve <tool>`). A downstream cancel while
 * asking → `cancelled`.
 *
 * A modern caller (`session.era === 'modern'`) is asked through an input request instead
 * (broker/ask-input.ts): the first round settles the call `approval_required` with
 * `call.inputRequired` set, which the broker answers as the `input_required` result (and
 * records like any refusal); the retry carrying the sealed `requestState` and an accepting
 * answer goes on exactly as an approved legacy call. A state that is no state of this call
 * (does not verify, of another kind, expired, issued for another principal, tool or arguments)
 * is a malformed request: `invalid_arguments` with `call.requestError` -32602, as without `ask`,
 * before anyone is asked or it parks; a genuine approval state spent already →
 * `approval_required` saying so. The tool does not run.
 *
 * A modern caller's held-request retry whose state opened (transports/held-calls.ts) joins its
 * call in flight without passing this stage, once {@link heldRetryJoins} lets it: judged on the
 * policy as it is now, a refusal refuses it, and an `ask` or `requireApproval` the call did not
 * pass at its first round (`CallRequest.onApproved` was not told) refuses it `approval_required`
 * (`CallRequest.heldRetryUnapproved`); neither is asked, parked or run.
 *
 * A modern caller's retry whose held-request state was refused (`CallRequest.heldStateRefused`,
 * transports/held-calls.ts) is settled here `invalid_arguments` with that reason once the policy
 * does not refuse it: it runs nothing, so an `ask` or `requireApproval` is never put to anyone,
 * and its held state is never read as an approval state. So is the retry of an asked tool whose
 * relay or URL-elicitation state the relay stage would refuse (altered, expired, made for another
 * call: broker/relay-input.ts `relayStateRefusal`), with `call.requestError` -32602 as there.
 * One that passes redeems the approval its round carries, once: the retry goes on without being
 * asked or parked again (`policy.askMode: "park"` included); one whose approval was spent (or
 * whose round was not approved) is `approval_required` saying so, not parked either.
 *
 * Pins, approvals and first uses live in the {@link Store}; a store failure throws, which the
 * runner turns into `guard_error` (fail closed). Sets `call.readOnly` for the retry stage.
 */
import type { InputRequiredResult } from '@modelcontextprotocol/server';
import { isoTime, type Clock } from '../shared/clock.js';
import type { Logger } from '../shared/logger.js';
import type { Approval, ObservedTool, PinState, Store } from '../store/store.js';
import { plainApproveCommand, type ApproveHint } from './approve-hint.js';
import { ApprovalStates } from './approval-state.js';
import { askApproval, stillLive } from '../router/ask.js';
import { toAbortSignal } from '../shared/cancel.js';
import { joinLines } from '../shared/errors.js';
import { approvalStateRefusal, askThroughInput } from './ask-input.js';
import { decide, type CompiledPolicy, type Verdict } from './policy.js';
import { toolCallBinding } from './relay-input.js';
import { kindOf } from './sealed-state.js';
import type { ParkDecision } from './types.js';
import { SETTLED, splitStage, type Stage } from './runner.js';
import { refuse, type BrokerCall, type ToolTarget } from './types.js';

/** Longest argument summary shown in an approval prompt, in characters. */
export const ASK_SUMMARY_MAX_CHARS = 600;

export interface JudgeDeps {
  /** The registry's view of an advertised name; undefined when never known. */
  resolve(name: string): ToolTarget | undefined;
  /** Whether a target is read-only (annotations, per-tool `readOnly` or `policy.readOnly`). */
  isReadOnly(target: ToolTarget): boolean;
  policy: CompiledPolicy;
  store: Store;
  clock: Clock;
  /** How long an approval prompt waits, in ms (`policy.askTimeoutMs`). */
  askTimeoutMs: number;
  /** Makes argument values safe to show: the scrubber's `value`. */
  scrubArgs: (args: unknown) => unknown;
  /**
   * Whether a principal is privileged for tools that act on shared state
   * (`ToolTarget.requiresPrivilege`); the gateway passes `isPrivilegedPrincipal` over
   * `principals`. Absent: no principal is (fail closed).
   */
  isPrivileged?: (principal: string) => boolean;
  /** The approve command refusals name ({@link approveHint}); default the plain `mcp-broker approve …`. */
  approveHint?: ApproveHint;
  /**
   * The approval inbox (src/tasks/engine.ts `TaskEngine.park`): given an `ask`, parks the call and
   * resolves with the operator's decision, or undefined when this call is not to park (then the
   * client is asked as usual). Absent: nothing parks.
   */
  park?: (call: BrokerCall, why: string) => Promise<ParkDecision | undefined>;
  /**
   * Seals and redeems the approval states of modern callers; default one over `store` and
   * `clock`, valid for `askTimeoutMs`.
   */
  approvalStates?: ApprovalStates;
  logger?: Logger;
}

export function judgeStage(deps: JudgeDeps): Stage {
  const states = deps.approvalStates ?? new ApprovalStates({ store: deps.store, clock: deps.clock, ttlMs: deps.askTimeoutMs });
  return splitStage(
    'judge',
    (call) => {
      const target = call.target ?? deps.resolve(call.request.name);
      if (!target) return settle(call, 'unregistered', `no tool named "${call.request.name}"`);
      call.target = target;
      if (!runnable(call, target)) return SETTLED;
      const at = isoTime(deps.clock.now());
      const read = factsOf(call, target, at, deps.policy.config.firstUse === 'ask');
      return isThenable(read) ? Promise.resolve(read).then((facts) => judge(call, target, facts, at)) : judge(call, target, read, at);
    },
  );

  /** Whether the registry lets `target` run (else the call is settled: `down` → `upstream_error`, `disabled` or `gone` → `unregistered`); sets `call.readOnly`. */
  function runnable(call: BrokerCall, target: ToolTarget): boolean {
    if (target.state === 'down') return settle(call, 'upstream_error', target.reason ?? `upstream "${target.server}" is not running`);
    if (target.state === 'disabled') return settle(call, 'unregistered', target.reason ?? `tool "${target.name}" is disabled by configuration`);
    if (target.state === 'gone') return settle(call, 'unregistered', `tool "${target.name}" is gone: upstream "${target.server}" is not serving it now`);
    call.readOnly = deps.isReadOnly(target);
    return true;
  }

  /** The store's facts on `target` for the caller (the broker's own tools change only with the broker itself: not pinned). */
  function factsOf(call: BrokerCall, target: ToolTarget, at: string, firstUse: boolean): Facts | Promise<Facts> {
    const seen = target.source === 'upstream' && target.hash && target.definition ? { hash: target.hash, definition: target.definition } : undefined;
    return readFacts(deps.store, { name: target.name, principal: call.session.principal, at, seen, firstUse });
  }

  /** The policy's verdict on `target` for the caller, given the store's facts. */
  function verdictOn(call: BrokerCall, target: ToolTarget, facts: Facts): Verdict {
    return verdictFor(deps, target, call.session.principal, call.readOnly === true, facts);
  }

  /** Why the relay stage would refuse a modern caller's retry of an upstream tool for its relay or URL-elicitation state; undefined when it would not. */
  function relayRefusal(call: BrokerCall, target: ToolTarget): Promise<string | undefined> | undefined {
    if (call.session.era !== 'modern' || call.session.requestState === undefined || target.source !== 'upstream') return undefined;
    return states.relayRefusal(call.session.requestState, toolCallBinding(call, target), call.session.inputResponses);
  }

  /**
   * Whether a modern caller's retry of an upstream tool redeems the approval its relay or
   * URL-elicitation state carries (spending it: true once); false for such a state whose approval
   * does not count (spent, or its round was not approved); undefined for any other retry.
   */
  async function relayApproval(call: BrokerCall, target: ToolTarget): Promise<boolean | undefined> {
    const state = call.session.requestState;
    if (call.session.era !== 'modern' || state === undefined || target.source !== 'upstream') return undefined;
    if (await states.redeemRelay(state, toolCallBinding(call, target))) return true;
    // A relay state of this very call (relayRefusal passed it) whose approval does not count: not an approval state that fails to verify.
    return kindOf(state) === 'relay' || kindOf(state) === 'url' ? false : undefined;
  }

  /**
   * Why a modern caller's retry carrying a state of no relay, URL-elicitation or held kind is
   * malformed for `target` (broker/ask-input.ts `approvalStateRefusal`); undefined when it has no
   * state or an approval state of this very call (used already or not: that is the ask's to say).
   */
  function unapprovable(call: BrokerCall, target: ToolTarget): Promise<string | undefined> | undefined {
    if (call.session.era !== 'modern' || call.session.requestState === undefined) return undefined;
    return approvalStateRefusal(call.session, { tool: target.name, args: call.request.args, states });
  }

  /**
   * After a wait for a human or the inbox, the call is judged again on what holds now: a `deny`
   * a reload added, a pin that changed, a tool disabled or gone meanwhile refuses it; an `ask`
   * that still stands is the approval just given. Settles the call and returns false when refused.
   */
  async function stillAllowed(call: BrokerCall, at: string): Promise<boolean> {
    const target = deps.resolve(call.request.name);
    if (!target) return settle(call, 'unregistered', `no tool named "${call.request.name}" any more after the approval; it did not run`);
    call.target = target;
    if (!runnable(call, target)) return false;
    const verdict = verdictOn(call, target, await factsOf(call, target, at, false));
    return verdict.kind !== 'refuse' || settle(call, verdict.outcome, `${verdict.reason} (judged again after the approval; it did not run)`);
  }

  /** The verdict on the facts: at once when the call is allowed outright; a promise when someone must approve it. */
  function judge(call: BrokerCall, target: ToolTarget, facts: Facts, at: string): typeof GO | typeof SETTLED | Promise<typeof GO | typeof SETTLED> {
    const verdict = verdictOn(call, target, facts);
    if (verdict.kind === 'refuse') return settle(call, verdict.outcome, verdict.reason);
    // A refused held retry runs and answers nothing whatever an approval would say: never asked
    // or parked (its state is no approval state), refused for its state as the policy allows it.
    if (call.request.heldStateRefused !== undefined) return settle(call, 'invalid_arguments', call.request.heldStateRefused);
    // A held retry judged not to join its request ({@link heldRetryJoins}): never run, whatever the policy says by now.
    if (call.request.heldRetryUnapproved !== undefined) return settle(call, 'approval_required', `${verdict.kind === 'ask' ? verdict.reason : 'the tool requires approval on every call'}; ${call.request.heldRetryUnapproved}`);
    const asks = verdict.kind === 'ask' || target.requireApproval === true;
    // The common case: allowed, nobody to ask; the call goes on in the same turn (issue 6).
    if (!asks && !call.approved) return GO;
    return approve(call, target, verdict, asks, at);
  }

  /** A call someone must approve (or approved already): parked, asked, and checked to be still heard. */
  async function approve(call: BrokerCall, target: ToolTarget, verdict: Verdict, asks: boolean, at: string): Promise<typeof GO | typeof SETTLED> {
    const { name } = target;
    const principal = call.session.principal;
    // A retry the relay stage would refuse for its state runs nothing either: refused as it is without an ask, before anyone is asked or it parks.
    const unrelayable = asks ? await relayRefusal(call, target) : undefined;
    if (unrelayable !== undefined) return settleInvalid(call, unrelayable);
    const relayed = asks && call.request.approvedBy === undefined ? await relayApproval(call, target) : undefined;
    // A retry whose state is no state of this call at all (garbage, another kind's, another tool's, arguments' or principal's, expired) is malformed: refused as it is without an ask, before it parks.
    const malformed = asks && relayed === undefined && call.request.approvedBy === undefined ? await unapprovable(call, target) : undefined;
    if (malformed !== undefined) return settleInvalid(call, malformed);
    // The retry of a round approved before, which the upstream answered with its own input
    // requests: its relay state carries that approval, once (broker/relay-input.ts). Neither
    // parked nor asked again; a relay state whose approval does not count is refused as it is.
    if (asks && call.request.approvedBy !== undefined) {
      // Decided in the approval inbox before this run (a parked task taken up again).
      call.approved = true;
    } else if (relayed === false) {
      const why = verdict.kind === 'ask' ? verdict.reason : 'the tool requires approval on every call';
      return settle(call, 'approval_required', `${why}; ${SPENT_RELAY_APPROVAL}`);
    } else if (relayed === true) {
      if (verdict.kind === 'ask' && verdict.ground === 'first_use') await deps.store.markUsed(name, principal, at);
      call.approved = true;
    } else if (asks && deps.park) {
      const parked = await deps.park(call, verdict.kind === 'ask' ? verdict.reason : 'the tool requires approval on every call');
      if (parked) {
        if (!parked.approved) {
          if (parked.stillParked) call.recordDeferred = true;
          return settle(call, parked.cancelled ? 'cancelled' : 'approval_required', parked.reason);
        }
        if (verdict.kind === 'ask' && verdict.ground === 'first_use') await deps.store.markUsed(name, principal, at);
        call.approved = true;
      }
    }
    // Whether the approval came after a wait in this run (the inbox's or a human's), during which what it judged may have changed.
    let waited = call.approved && call.request.approvedBy === undefined;
    if (call.approved) {
      // Approved in the approval inbox, or by the approval its relay state carried.
    } else if (verdict.kind === 'ask') {
      const refusal = await ask(call, target, verdict.reason, deps, states);
      if (refusal) {
        settleRefusal(call, refusal);
        return SETTLED;
      }
      if (verdict.ground === 'first_use') await deps.store.markUsed(name, principal, at);
      call.approved = waited = true;
    } else if (target.requireApproval) {
      // The tool demands approval on every call (seed 003); asked here, outside the deadline.
      const refusal = await ask(call, target, 'the tool requires approval on every call', deps, states, false);
      if (refusal) {
        settleRefusal(call, refusal);
        return SETTLED;
      }
      call.approved = waited = true;
    }
    if (waited && !(await stillAllowed(call, isoTime(deps.clock.now())))) return SETTLED;
    // Seed 003: after an approval, nothing runs for a caller that can no longer hear the answer.
    // Checked here, before budget and deadline, so the round trip is not the tool's time.
    if (call.approved && call.request.approvedBy === undefined && !(await stillLive(call.session, toAbortSignal(call.request.signal)))) {
      return settle(call, 'cancelled', `approved, but the caller's connection closed before "${name}" ran; it did not run`);
    }
    if (call.approved) call.request.onApproved?.();
    return GO;
  }
}

/** The policy's verdict on `target` for `principal`, given the store's facts. */
function verdictFor(deps: JudgeDeps, target: ToolTarget, principal: string, readOnly: boolean, facts: Facts): Verdict {
  const { name } = target;
  return decide(deps.policy, {
    name,
    principal,
    readOnly,
    pin: facts.pin,
    approval: facts.approval,
    firstUseDone: facts.firstUseDone,
    toolDefault: target.policyDefault,
    requiresPrivilege: target.requiresPrivilege === true,
    privilegeReason: target.privilegeReason,
    privileged: target.requiresPrivilege === true && deps.isPrivileged?.(principal) === true,
    // Named only by the refusal of a changed pin.
    ...(facts.pin === 'changed' && { approveCommand: hint(deps, name, principal, principal) }),
  });
}

/**
 * Whether a modern caller's held-request retry of the tool `name` (transports/held-calls.ts: it
 * answers an upstream's request held during a call already judged and running, and sends nothing
 * new upstream) may join that call now, judged on the policy as it is: not when the judge would
 * refuse the call (unknown, disabled, gone or down; `deny`; a changed pin), nor when the call
 * must be approved now (`ask`, `requireApproval`) and `approved` (the call was approved at its
 * first round) is false. Nothing is asked, parked or recorded here: a retry that may not join is
 * sent through the broker path with `CallRequest.heldRetryUnapproved`, which refuses and records it.
 * A store failure rejects.
 */
export async function heldRetryJoins(deps: JudgeDeps, name: string, principal: string, approved: boolean): Promise<boolean> {
  const target = deps.resolve(name);
  if (!target || target.state === 'down' || target.state === 'disabled' || target.state === 'gone') return false;
  const seen = target.source === 'upstream' && target.hash && target.definition ? { hash: target.hash, definition: target.definition } : undefined;
  const facts = await readFacts(deps.store, { name: target.name, principal, at: isoTime(deps.clock.now()), seen, firstUse: deps.policy.config.firstUse === 'ask' });
  const verdict = verdictFor(deps, target, principal, deps.isReadOnly(target), facts);
  if (verdict.kind === 'refuse') return false;
  return approved || (verdict.kind !== 'ask' && target.requireApproval !== true);
}

/** Why the retry carrying a relay state whose approval does not count did not run. */
const SPENT_RELAY_APPROVAL =
  'the approval this requestState carried was used already, or its round was not approved (one approval runs one call); it did not run, call the tool again without it to be asked anew';

/** The judge's ticket: the call goes on (nothing is handed to the way out). */
const GO = true;

/** Settles `call` `invalid_arguments` for its malformed `requestState`, answered JSON-RPC -32602 as the relay stage answers it. */
function settleInvalid(call: BrokerCall, reason: string): typeof SETTLED {
  refuse(call, 'invalid_arguments', reason);
  call.requestError = { code: -32602, message: reason };
  return SETTLED;
}

/** Refuses `call` and settles it at the judge. */
function settle(call: BrokerCall, outcome: Parameters<typeof refuse>[1], reason: string): typeof SETTLED {
  refuse(call, outcome, reason);
  return SETTLED;
}

/** Why an ask did not approve: the call's reason, and whether it was cancelled or is to be answered with an input request. */
interface AskRefusal {
  reason: string;
  cancelled?: boolean;
  /** The retry's `requestState` is no approval state of this call: `invalid_arguments`, -32602. */
  invalid?: boolean;
  /** A modern caller's first round: the `input_required` result to answer with. */
  inputRequired?: InputRequiredResult;
}

function settleRefusal(call: BrokerCall, refusal: AskRefusal): void {
  if (refusal.cancelled) return refuse(call, 'cancelled', refusal.reason);
  if (refusal.invalid) return void settleInvalid(call, refusal.reason);
  refuse(call, 'approval_required', refusal.reason);
  if (refusal.inputRequired) call.inputRequired = refusal.inputRequired;
}

/**
 * Asks the human through {@link askApproval} (legacy) or {@link askThroughInput} (modern);
 * resolves undefined when they accepted, else why not.
 */
async function ask(
  call: BrokerCall,
  target: ToolTarget,
  why: string,
  deps: JudgeDeps,
  states: ApprovalStates,
  /** Whether `mcp-broker approve` can stand in for the prompt (not for `requireApproval`). */
  approvable = true,
): Promise<AskRefusal | undefined> {
  const message = async () => {
    const detail = target.approvalDetail ? await target.approvalDetail(call.request.args, call.session) : [];
    return [
      `Allow the tool "${target.name}" (${target.server}/${target.toolName}) to run?`,
      `Why you are asked: ${why}.`,
      ...detail.map((line) => cut(String(deps.scrubArgs(joinLines(line))))),
      `Arguments: ${summarize(deps.scrubArgs(call.request.args))}`,
    ].join('\n');
  };
  const how = approvable
    ? `; approve it with \`${hint(deps, target.name, call.session.principal)}\``
    : '; it runs only with a client that supports elicitation, to ask on each call';
  if (call.session.era === 'modern') {
    const verdict = await askThroughInput(call.session, { message, tool: target.name, args: call.request.args, callId: call.callId, states });
    if (verdict.kind === 'approved') {
      deps.logger?.debug({ callId: call.callId, tool: target.name, askedIn: verdict.claim.callId }, 'approved through an input request');
      return undefined;
    }
    if (verdict.kind === 'invalid') return { reason: verdict.reason, invalid: true };
    if (verdict.kind === 'ask') {
      return { reason: `${why}; asked through an input request (input_required), the tool runs when the client retries with the approval`, inputRequired: verdict.result };
    }
    return { reason: `${why}; ${verdict.reason}${verdict.why === 'unavailable' ? how : ''}` };
  }
  const answer = await askApproval(call.session, { message: await message(), timeoutMs: deps.askTimeoutMs, signal: toAbortSignal(call.request.signal) });
  if (answer.approved) return undefined;
  if (call.request.signal.aborted) return { reason: 'cancelled by the client while waiting for approval', cancelled: true };
  if (answer.why === 'failed') deps.logger?.warn({ callId: call.callId, tool: target.name, err: answer.reason }, 'approval prompt failed');
  return { reason: `${why}; ${answer.reason}${answer.why === 'declined' || answer.why === 'cancelled' ? '' : how}` };
}

/** The approve command for `tool` (for `forPrincipal` when given), shaped for the caller `principal`. */
function hint(deps: JudgeDeps, tool: string, principal: string, forPrincipal?: string): string {
  const privileged = deps.isPrivileged?.(principal) === true;
  return deps.approveHint ? deps.approveHint(tool, { principal: forPrincipal, privileged }) : plainApproveCommand(tool, forPrincipal);
}

/** One line of JSON, cut at {@link ASK_SUMMARY_MAX_CHARS}. */
function summarize(args: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(args) ?? '{}';
  } catch {
    text = '(arguments that cannot be shown)';
  }
  return cut(text);
}

function cut(text: string): string {
  return text.length > ASK_SUMMARY_MAX_CHARS ? `${text.slice(0, ASK_SUMMARY_MAX_CHARS - 1)}…` : text;
}

interface Facts {
  pin: PinState | undefined;
  approval: Approval['decision'] | undefined;
  firstUseDone: boolean;
}

const isThenable = (v: unknown): v is PromiseLike<unknown> => typeof (v as { then?: unknown } | null | undefined)?.then === 'function';

/**
 * The store's facts for one call: the pin observed for the principal (upstream tools only), the approval,
 * the first use (when `firstUse` asks). At once when every read answers at once (SQLite), so
 * the call path keeps its turn; else one promise for all three (any thenable counts as one).
 * A read that throws or rejects fails the call closed (the runner's `guard_error`).
 */
function readFacts(store: Store, q: { name: string; principal: string; at: string; seen?: ObservedTool; firstUse: boolean }): Facts | Promise<Facts> {
  const reads: unknown[] = [];
  try {
    reads.push(q.seen ? store.observePin(q.name, q.principal, q.seen, q.at) : undefined);
    reads.push(store.getApproval(q.name, q.principal));
    reads.push(q.firstUse ? store.hasUsed(q.name, q.principal) : true);
  } catch (err) {
    // The reads already under way must not reject unheard.
    for (const r of reads) if (isThenable(r)) Promise.resolve(r).catch(() => undefined);
    throw err;
  }
  const facts = ([pin, approval, used]: unknown[]): Facts => ({
    pin: pin as PinState | undefined,
    approval: (approval as Approval | undefined)?.decision,
    firstUseDone: used as boolean,
  });
  return reads.some(isThenable) ? Promise.all(reads).then(facts) : facts(reads);
}
