/**
 * The broker's sealed states: every `requestState` the broker hands a modern (2026-07-28) caller
 * in an `input_required` answer. The state comes back from the client as attacker-controlled
 * input (the spec's `basic/patterns/mrtr.mdx`), so each is sealed with AES-256-GCM (node:crypto)
 * under one key kept in the {@link Store} (`secret`), carries a kind and an expiry, and opens only
 * as the kind it was sealed as. Kinds ({@link SealedKinds}):
 *
 * - `approval`: the judge asked the caller to approve a call (broker/approval-state.ts);
 * - `relay`: a modern upstream's own `input_required` relayed to the caller, the upstream's
 *   `requestState` inside (broker/relay-input.ts);
 * - `held`: a legacy upstream's request held during a modern caller's call, handed to the caller
 *   (broker/held-state.ts, transports/held-calls.ts);
 * - `url`: a legacy upstream's -32042 (URL elicitation required) handed to a modern caller as
 *   URL-mode input requests; its retry sends the call again (broker/url-input.ts).
 *
 * Adding a kind is one field in {@link SealedKinds} and one shape check in `KIND_SHAPES`; the
 * format, key, size bound and expiry check are shared.
 *
 * Wire form: `mb3.`, the kind, `.`, then base64url of IV (12 bytes) ‖ ciphertext ‖ GCM tag
 * (16 bytes), at most {@link MAX_SEALED_STATE_CHARS} characters. The kind in the clear lets a
 * caller pick the path before opening ({@link kindOf}); it is not trusted: it is bound into the
 * GCM additional data and repeated inside the ciphertext, so a state opens only as the kind it
 * was sealed as. Encrypted, not only signed, so the client reads neither the principal's name
 * nor what the state binds (an upstream's own state included). Not
 * the SDK's `createRequestStateCodec`: its expiry reads the wall clock in whole seconds (the
 * broker's clock is injected, its limits are in ms), its binding needs a `ServerContext` the
 * broker path does not have, and it signs without encrypting.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { Clock } from '../shared/clock.js';
import type { Store } from '../store/store.js';
import { stableJson } from '../upstream/roster.js';

/** Name of the sealing key in the store (`Store.secret`); the name it had as the approvals key, so the key is kept. */
export const SEALED_STATE_SECRET = 'approval-state/aes-256-gcm';
/** Prefix of every sealed state: names the format, so another one is never mistaken for it; the kind follows ({@link sealedPrefix}). */
export const SEALED_STATE_PREFIX = 'mb3.';
/** Longest state that is opened, in characters; a longer one is refused unread. */
export const MAX_SEALED_STATE_CHARS = 16_384;

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Bound into every seal (GCM additional data) with the kind, so no other sealed format or kind opens as this one. */
const AAD = 'mcp-broker sealed state 3 ';

/** Fields every claim carries. */
export interface ClaimBase {
  /** ms since the epoch, by the broker's clock; the state is refused from then on. */
  readonly expiresAt: number;
}

/** What an approval state says: this principal was asked about this call, until `expiresAt`. */
export interface ApprovalClaim extends ClaimBase {
  readonly principal: string;
  /** Advertised tool name. */
  readonly tool: string;
  /** {@link argumentsDigest} of the call's arguments. */
  readonly argsDigest: string;
  /** One-time id; the store spends it on the first redemption. */
  readonly nonce: string;
  /** The call that asked (its record's `callId`). */
  readonly callId: string;
}

/** What a relay state says: the caller's retry goes to this upstream's `target`, with the upstream's own state. */
export interface RelayClaim extends ClaimBase {
  readonly principal: string;
  /** Server key of the upstream that answered `input_required`. */
  readonly server: string;
  /** `tools/call`, `prompts/get` or `resources/read`. */
  readonly method: string;
  /** The upstream's own name of the tool or prompt, or the resource URI. */
  readonly target: string;
  /** {@link argumentsDigest} of the request's arguments (`{}` for a resource read). */
  readonly argsDigest: string;
  /** The upstream's `requestState`, exactly as it sent it; absent when it sent none. */
  readonly state?: string;
  /** The call that relayed it (its record's `callId`). */
  readonly callId: string;
  /**
   * Set when that round had been approved (a policy `ask`): a one-time id the store spends when
   * the retry uses this state as its approval (broker/approval-state.ts `redeemRelay`), so an
   * approval still runs one call however many rounds the upstream asks.
   */
  readonly approvalNonce?: string;
}

