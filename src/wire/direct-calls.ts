/**
 * Requests to an upstream without the SDK `Protocol` on the hot path (issue 6: every tool call
 * passes here, and the SDK's per-message schema checks, timers and listeners cost more than the
 * rest of the broker path). Used for `tools/call` only; the `Client` keeps everything else:
 * `initialize`, lists, notifications (progress included), upstream→client requests.
 *
 * Requests carry ids of our own, strings (`"mcp-broker:N"`), so they never meet the `Client`'s
 * numeric ids on the same transport; their responses are taken off the transport before the SDK
 * sees them. Behaviour matches `Protocol.request`: an abort or the timeout sends
 * `notifications/cancelled` upstream and rejects with `SdkError` `RequestTimeout` (carrying the
 * abort reason's text, or `Request timed out`); the broker's deadline stage reads the real reason
 * off its own signal. A closed connection rejects every pending request with `SdkError`
 * `ConnectionClosed` (case F08); a late response is dropped. A request sent with a signal (the
 * broker's deadline stage aborts it at the call's deadline) has no timer of its own: one net per
 * connection, a tick every {@link NET_TICK_MS}, times it out between `timeoutMs` and `timeoutMs`
 * + 2 ticks should the signal never fire (issue 19: a timer set and cleared per call cost ~1 % of
 * a call's instructions); a request without one keeps an exact timer. An error response rejects with the
 * `ProtocolError` its code names (`ProtocolError.fromError`). A message that is no well-formed
 * response (neither a result nor an error, or both: `malformedResponse`) rejects at once instead
 * of waiting for the timeout. A request the transport cannot serialise (its `send` throws at
 * once) rejects with `BrokerError('unserialisable')`,
 * `data.sent: false`: nothing reached the upstream, so it is never counted as the upstream's
 * failure.
 */
import { ProtocolError, ProtocolErrorCode, SdkError, SdkErrorCode } from '@modelcontextprotocol/client';
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/client';
import { BrokerError } from '../shared/errors.js';
import { InflightTable } from '../shared/inflight.js';
import { malformedResponse, responseMembers } from './message-shape.js';
import type { CancelSignal } from '../shared/cancel.js';

/** Prefix of every request id sent here. */
export const DIRECT_ID_PREFIX = 'mcp-broker:';

/** The net's tick, in ms: how often a connection looks for requests with a signal that outlived their `timeoutMs`. */
export const NET_TICK_MS = 1_000;

interface Pending {
  /** Who the request is for (a downstream session id), when the caller said. */
  readonly owner?: string;
  resolve(result: Record<string, unknown>): void;
  reject(error: unknown): void;
  cleanup(): void;
  /** The net's tick at which it times the request out (requests with a signal); undefined: the request has a timer of its own. */
  readonly due?: number;
  /** Times the request out (its `timeoutMs` passed). */
  expire(): void;
}

export class DirectCalls {
  private seq = 0;
  /** An {@link InflightTable}: it keeps nothing of a settled request. */
  private readonly pending = new InflightTable<string, Pending>();
  private closed = false;
  /** Ticks of the net so far, and its interval while requests with a signal may be in flight. */
  private tick = 0;
  private net?: NodeJS.Timeout;

  /** Attaches to a transport the SDK `Client` is already connected to (its handlers are wrapped, not replaced). */
  constructor(private readonly transport: Transport) {
    const sdkMessage = transport.onmessage;
    transport.onmessage = (message, extra) => {
      const id = (message as { id?: unknown }).id;
      if (typeof id === 'string' && id.startsWith(DIRECT_ID_PREFIX) && !('method' in message)) return this.settle(id, message);
      sdkMessage?.(message, extra);
    };
    const sdkClose = transport.onclose;
    transport.onclose = () => {
      this.failAll(new SdkError(SdkErrorCode.ConnectionClosed, 'Connection closed'));
      sdkClose?.();
    };
  }

  /** Requests in flight. */
  get size(): number {
    return this.pending.size;
  }

  /** The `owner` a request in flight was sent for; undefined once it settled, or when none was given. */
  ownerOf(requestId: string): string | undefined {
    return this.pending.get(requestId)?.owner;
  }

