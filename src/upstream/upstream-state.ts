/**
 * A modern upstream's `requestState`, sealed inside the broker's own (issue 14 §3): when an
 * upstream's `input_required` is relayed to a modern caller, the state the caller echoes back must
 * lead to the same upstream and tool for the same principal, and nobody may steer it elsewhere or
 * forge it. The upstream's own state travels inside, unchanged.
 *
 * Sealed with the SDK's `createRequestStateCodec` (HMAC-SHA256, an expiry): signed, not
 * encrypted, so the caller can read the upstream's state (as it could without the broker) but not
 * change any of it. A state that fails (bad MAC, expired, malformed, another principal, another
 * tool) is refused with `BrokerError` `state_refused`; the reason is one fixed word.
 *
 * Not used on the call path yet: relaying `input_required` to modern callers waits for the modern
 * downstream. An approvals codec is being written beside it (src/broker/); the two are to be unified.
 */
import { randomBytes } from 'node:crypto';
import { createRequestStateCodec, type RequestStateCodec } from '@modelcontextprotocol/server';
import { BrokerError } from '../shared/errors.js';

/** How long a sealed state is accepted after it was made, in seconds (the SDK codec's default, ten minutes). */
export const DEFAULT_STATE_TTL_SECONDS = 600;

/** What a sealed state carries: where the retry goes, for whom, and the upstream's own state. */
export interface UpstreamState {
  /** The server key of the upstream that answered `input_required`. */
  readonly upstream: string;
  /** The upstream's own tool name. */
  readonly toolName: string;
  /** The principal whose call it was; the retry must come from the same one. */
  readonly principal: string;
  /** The upstream's `requestState`, exactly as it sent it; absent when it sent none. */
  readonly state?: string;
}

export interface UpstreamStateSealOptions {
  /** HMAC key, at least 32 bytes; default 32 random bytes (then only this process opens what it sealed). */
  key?: Uint8Array | string;
  /** Lifetime of a sealed state, in seconds; default {@link DEFAULT_STATE_TTL_SECONDS}. */
  ttlSeconds?: number;
}

/** Seals and opens {@link UpstreamState}s. */
export class UpstreamStateSeal {
  private readonly codec: RequestStateCodec<UpstreamState>;

  /** Throws `RangeError` for a key shorter than 32 bytes. */
  constructor(options: UpstreamStateSealOptions = {}) {
    this.codec = createRequestStateCodec<UpstreamState>({
      key: options.key ?? randomBytes(32),
      ttlSeconds: options.ttlSeconds ?? DEFAULT_STATE_TTL_SECONDS,
    });
  }

  /** The opaque string handed to the caller as our `requestState`. */
  seal(state: UpstreamState): Promise<string> {
    return this.codec.mint({ ...state });
  }

  /**
   * The state inside `sealed`, when it is intact, unexpired, and was made for `expected`'s
   * principal, upstream and tool. Rejects with `BrokerError` `state_refused` otherwise.
   */
  async open(sealed: string, expected: Omit<UpstreamState, 'state'>): Promise<UpstreamState> {
    let state: UpstreamState;
    try {
      // No bind callback is configured, so the codec never reads its context argument.
      state = await this.codec.verify(sealed, undefined as never);
    } catch (err) {
      throw new BrokerError('state_refused', `the requestState was refused (${(err as Error).message})`);
    }
    if (state.principal !== expected.principal || state.upstream !== expected.upstream || state.toolName !== expected.toolName) {
      throw new BrokerError('state_refused', 'the requestState was refused (made for another call)');
    }
    return state;
  }
}
