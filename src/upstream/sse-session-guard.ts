/**
 * A legacy SSE upstream whose event stream is lost has lost its server session: the server
 * delivers the answers of that session's requests on that stream only. The SDK's
 * `SSEClientTransport` reports the loss to `onerror` and lets its EventSource reconnect, which
 * opens a new server session and switches its endpoint to it without an `initialize`: the calls
 * in flight then wait for their deadline, and every later request goes to a session that was
 * never initialized (a strict server refuses them all; a lenient one serves them unnegotiated).
 *
 * This transport wraps it: once started, an `SseError` from the stream closes the transport, so
 * the connection sees the upstream lost (connection.ts `onLost`): its calls in flight fail at
 * once and it is dialled again, with an `initialize`, as a crashed stdio child is.
 */
import { SseError, type JSONRPCMessage, type SSEClientTransport, type Transport } from '@modelcontextprotocol/client';

export class SseSessionGuard implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: Transport['onmessage'];
  private started = false;
  private closing = false;

  constructor(private readonly inner: SSEClientTransport) {
    inner.onmessage = (message: JSONRPCMessage) => this.onmessage?.(message);
    inner.onclose = () => this.onclose?.();
    inner.onerror = (error) => {
      this.onerror?.(error);
      // Before the first endpoint the dial itself fails (start rejects); after it, the session is gone.
      if (this.started && !this.closing && error instanceof SseError) {
        this.closing = true;
        void inner.close().catch(() => undefined);
      }
    };
  }

  setProtocolVersion(version: string): void {
    this.inner.setProtocolVersion?.(version);
  }

  async start(): Promise<void> {
    await this.inner.start();
    this.started = true;
  }

  send(message: JSONRPCMessage): Promise<void> {
    return this.inner.send(message);
  }

  close(): Promise<void> {
    this.closing = true;
    return this.inner.close();
  }
}