  /**
   * Sends one request and resolves with its result object. The message is built as
   * `{jsonrpc, id, method, params}` in that order (call-stream-logs.ts recognises it so).
   * @param timeoutMs rejects with `SdkError` `RequestTimeout` after this long, in ms (the caller's deadline plus headroom).
   * @param owner who the request is for (a downstream session id), answered by {@link ownerOf} while it is in flight.
   */
  request(method: string, params: Record<string, unknown>, options: { signal?: CancelSignal; timeoutMs: number; owner?: string }): Promise<Record<string, unknown>> {
    const { signal, timeoutMs, owner } = options;
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.closed) return Promise.reject(new SdkError(SdkErrorCode.ConnectionClosed, 'Connection closed'));
    const id = `${DIRECT_ID_PREFIX}${++this.seq}`;
    return new Promise<Record<string, unknown>>((resolve, reject) => {
      const cancel = (reason: unknown) => {
        if (!this.pending.delete(id)) return;
        cleanup();
        this.notifyCancelled(id, reason);
        reject(ProtocolError.isInstance(reason) || SdkError.isInstance(reason) ? reason : new SdkError(SdkErrorCode.RequestTimeout, String(reason)));
      };
      const expire = () => cancel(new SdkError(SdkErrorCode.RequestTimeout, 'Request timed out', { timeout: timeoutMs }));
      const onAbort = () => cancel(signal!.reason);
      // The signal's owner times the request out; the net is there should it never fire.
      const timer = signal ? undefined : setTimeout(expire, timeoutMs);
      const due = signal ? this.armNet() + Math.ceil(timeoutMs / NET_TICK_MS) + 1 : undefined;
      const cleanup = () => {
        if (timer) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.pending.set(id, { owner, resolve, reject, cleanup, due, expire });
      let sent: Promise<void>;
      try {
        sent = this.transport.send({ jsonrpc: '2.0', id, method, params } as JSONRPCMessage);
      } catch (err) {
        // Serialising the message threw (too deep, a cycle, a BigInt): nothing reached the upstream.
        this.pending.delete(id);
        cleanup();
        return reject(new BrokerError('unserialisable', `the ${method} request cannot be serialised as JSON; nothing was sent`, { cause: err, data: { sent: false } }));
      }
      sent.catch((err: unknown) => {
        if (!this.pending.delete(id)) return;
        cleanup();
        reject(err);
      });
    });
  }

  /** Rejects every pending request with `error`; later requests reject at once. */
  failAll(error: unknown): void {
    this.closed = true;
    this.disarmNet();
    const all = this.pending.values();
    this.pending.clear();
    for (const p of all) {
      p.cleanup();
      p.reject(error);
    }
  }

  /** Starts the net unless it runs; returns its tick now. */
  private armNet(): number {
    this.net ??= setInterval(() => this.sweep(), NET_TICK_MS).unref();
    return this.tick;
  }

  private disarmNet(): void {
    if (this.net) clearInterval(this.net);
    this.net = undefined;
  }

  /** One tick of the net: times out the requests whose tick came; stops when none with a signal is left. */
  private sweep(): void {
    const tick = ++this.tick;
    for (const p of this.pending.values()) if (p.due !== undefined && p.due <= tick) p.expire();
    // Read after the expiries: a request sent while they ran (from a transport's synchronous `send`) is watched too.
    if (!this.pending.values().some((p) => p.due !== undefined)) this.disarmNet();
  }

  private settle(id: string, message: JSONRPCMessage): void {
    const p = this.pending.get(id);
    if (!p) return; // cancelled or timed out: the late answer is dropped
    this.pending.delete(id);
    p.cleanup();
    const m = responseMembers(message as { result?: unknown; error?: unknown }) as { result?: unknown; error?: { code?: unknown; message?: unknown; data?: unknown } };
    const malformed = malformedResponse(m);
    if (malformed) return p.reject(new ProtocolError(ProtocolErrorCode.InvalidRequest, `the upstream answered with ${malformed}`));
    if (m.result !== undefined) return p.resolve(m.result as Record<string, unknown>);
    const code = typeof m.error!.code === 'number' ? m.error!.code : ProtocolErrorCode.InternalError;
    p.reject(ProtocolError.fromError(code, typeof m.error!.message === 'string' ? m.error!.message : 'upstream error', m.error!.data));
  }

  private notifyCancelled(id: string, reason: unknown): void {
    if (this.closed) return;
    const message = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: String(reason) } } as JSONRPCMessage;
    this.transport.send(message).catch(() => undefined);
  }
}
