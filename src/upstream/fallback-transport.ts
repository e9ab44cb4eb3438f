/**
 * The transport of a URL-only upstream (`{"url": …}` without `type`, as Cursor and Claude Code
 * write it): Streamable HTTP first; when the server answers the first message (the SDK client's
 * `initialize`) with an HTTP 4xx, the same URL is dialled as legacy SSE and the message sent
 * there, as those clients do. Any other failure, and every failure after the first message, is
 * the failure of the transport in use. An era probe (`server/discover`, sent before `initialize`
 * by a negotiating client) decides nothing: a 2025 server refuses it with a 4xx over Streamable
 * HTTP too, and the `initialize` after it is the first message that counts. A message sent while
 * the first one is deciding (concurrent requests) waits for it, and goes where it went.
 */
import type { JSONRPCMessage, Transport, TransportSendOptions } from '@modelcontextprotocol/client';
import { httpStatusOf } from '../shared/sdk-errors.js';

/** Streamable HTTP, then legacy SSE on a 4xx to the first message. Owns and closes both. */
export class FallbackTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: Transport['onmessage'];
  private current: Transport;
  private decided = false;
  /** While the first message is on the primary: its errors are thrown to `send`, not reported. */
  private probing = false;
  /** The first message's send while it decides the transport: a message sent meanwhile waits for it. */
  private deciding?: Promise<void>;

  /**
   * @param primary the Streamable HTTP transport, not started
   * @param fallback makes the legacy SSE transport, not started; called at most once
   */
  constructor(primary: Transport, private readonly fallback: () => Promise<Transport>) {
    this.current = primary;
    this.attach(primary);
  }

  /** The transport in use: the Streamable HTTP one until a fallback happened. */
  get active(): Transport {
    return this.current;
  }

  get sessionId(): string | undefined {
    return this.current.sessionId;
  }

  setProtocolVersion(version: string): void {
    this.current.setProtocolVersion?.(version);
  }

  start(): Promise<void> {
    return this.current.start();
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    // Sent while the first message decides (concurrent requests, such as the first listing's):
    // it goes where that one went, not to a primary about to be dropped.
    if (this.deciding) await this.deciding.catch(() => undefined);
    if (this.decided) return this.current.send(message, options);
    if ((message as { method?: unknown }).method === 'server/discover') return this.current.send(message, options);
    this.decided = true;
    const deciding = this.decide(message, options);
    this.deciding = deciding;
    try {
      await deciding;
    } finally {
      this.deciding = undefined;
    }
  }

  /** Sends the first message on the primary; on a 4xx, switches to legacy SSE and sends it there. */
  private async decide(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    this.probing = true;
    try {
      await this.current.send(message, options);
    } catch (err) {
      this.probing = false;
      if (!isClientError(err)) throw err;
      const primary = this.current;
      const sse = await this.fallback();
      // Switch first: the primary's close must not read as this transport closing.
      this.current = sse;
      this.attach(sse);
      await primary.close().catch(() => undefined);
      await sse.start();
      await sse.send(message, options);
    } finally {
      this.probing = false;
    }
  }

  close(): Promise<void> {
    return this.current.close();
  }

  /** Forwards the events of `inner` while it is the transport in use. */
  private attach(inner: Transport): void {
    inner.onmessage = (message, extra) => {
      if (inner === this.current) this.onmessage?.(message, extra);
    };
    inner.onerror = (error) => {
      if (inner === this.current && !this.probing) this.onerror?.(error);
    };
    inner.onclose = () => {
      if (inner === this.current) this.onclose?.();
    };
  }
}

/** An HTTP 4xx from the SDK's Streamable HTTP transport (`SdkHttpError.status`). */
function isClientError(err: unknown): boolean {
  const status = httpStatusOf(err);
  return status !== undefined && status >= 400 && status < 500;
}