/** What a held-request state says: this principal's call `heldId` is waiting for the answer to round `round`. */
export interface HeldClaim extends ClaimBase {
  readonly principal: string;
  /** Advertised tool name. */
  readonly tool: string;
  /** {@link argumentsDigest} of the call's arguments. */
  readonly argsDigest: string;
  /** Id of the held call in the broker process that holds it. */
  readonly heldId: string;
  /** Which of the upstream's requests during the call this answers (1, 2, …). */
  readonly round: number;
  /**
   * Set when the request was approved at its first round (a policy `ask` or `requireApproval`):
   * its retries are not asked about again while the policy still asks; without it, a policy that
   * asks now (a reload) refuses them `approval_required`.
   */
  readonly approved?: boolean;
}

/**
 * What a URL-elicitation state says: the upstream answered this principal's call of `target`
 * with -32042, the caller was handed its elicitations under `keys`, and the retry that answers
 * them sends the call to that upstream again, once.
 */
export interface UrlClaim extends ClaimBase {
  readonly principal: string;
  /** Server key of the upstream that answered -32042. */
  readonly server: string;
  /** Always `tools/call` (the only request a -32042 is turned into input requests for). */
  readonly method: string;
  /** The upstream's own tool name. */
  readonly target: string;
  /** {@link argumentsDigest} of the call's arguments. */
  readonly argsDigest: string;
  /** The input request keys handed to the caller, one per URL elicitation. */
  readonly keys: readonly string[];
  /** One-time id; spent ({@link SealedStates.spendOnce}) by the retry that answers. */
  readonly nonce: string;
  /** The call that answered with the input requests (its record's `callId`). */
  readonly callId: string;
  /** As {@link RelayClaim.approvalNonce}: set when that round had been approved. */
  readonly approvalNonce?: string;
}

/** Every kind of sealed state, by its discriminator. */
export interface SealedKinds {
  approval: ApprovalClaim;
  relay: RelayClaim;
  held: HeldClaim;
  url: UrlClaim;
}
export type SealedKind = keyof SealedKinds;

/** A state as opened: its kind and claim. */
export type OpenedState = { [K in SealedKind]: { readonly kind: K; readonly claim: SealedKinds[K] } }[SealedKind];

/** Why a state did not open: `unreadable` (altered, cut, another format or key, a shape this build does not know), `expired`. */
export type SealRefusal = { readonly ok: false; readonly why: 'unreadable' | 'expired' };

const isString = (v: unknown): v is string => typeof v === 'string';

/** Shape checks per kind (fields beyond {@link ClaimBase}); a claim that fails is `unreadable`. */
const KIND_SHAPES: { readonly [K in SealedKind]: (c: Record<string, unknown>) => boolean } = {
  approval: (c) => [c.principal, c.tool, c.argsDigest, c.nonce, c.callId].every(isString),
  relay: (c) => [c.principal, c.server, c.method, c.target, c.argsDigest, c.callId].every(isString) && [c.state, c.approvalNonce].every((v) => v === undefined || isString(v)),
  held: (c) => [c.principal, c.tool, c.argsDigest, c.heldId].every(isString) && Number.isInteger(c.round) && (c.approved === undefined || typeof c.approved === 'boolean'),
  url: (c) =>
    [c.principal, c.server, c.method, c.target, c.argsDigest, c.nonce, c.callId].every(isString) &&
    Array.isArray(c.keys) &&
    c.keys.every(isString) &&
    (c.approvalNonce === undefined || isString(c.approvalNonce)),
};

const isKind = (kind: string): kind is SealedKind => Object.hasOwn(KIND_SHAPES, kind);

/** The prefix of every state sealed as `kind`: {@link SEALED_STATE_PREFIX}, the kind, `.`. */
export function sealedPrefix(kind: SealedKind): string {
  return `${SEALED_STATE_PREFIX}${kind}.`;
}

/**
 * The kind `state` names, read without opening it (undefined: not of this format, or a kind this
 * build does not know). Only a hint for choosing the path: the kind's own open verifies it.
 */
export function kindOf(state: unknown): SealedKind | undefined {
  if (typeof state !== 'string' || !state.startsWith(SEALED_STATE_PREFIX)) return undefined;
  const end = state.indexOf('.', SEALED_STATE_PREFIX.length);
  const kind = end < 0 ? '' : state.slice(SEALED_STATE_PREFIX.length, end);
  return isKind(kind) ? kind : undefined;
}

