/**
 * Sealed approval states: the `requestState` of the `input_required` answer by which the judge
 * asks a modern (2026-07-28) caller to approve a call (broker/ask-input.ts). The state travels
 * through the client and comes back as attacker-controlled input, so it is sealed with
 * AES-256-GCM (node:crypto) under a key kept in the {@link Store} (`secret`), and it binds the
 * principal, the tool (advertised name), a digest of the arguments, an expiry and a one-time
 * nonce that the store spends (`spendOnce`).
 *
 * Wire form: `mb1.` then base64url of IV (12 bytes) ‖ ciphertext ‖ GCM tag (16 bytes), at most
 * {@link MAX_APPROVAL_STATE_CHARS} characters. Encrypted, not only signed, so the client reads
 * neither the principal's name nor the digest. Not the SDK's `createRequestStateCodec`: its
 * expiry reads the wall clock in whole seconds (the broker's clock is injected and
 * `policy.askTimeoutMs` is in ms), its binding needs a `ServerContext` the broker path does not
 * have, and it signs without encrypting.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Clock } from '../shared/clock.js';
import type { Store } from '../store/store.js';
import { stableJson } from '../upstream/roster.js';

/** Name of the sealing key in the store (`Store.secret`). */
export const APPROVAL_STATE_SECRET = 'approval-state/aes-256-gcm';
/** Prefix of every approval state: names the format, so another one is never mistaken for it. */
export const APPROVAL_STATE_PREFIX = 'mb1.';
/** Longest approval state that is opened, in characters; a longer one is refused unread. */
export const MAX_APPROVAL_STATE_CHARS = 4096;

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Bound into every seal (GCM additional data), so no other sealed format opens as this one. */
const AAD = Buffer.from('mcp-broker approval state 1');

/** What an approval state says: this principal was asked about this call, until `expiresAt`. */
export interface ApprovalClaim {
  readonly principal: string;
  /** Advertised tool name. */
  readonly tool: string;
  /** {@link argumentsDigest} of the call's arguments. */
  readonly argsDigest: string;
  /** ms since the epoch, by the broker's clock; the state is refused from then on. */
  readonly expiresAt: number;
  /** One-time id; the store spends it on the first redemption. */
  readonly nonce: string;
  /** The call that asked (its record's `callId`). */
  readonly callId: string;
}

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
   * `unreadable`: not a state this broker sealed (altered, cut, another format or key);
   * `expired`: past its expiry; `principal` / `tool` / `arguments`: issued for another principal,
   * tool or arguments; `spent`: redeemed before.
   */
  readonly why: 'unreadable' | 'expired' | 'principal' | 'tool' | 'arguments' | 'spent';
  readonly reason: string;
};

/** sha256 (hex) of the arguments as canonical JSON (keys sorted): equal arguments, equal digest. */
export function argumentsDigest(args: unknown): string {
  return createHash('sha256').update(stableJson(args ?? {})).digest('hex');
}

export interface ApprovalStatesDeps {
  /** Holds the sealing key and the spent nonces. */
  store: Store;
  clock: Clock;
  /** How long a state stays valid, in ms (`policy.askTimeoutMs`, see src/config/schema.ts). */
  ttlMs: number;
}

/**
 * Issues and redeems approval states. The key is read from the store (made there on first use)
 * once per instance; a store failure rejects, which the runner turns into `guard_error`.
 */
export class ApprovalStates {
  private key?: Promise<Uint8Array>;

  constructor(private readonly deps: ApprovalStatesDeps) {}

  /** Seals a new state for `binding`, asked by call `callId`; valid for `ttlMs` from now. */
  async issue(binding: ApprovalBinding, callId: string): Promise<string> {
    const claim: ApprovalClaim = {
      principal: binding.principal,
      tool: binding.tool,
      argsDigest: argumentsDigest(binding.args),
      expiresAt: this.deps.clock.now() + this.deps.ttlMs,
      nonce: randomUUID(),
      callId,
    };
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', await this.sealingKey(), iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(AAD);
    const body = Buffer.concat([cipher.update(JSON.stringify(claim), 'utf8'), cipher.final()]);
    return APPROVAL_STATE_PREFIX + Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
  }

  /**
   * Opens `state` and checks it against the call, without spending it: the claim, or why it
   * does not count (checked in this order: seal, expiry, principal, tool, arguments).
   */
  async open(state: string, binding: ApprovalBinding): Promise<{ readonly ok: true; readonly claim: ApprovalClaim } | StateRefusal> {
    const claim = this.unseal(state, await this.sealingKey());
    if (!claim) return refusal('unreadable', 'the approval state does not verify (altered, or not sealed by this broker)');
    if (this.deps.clock.now() >= claim.expiresAt) {
      return refusal('expired', `the approval state expired (an approval is valid for ${this.deps.ttlMs} ms)`);
    }
    if (claim.principal !== binding.principal) return refusal('principal', 'the approval state was issued to another principal');
    if (claim.tool !== binding.tool) return refusal('tool', `the approval state was issued for another tool, not "${binding.tool}"`);
    if (claim.argsDigest !== argumentsDigest(binding.args)) return refusal('arguments', 'the arguments differ from those the approval was asked for');
    return { ok: true, claim };
  }

  /** Spends the claim's nonce: true the first time, false when it was redeemed before. */
  spend(claim: ApprovalClaim): Promise<boolean> {
    const at = new Date(this.deps.clock.now()).toISOString();
    return this.deps.store.spendOnce(claim.nonce, new Date(claim.expiresAt).toISOString(), at);
  }

  private sealingKey(): Promise<Uint8Array> {
    if (!this.key) {
      const at = new Date(this.deps.clock.now()).toISOString();
      this.key = this.deps.store.secret(APPROVAL_STATE_SECRET, randomBytes(KEY_BYTES), at).then((key) => {
        if (key.byteLength !== KEY_BYTES) throw new Error(`the stored approval-state key has ${key.byteLength} bytes, not ${KEY_BYTES}`);
        return key;
      });
      // A failed read is tried again on the next call, not remembered.
      this.key.catch(() => (this.key = undefined));
    }
    return this.key;
  }

  private unseal(state: string, key: Uint8Array): ApprovalClaim | undefined {
    if (typeof state !== 'string' || state.length > MAX_APPROVAL_STATE_CHARS || !state.startsWith(APPROVAL_STATE_PREFIX)) return undefined;
    const raw = Buffer.from(state.slice(APPROVAL_STATE_PREFIX.length), 'base64url');
    if (raw.length <= IV_BYTES + TAG_BYTES) return undefined;
    // base64url decoding skips characters it does not know: only the exact encoding counts.
    if (raw.toString('base64url') !== state.slice(APPROVAL_STATE_PREFIX.length)) return undefined;
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

function refusal(why: StateRefusal['why'], reason: string): StateRefusal {
  return { ok: false, why, reason };
}

function asClaim(value: unknown): ApprovalClaim | undefined {
  const c = value as Partial<Record<keyof ApprovalClaim, unknown>> | null;
  if (!c || typeof c !== 'object') return undefined;
  const strings = [c.principal, c.tool, c.argsDigest, c.nonce, c.callId].every((v) => typeof v === 'string');
  return strings && typeof c.expiresAt === 'number' && Number.isFinite(c.expiresAt) ? (c as ApprovalClaim) : undefined;
}
