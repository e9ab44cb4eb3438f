/**
 * Guards one downstream transport (case F04): a request whose id is already in flight on the
 * same session is answered with a JSON-RPC error (-32600) and never dispatched, so two answers
 * can never be cross-wired. A `Set` of the ids keeps `1` and `"1"` apart. Also peeks at
 * `initialize` to hand the client's capabilities to the gateway before the handshake finishes.
 */
import type { Transport, ClientCapabilities, JSONRPCMessage } from '@modelcontextprotocol/server';

export function guardRequestIds(transport: Transport, hooks: { onInitialize?: (caps: ClientCapabilities) => void } = {}): void {
  const inflight = new Set<unknown>();
  const receive = transport.onmessage;
  const send = transport.send.bind(transport);
  // An id that is neither (refused by the shape guard before the SDK answers it) by its text.
  const key = (id: unknown) => (typeof id === 'string' || typeof id === 'number' ? id : `${typeof id}:${String(id)}`);

  transport.onmessage = (message, extra) => {
    const m = message as { id?: unknown; method?: string; params?: { capabilities?: ClientCapabilities } };
    if (m.method !== undefined && m.id !== undefined && m.id !== null) {
      const k = key(m.id);
      if (inflight.has(k)) {
        void send({
          jsonrpc: '2.0',
          id: m.id,
          error: { code: -32600, message: `Invalid Request: request id ${JSON.stringify(m.id)} is already in flight on this session` },
        } as JSONRPCMessage).catch(() => undefined);
        return;
      }
      inflight.add(k);
      if (m.method === 'initialize') hooks.onInitialize?.(m.params?.capabilities ?? {});
    } else if (m.method === 'notifications/cancelled') {
      // The SDK sends no response to a cancelled request; free its id now.
      const id = (m.params as { requestId?: unknown } | undefined)?.requestId;
      if (id !== undefined) inflight.delete(key(id));
    }
    receive?.(message, extra);
  };

  transport.send = (message, options) => {
    const m = message as { id?: unknown; method?: string };
    if (m.method === undefined && m.id !== undefined) inflight.delete(key(m.id));
    return send(message, options);
  };
}
