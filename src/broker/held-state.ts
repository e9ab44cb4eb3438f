/**
 * Sealed states of the kind "held upstream request": the `requestState` of the `input_required`
 * answer by which a modern (2026-07-28) caller is handed a legacy upstream's
 * `sampling/createMessage`, `elicitation/create` or `roots/list` that arrived during its call
 * (transports/held-calls.ts). The client echoes it back on its retry, so it is attacker-controlled
 * input: sealed with AES-256-GCM (node:crypto) under a key kept in the {@link Store} (`secret`),
 * binding the principal, the tool (advertised name), a digest of the arguments, the held call's
 * id, the round (which of the upstream's requests it answers) and an expiry.
 *
 * Wire form: {@link HELD_STATE_PREFIX} then base64url of IV (12 bytes) ‖ ciphertext ‖ GCM tag
 * (16 bytes), at most {@link MAX_HELD_STATE_CHARS} characters. Its own prefix, key name and GCM
 * additional data, so neither an approval state (broker/approval-state.ts) nor any other sealed
 * kind ever opens as this one; {@link isHeldState} tells the kinds apart by the prefix alone.
 * Single use comes from the held call itself: a round is answered once, and a state for a round
 * already answered is refused (`spent`).
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Clock } from '../shared/clock.js';
import type { Store } from '../store/store.js';
import { argumentsDigest } from './approval-state.js';

/** Name of the sealing key in the store (`Store.secret`). */
export const HELD_STATE_SECRET = 'held-state/aes-256-gcm';
/** Prefix of every held-request state: names the kind and format. */
export const HELD_STATE_PREFIX = 'mbh1.';
/** Longest held-request state that is opened, in characters; a longer one is refused unread. */
export const MAX_HELD_STATE_CHARS = 4096;

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const AAD = Buffer.from('mcp-broker held upstream request state 1');

/** What a held-request state says: this principal's call `heldId` is waiting for the answer to round `round`. */
export interface HeldClaim {
  readonly kind: 'held';
  readonly principal: string;
  /** Advertised tool name. */
  readonly tool: string;
  /** {@link argumentsDigest} of the call's arguments. */
  readonly argsDigest: string;
  /** Id of the held call in the broker process that holds it. */
  readonly heldId: string;
  /** Which of the upstream's requests during the call this answers (1, 2, …). */
  readonly round: number;
  /** ms since the epoch, by the broker's clock; refused from then on. */
  readonly expiresAt: number;
}

/** What a retry must match for its held-request state to count. */
export interface HeldBinding {
  readonly principal: string;
  readonly tool: string;
  readonly args: unknown;
}

/**
 * Why a held-request state was refused; `reason` is one line. `unreadable`: altered, cut, or not
 * sealed by this broker's key; `expired`; `principal` / `tool` / `arguments`: issued for another.
 */
export type HeldStateRefusal = { readonly ok: false; readonly why: 'unreadable' | 'expired' | 'principal' | 'tool' | 'arguments'; readonly reason: string };

/** Whether `state` is of the held-request kind (by its prefix; it may still fail to open). */
export function isHeldState(state: unknown): state is string {
  return typeof state === 'string' && state.startsWith(HELD_STATE_PREFIX);
}

export interface HeldStatesDeps {
  /** Holds the sealing key. */
  store: Store;
  clock: Clock;
}

/** Seals and opens held-request states. A store failure (the key) rejects. */
export class HeldStates {
  private key?: Promise<Uint8Array>;

  constructor(private readonly deps: HeldStatesDeps) {}

  /** Seals a state for round `round` of held call `heldId`, valid until `expiresAt` (ms since the epoch). */
  async issue(binding: HeldBinding, heldId: string, round: number, expiresAt: number): Promise<string> {
    const claim: HeldClaim = { kind: 'held', principal: binding.principal, tool: binding.tool, argsDigest: argumentsDigest(binding.args), heldId, round, expiresAt };
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', await this.sealingKey(), iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(AAD);
    const body = Buffer.concat([cipher.update(JSON.stringify(claim), 'utf8'), cipher.final()]);
    return HELD_STATE_PREFIX + Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
  }

  /** Opens `state` and checks it against the retry (in this order: seal, expiry, principal, tool, arguments). */
  async open(state: string, binding: HeldBinding): Promise<{ readonly ok: true; readonly claim: HeldClaim } | HeldStateRefusal> {
    const claim = this.unseal(state, await this.sealingKey());
    if (!claim) return refusal('unreadable', 'the requestState does not verify (altered, or not sealed by this broker)');
    if (this.deps.clock.now() >= claim.expiresAt) return refusal('expired', 'the requestState expired (policy.askTimeoutMs passed)');
    if (claim.principal !== binding.principal) return refusal('principal', 'the requestState was issued to another principal');
    if (claim.tool !== binding.tool) return refusal('tool', `the requestState was issued for another tool, not "${binding.tool}"`);
    if (claim.argsDigest !== argumentsDigest(binding.args)) return refusal('arguments', 'the arguments differ from those of the call the requestState belongs to');
    return { ok: true, claim };
  }

  private sealingKey(): Promise<Uint8Array> {
    if (!this.key) {
      const at = new Date(this.deps.clock.now()).toISOString();
      this.key = this.deps.store.secret(HELD_STATE_SECRET, randomBytes(KEY_BYTES), at).then((key) => {
        if (key.byteLength !== KEY_BYTES) throw new Error(`the stored held-state key has ${key.byteLength} bytes, not ${KEY_BYTES}`);
        return key;
      });
      this.key.catch(() => (this.key = undefined));
    }
    return this.key;
  }

  private unseal(state: string, key: Uint8Array): HeldClaim | undefined {
    if (!isHeldState(state) || state.length > MAX_HELD_STATE_CHARS) return undefined;
    const text64 = state.slice(HELD_STATE_PREFIX.length);
    const raw = Buffer.from(text64, 'base64url');
    if (raw.length <= IV_BYTES + TAG_BYTES || raw.toString('base64url') !== text64) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
      decipher.setAAD(AAD);
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
      const text = Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]).toString('utf8');
      return asClaim(JSON.parse(text));
    } catch {
      return undefined;
    }
  }
}

function refusal(why: HeldStateRefusal['why'], reason: string): HeldStateRefusal {
  return { ok: false, why, reason };
}

function asClaim(value: unknown): HeldClaim | undefined {
  const c = value as Partial<Record<keyof HeldClaim, unknown>> | null;
  if (!c || typeof c !== 'object' || c.kind !== 'held') return undefined;
  const strings = [c.principal, c.tool, c.argsDigest, c.heldId].every((v) => typeof v === 'string');
  return strings && Number.isInteger(c.round) && typeof c.expiresAt === 'number' && Number.isFinite(c.expiresAt) ? (c as HeldClaim) : undefined;
}
