/**
 * Approval states: the `requestState` of the `input_required` answer by which the judge asks a
 * modern (2026-07-28) caller to approve a call (broker/ask-input.ts). Sealed by the broker's one
 * codec ({@link SealedStates}, kind `approval`: AES-256-GCM, key in the store); a state binds the
 * principal, the tool (advertised name), a digest of the arguments, an expiry and a one-time
 * nonce that the store spends (`spendOnce`).
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../shared/clock.js';
import type { Store } from '../store/store.js';
import { HeldStates, type HeldBinding, type HeldClaim, type HeldStateRefusal } from './held-state.js';
import { relayStateRefusal, type RelayBinding } from './relay-input.js';
import { argumentsDigest, SealedStates, SEALED_STATE_PREFIX, type ApprovalClaim } from './sealed-state.js';

export { argumentsDigest, type ApprovalClaim };
/** Prefix of every approval state (the broker's sealed-state format). */
export const APPROVAL_STATE_PREFIX = SEALED_STATE_PREFIX;

/** What a call must match for its approval state to count. */
export interface ApprovalBinding {
  readonly principal: string;
  readonly tool: string;
  readonly args: unknown;
}

/** Why an approval state was refused; `reason` is one line for the call's record. */
export type StateRefusal = {
  readonly ok: false;
  /**
   * `unreadable`: not an approval state this broker sealed (altered, cut, another format, key or
   * kind); `expired`: past its expiry; `principal` / `tool` / `arguments`: issued for another
   * principal, tool or arguments; `spent`: redeemed before.
   */
  readonly why: 'unreadable' | 'expired' | 'principal' | 'tool' | 'arguments' | 'spent';
  readonly reason: string;
};

export interface ApprovalStatesDeps {
  /** Holds the sealing key and the spent nonces. */
  store: Store;
  clock: Clock;
  /** How long a state stays valid, in ms (`policy.askTimeoutMs`, see src/config/schema.ts). */
  ttlMs: number;
  /** The codec; default one over `store` and `clock`. */
  sealed?: SealedStates;
}

/** Issues and redeems approval states; a store failure rejects, which the runner turns into `guard_error`. */
export class ApprovalStates {
  private readonly sealed: SealedStates;

  constructor(private readonly deps: ApprovalStatesDeps) {
    this.sealed = deps.sealed ?? new SealedStates(deps);
  }

  /** Seals a new state for `binding`, asked by call `callId`; valid for `ttlMs` from now. */
  issue(binding: ApprovalBinding, callId: string): Promise<string> {
    return this.sealed.seal('approval', {
      principal: binding.principal,
      tool: binding.tool,
      argsDigest: argumentsDigest(binding.args),
      expiresAt: this.deps.clock.now() + this.deps.ttlMs,
      nonce: randomUUID(),
      callId,
    });
  }

  /**
   * Opens `state` and checks it against the call, without spending it: the claim, or why it
   * does not count (checked in this order: seal and kind, expiry, principal, tool, arguments).
   */
  async open(state: string, binding: ApprovalBinding): Promise<{ readonly ok: true; readonly claim: ApprovalClaim } | StateRefusal> {
    const opened = await this.sealed.open(state);
    if (!opened.ok && opened.why === 'expired') {
      return refusal('expired', `the approval state expired (an approval is valid for ${this.deps.ttlMs} ms)`);
    }
    if (!opened.ok || opened.kind !== 'approval') return refusal('unreadable', 'the approval state does not verify (altered, or not sealed by this broker)');
    const claim = opened.claim;
    if (claim.principal !== binding.principal) return refusal('principal', 'the approval state was issued to another principal');
    if (claim.tool !== binding.tool) return refusal('tool', `the approval state was issued for another tool, not "${binding.tool}"`);
    if (claim.argsDigest !== argumentsDigest(binding.args)) return refusal('arguments', 'the arguments differ from those the approval was asked for');
    return { ok: true, claim };
  }

  /**
   * Whether `state` is a relay state (broker/relay-input.ts), or a URL-elicitation state
   * (broker/url-input.ts), of an approved round of this very
   * call (principal, upstream, upstream tool, arguments; unexpired), spending its approval: true
   * once, false for any other state and for one redeemed before.
   */
  async redeemRelay(state: string, binding: { principal: string; server: string; method: string; target: string; args: unknown }): Promise<boolean> {
    const opened = await this.sealed.open(state);
    if (!opened.ok || (opened.kind !== 'relay' && opened.kind !== 'url') || opened.claim.approvalNonce === undefined) return false;
    const c = opened.claim;
    const same = c.principal === binding.principal && c.server === binding.server && c.method === binding.method && c.target === binding.target && c.argsDigest === argumentsDigest(binding.args);
    if (!same) return false;
    const at = new Date(this.deps.clock.now()).toISOString();
    return this.deps.store.spendOnce(c.approvalNonce!, new Date(c.expiresAt).toISOString(), at);
  }

  /**
   * Why the relay stage would refuse the retry of `binding`'s call for its relay or
   * URL-elicitation `state` (broker/relay-input.ts `relayStateRefusal`), nothing spent; undefined
   * when it would not, and for a state of any other kind.
   */
  relayRefusal(state: string | undefined, binding: RelayBinding, inputResponses?: Record<string, unknown>): Promise<string | undefined> {
    return relayStateRefusal(this.sealed, state, binding, inputResponses);
  }

  /**
   * Opens a held-request `state` (broker/held-state.ts) for the retry of `binding`'s request,
   * without spending anything: its claim, or why it does not count (altered, expired, issued for
   * another principal, request or arguments). Whether its held request still waits is the held
   * call's to say (transports/held-calls.ts).
   */
  openHeld(state: string, binding: HeldBinding): Promise<{ readonly ok: true; readonly claim: HeldClaim } | HeldStateRefusal> {
    return new HeldStates(this.sealed).open(state, binding);
  }

  /** Spends the claim's nonce: true the first time, false when it was redeemed before. */
  spend(claim: ApprovalClaim): Promise<boolean> {
    const at = new Date(this.deps.clock.now()).toISOString();
    return this.deps.store.spendOnce(claim.nonce, new Date(claim.expiresAt).toISOString(), at);
  }
}

function refusal(why: StateRefusal['why'], reason: string): StateRefusal {
  return { ok: false, why, reason };
}
