/**
 * Guards one downstream transport (case F04): a request whose id is already in flight on the
 * same session is answered with a JSON-RPC error (-32600) and never dispatched, so two answers
 * can never be cross-wired. A `Set` of the ids keeps `1` and `"1"` apart. Also peeks at
 * `initialize` to hand the client's capabilities to the gateway before the handshake finishes.
 */
import type { Transport, ClientCapabilities, JSONRPCMessage } from '@modelcontextprotocol/server';

/** Each guarded transport's ids in flight ({@link requestIdInFlight}). */
const guarded = new WeakMap<Transport, InflightIds>();

/**
 * Whether request `id` is in flight on `transport` (guarded by {@link guardRequestIds}). For a
 * Streamable HTTP session, whose transport maps each request id to the POST it came on: a
 * duplicate must be refused before the transport sees it, since the transport would map the id
 * to the new POST, and the first request's answer would go there, or nowhere.
 */
export function requestIdInFlight(transport: Transport, id: unknown): boolean {
  return guarded.get(transport)?.has(id) ?? false;
}

export function guardRequestIds(transport: Transport, hooks: { onInitialize?: (caps: ClientCapabilities) => void } = {}): void {
  const inflight = new InflightIds();
  guarded.set(transport, inflight);
  const receive = transport.onmessage;
  const send = transport.send.bind(transport);

  transport.onmessage = (message, extra) => {
    const m = message as { id?: unknown; method?: string; params?: { capabilities?: ClientCapabilities } };
    if (m.method !== undefined && m.id !== undefined && m.id !== null) {
      if (inflight.has(m.id)) {
        void send({
          jsonrpc: '2.0',
          id: m.id,
          error: { code: -32600, message: `Invalid Request: request id ${JSON.stringify(m.id)} is already in flight on this session` },
        } as JSONRPCMessage).catch(() => undefined);
        return;
      }
      inflight.add(m.id);
      if (m.method === 'initialize') hooks.onInitialize?.(m.params?.capabilities ?? {});
    } else if (m.method === 'notifications/cancelled') {
      // The SDK sends no response to a cancelled request; free its id now.
      const id = (m.params as { requestId?: unknown } | undefined)?.requestId;
      if (id !== undefined) inflight.delete(id);
    }
    receive?.(message, extra);
  };

  transport.send = (message, options) => {
    const m = message as { id?: unknown; method?: string };
    if (m.method === undefined && m.id !== undefined) inflight.delete(m.id);
    return send(message, options);
  };
}

/**
 * Ids in flight: strings and numbers as themselves (a `Set` keeps `1` and `"1"` apart), any other
 * id (refused by the shape guard before it gets here, but a cancellation may name one) by its
 * typed text in a set of its own, so it never meets a string id spelled like it.
 */
class InflightIds {
  private readonly plain = new Set<string | number>();
  private readonly other = new Set<string>();

  has(id: unknown): boolean {
    return typeof id === 'string' || typeof id === 'number' ? this.plain.has(id) : this.other.has(otherKey(id));
  }

  add(id: unknown): void {
    if (typeof id === 'string' || typeof id === 'number') this.plain.add(id);
    else this.other.add(otherKey(id));
  }

  delete(id: unknown): void {
    if (typeof id === 'string' || typeof id === 'number') this.plain.delete(id);
    else this.other.delete(otherKey(id));
  }
}

const otherKey = (id: unknown) => `${typeof id}:${String(id)}`;
