/**
 * stdio: a `tools/call` past the SDK `serveStdio` entry once the connection's era is pinned.
 *
 * The entry queues every message in an async pump and hands it to the pinned instance through
 * a channel that checks each message in and out against the SDK's zod envelopes
 * (`isJSONRPCRequest`, `isJSONRPCResultResponse`, `isJSONRPCErrorResponse`): per call, two
 * schema checks and a promise hop for nothing the broker does not already know. For a pinned
 * connection the entry does nothing else with a `tools/call` request but deliver it (its
 * cancellation, listen and `initialize` handling concern other messages), and the channel's
 * request tracking only serves discarding a probe instance, which a pinned connection never does.
 *
 * So a `tools/call` request goes straight to the instance's handlers (the channel's
 * `onmessage`, every wrapper included) when all of these hold:
 * - the instance's channel has delivered a request other than `server/discover` (the entry
 *   delivers only those to a probe, so the connection is pinned to this instance);
 * - every message handed to the entry before it has been delivered or taken by the entry (the
 *   entry is FIFO, so a message the channel delivers settles every one handed before it): the
 *   order the entry would keep is kept;
 * - neither the channel nor the wire is closed.
 * Its answer then goes straight to the wire; any other message, and every answer to a request
 * the channel delivered, takes the SDK's way.
 */
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/server';

type RequestId = string | number;

interface Channel {
  /** The channel's `onmessage` as the instance's wrappers left it. */
  receive?: Transport['onmessage'];
  pinned: boolean;
  closed: boolean;
  /** Requests delivered past the entry, not answered yet. */
  readonly direct: Set<RequestId>;
}

export class StdioEntryLane {
  /** Messages handed to the entry, in order, that its channel has not delivered yet. */
  private readonly owed: unknown[] = [];
  private channel?: Channel;
  private wireClosed = false;

  /** @param wire the connection's own transport (what the entry's channel writes through to). */
  constructor(private readonly wire: Transport) {}

  /**
   * Hands `message` (as it arrived on the wire, after the broker's own checks) to the pinned
   * instance directly when it may, else to `entry` (the SDK's `wire.onmessage`).
   */
  deliver(message: JSONRPCMessage, entry: ((message: JSONRPCMessage) => void) | undefined): void {
    const ch = this.channel;
    const m = message as { id?: unknown; method?: unknown };
    if (
      ch?.pinned &&
      !ch.closed &&
      !this.wireClosed &&
      this.owed.length === 0 &&
      m.method === 'tools/call' &&
      (typeof m.id === 'string' || typeof m.id === 'number') &&
      ch.receive
    ) {
      ch.direct.add(m.id);
      ch.receive(message);
      return;
    }
    this.owed.push(message);
    entry?.(message);
  }

  /** The wire closed: from now on every message takes the SDK's way (which drops it). */
  wireClose(): void {
    this.wireClosed = true;
  }

  /**
   * Wraps a channel's `send` before any other wrapper: an answer to a request delivered past
   * the entry is written to the wire, skipping the channel's checks (its tracking never saw
   * that request). Returns what to call once the instance's wrappers are on the channel.
   */
  attach(channel: Transport): () => void {
    const state: Channel = { pinned: false, closed: false, direct: new Set() };
    const channelSend = channel.send.bind(channel);
    channel.send = (message, options) => {
      const id = (message as { id?: unknown }).id;
      if (state.direct.size > 0 && !('method' in message) && state.direct.delete(id as RequestId)) {
        return state.closed ? Promise.resolve() : this.wire.send(message, options);
      }
      return channelSend(message, options);
    };
    return () => this.watch(channel, state);
  }

  /** Observes what the channel delivers (outermost, after the instance's wrappers). */
  private watch(channel: Transport, state: Channel): void {
    const receive = channel.onmessage;
    state.receive = receive;
    channel.onmessage = (message, extra) => {
      this.settleOwed(message);
      const m = message as { id?: unknown; method?: unknown };
      if (!state.pinned && m.method !== undefined && m.method !== 'server/discover' && m.id !== undefined) state.pinned = true;
      // A cancelled request is not answered: forget it, as the channel's own tracking does.
      if (m.method === 'notifications/cancelled' && state.direct.size > 0) state.direct.delete((message as { params?: { requestId?: RequestId } }).params?.requestId as RequestId);
      receive?.(message, extra);
    };
    const close = channel.onclose;
    channel.onclose = () => {
      state.closed = true;
      state.direct.clear();
      close?.();
    };
    this.channel = state;
  }

  /** The entry delivered `message`: it and everything handed before it are through the entry. */
  private settleOwed(message: unknown): void {
    const at = this.owed.indexOf(message);
    if (at >= 0) this.owed.splice(0, at + 1);
  }
}
