/**
 * Held-request states: the `requestState` of the `input_required` answer by which a modern
 * (2026-07-28) caller is handed a legacy upstream's `sampling/createMessage`, `elicitation/create`
 * or `roots/list` that arrived during its call (transports/held-calls.ts). Sealed by the broker's
 * one codec ({@link SealedStates}, kind `held`: AES-256-GCM, key in the store); a state binds the
 * principal, the tool (advertised name), a digest of the arguments, the held call's id, the round
 * (which of the upstream's requests it answers) and an expiry. {@link isHeldState} tells the kind
 * apart before any opening; only {@link HeldStates.open} trusts it.
 * Single use comes from the held call itself: a round is answered once, and a state for a round
 * already answered is refused (`spent`).
 */
import { argumentsDigest, kindOf, sealedPrefix, type HeldClaim, type SealedStates } from './sealed-state.js';

export type { HeldClaim };
/** Prefix of every held-request state (the broker's sealed-state format, kind `held`). */
export const HELD_STATE_PREFIX = sealedPrefix('held');

/**
 * Why a held retry is refused `approval_required`: its request was allowed outright at its first
 * round and the policy asks now (a reload), so nobody approved what its result would hand over.
 */
export const HELD_UNAPPROVED_REASON =
  'the request this requestState belongs to was not approved when it started (the policy asks now); the held request was not answered, send the request again without it to be asked';

/** What a retry must match for its held-request state to count. */
export interface HeldBinding {
  readonly principal: string;
  readonly tool: string;
  readonly args: unknown;
}

/**
 * Why a held-request state was refused; `reason` is one line. `unreadable`: altered, cut, of
 * another kind, or not sealed by this broker's key; `expired`; `principal` / `tool` /
 * `arguments`: issued for another.
 */
export type HeldStateRefusal = { readonly ok: false; readonly why: 'unreadable' | 'expired' | 'principal' | 'tool' | 'arguments'; readonly reason: string };

/** Whether `state` names the held-request kind (read without opening it; it may still fail to open). */
export function isHeldState(state: unknown): state is string {
  return kindOf(state) === 'held';
}

/** Seals and opens held-request states with `sealed` (the gateway's codec). A store failure (the key) rejects. */
export class HeldStates {
  constructor(private readonly sealed: SealedStates) {}

  /**
   * Seals a state for round `round` of held call `heldId`, valid until `expiresAt` (ms since the
   * epoch); `approved`: the call was approved at its first round ({@link HeldClaim.approved}).
   */
  issue(binding: HeldBinding, heldId: string, round: number, expiresAt: number, approved = false): Promise<string> {
    return this.sealed.seal('held', {
      principal: binding.principal,
      tool: binding.tool,
      argsDigest: argumentsDigest(binding.args),
      heldId,
      round,
      expiresAt,
      ...(approved && { approved: true }),
    });
  }

  /** Opens `state` and checks it against the retry (in this order: seal and kind, expiry, principal, tool, arguments). */
  async open(state: string, binding: HeldBinding): Promise<{ readonly ok: true; readonly claim: HeldClaim } | HeldStateRefusal> {
    const opened = await this.sealed.openAs('held', state);
    if (!opened.ok && opened.why === 'expired') return refusal('expired', 'the requestState expired (policy.askTimeoutMs passed)');
    if (!opened.ok) return refusal('unreadable', 'the requestState does not verify (altered, or not sealed by this broker)');
    const claim = opened.claim;
    if (claim.principal !== binding.principal) return refusal('principal', 'the requestState was issued to another principal');
    if (claim.tool !== binding.tool) return refusal('tool', `the requestState was issued for another tool, not "${binding.tool}"`);
    if (claim.argsDigest !== argumentsDigest(binding.args)) return refusal('arguments', 'the arguments differ from those of the call the requestState belongs to');
    return { ok: true, claim };
  }
}

function refusal(why: HeldStateRefusal['why'], reason: string): HeldStateRefusal {
  return { ok: false, why, reason };
}