/** sha256 (hex) of the arguments as canonical JSON (keys sorted): equal arguments, equal digest. */
export function argumentsDigest(args: unknown): string {
  return createHash('sha256').update(stableJson(args ?? {})).digest('hex');
}

export interface SealedStatesDeps {
  /** Holds the sealing key. */
  store: Store;
  clock: Clock;
}

/**
 * Seals and opens the broker's states. The key is read from the store (made there on first use)
 * once per instance; a store failure rejects (the runner turns that into `guard_error`).
 */
export class SealedStates {
  private key?: Promise<Uint8Array>;

  constructor(private readonly deps: SealedStatesDeps) {}

  /** The broker's clock (expiries are in its ms). */
  now(): number {
    return this.deps.clock.now();
  }

  /** Seals `claim` as `kind`: the opaque string handed to the caller as `requestState`. */
  async seal<K extends SealedKind>(kind: K, claim: SealedKinds[K]): Promise<string> {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', await this.sealingKey(), iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(AAD + kind));
    const body = Buffer.concat([cipher.update(JSON.stringify({ ...claim, kind }), 'utf8'), cipher.final()]);
    return sealedPrefix(kind) + Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
  }

  /**
   * Opens `state`: its kind and claim when it is intact, of a known kind and shape, and not past
   * its expiry; else why not. Never throws for a bad state; rejects only when the store fails.
   */
  async open(state: unknown): Promise<({ readonly ok: true } & OpenedState) | SealRefusal> {
    const opened = this.unseal(state, await this.sealingKey());
    if (!opened) return { ok: false, why: 'unreadable' };
    if (this.deps.clock.now() >= opened.claim.expiresAt) return { ok: false, why: 'expired' };
    return { ok: true, ...opened };
  }

  /**
   * Opens `state` only as `kind`: as {@link open}, and a state of another kind is `unreadable`
   * (before its expiry is looked at).
   */
  async openAs<K extends SealedKind>(kind: K, state: unknown): Promise<{ readonly ok: true; readonly claim: SealedKinds[K] } | SealRefusal> {
    if (kindOf(state) !== kind) return { ok: false, why: 'unreadable' };
    const opened = await this.open(state);
    if (!opened.ok) return opened;
    // The kind is bound into the seal: an intact state named `kind` is of `kind`.
    return opened.kind === kind ? { ok: true, claim: opened.claim as SealedKinds[K] } : { ok: false, why: 'unreadable' };
  }

  /**
   * Spends a claim's one-time `nonce` in the store, remembered until `expiresAt` (ms since the
   * epoch): true the first time, false when it was spent before. Rejects when the store fails.
   */
  spendOnce(nonce: string, expiresAt: number): Promise<boolean> {
    return this.deps.store.spendOnce(nonce, new Date(expiresAt).toISOString(), new Date(this.deps.clock.now()).toISOString());
  }

  private sealingKey(): Promise<Uint8Array> {
    if (!this.key) {
      const at = new Date(this.deps.clock.now()).toISOString();
      this.key = this.deps.store.secret(SEALED_STATE_SECRET, randomBytes(KEY_BYTES), at).then((key) => {
        if (key.byteLength !== KEY_BYTES) throw new Error(`the stored sealed-state key has ${key.byteLength} bytes, not ${KEY_BYTES}`);
        return key;
      });
      // A failed read is tried again on the next call, not remembered.
      this.key.catch(() => (this.key = undefined));
    }
    return this.key;
  }

  private unseal(state: unknown, key: Uint8Array): OpenedState | undefined {
    if (typeof state !== 'string' || state.length > MAX_SEALED_STATE_CHARS) return undefined;
    const named = kindOf(state);
    if (named === undefined) return undefined;
    const text = state.slice(sealedPrefix(named).length);
    const raw = Buffer.from(text, 'base64url');
    if (raw.length <= IV_BYTES + TAG_BYTES) return undefined;
    // base64url decoding skips characters it does not know: only the exact encoding counts.
    if (raw.toString('base64url') !== text) return undefined;
    let value: unknown;
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(AAD + named));
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
      value = JSON.parse(Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]).toString('utf8'));
    } catch {
      return undefined;
    }
    if (!value || typeof value !== 'object') return undefined;
    const { kind, ...claim } = value as Record<string, unknown>;
    if (kind !== named) return undefined;
    if (typeof claim.expiresAt !== 'number' || !Number.isFinite(claim.expiresAt) || !KIND_SHAPES[named](claim)) return undefined;
    return { kind, claim } as unknown as OpenedState;
  }
}
