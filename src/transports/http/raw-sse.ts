/**
 * SSE events of pass-through results written as the bytes the result arrived in (issue 19: the
 * cost of a large result over Streamable HTTP).
 *
 * The SDK's `WebStandardStreamableHTTPServerTransport` writes each event as one string,
 * `event: message\nid: …\ndata: ${JSON.stringify(message)}\n\n`, encoded with a `TextEncoder`.
 * For an 8 MiB result that remembers its bytes (`wire/raw-json.ts`) that decoded the held text
 * (an external string from malloc, then parsed), serialised it again (V8 grows its buffer to 4, 8
 * then 16 MiB, from malloc) and encoded that (8 MiB more): ~45 MB of short-lived allocations
 * outside V8's heap and two 8 MiB strings in it, a call. Written from its bytes, the event costs
 * none of that: in three alternating pairs of partial runs of `npm run bench` on Node 24
 * (bench/README.md, "What each change bought") the HTTP broker's 8 MiB result went from 412–463
 * to 238–311 ms, its 1 MiB result from 60.5–65.1 to 43.5–49.5 ms.
 *
 * {@link writeResultsAsArrived} gives one transport an event writer that writes such a message
 * as the SDK's would, with the result's own bytes in place of its serialisation (the bytes the
 * stdio face writes for it too: the upstream's escapes, and the broker's `_meta` first). Any
 * other message, and a result whose bytes hold a carriage return (JSON whitespace that SSE would
 * take as a line end), is written by the SDK's writer.
 */
import type { JSONRPCMessage, WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';
import { encodeRawMessage } from '../../wire/raw-json.js';

/** The writable end of an SSE stream, as the transport's event writer uses it. */
interface EventSink {
  enqueue(chunk: Uint8Array): void;
}

type WriteEvent = (controller: EventSink, encoder: TextEncoder, message: JSONRPCMessage, eventId?: string) => boolean;

/** The transport's event writer and error hook, by the names SDK 2.4.0 gives them. */
interface EventWriting {
  writeSSEEvent: WriteEvent;
  onerror?: (error: Error) => void;
}

const CARRIAGE_RETURN = 0x0d;
/** What ends a `data:` line whose bytes end in the line's own newline: the blank line that ends the event. */
const EVENT_END = Buffer.from('\n');

/**
 * Installs the raw event writer on `transport`. False (nothing changed) when the transport has
 * no `writeSSEEvent(controller, encoder, message, eventId)` of its own shape: an SDK that moved
 * it keeps writing every event itself (test/transports/raw-sse.test.ts checks the installed one).
 */
export function writeResultsAsArrived(transport: WebStandardStreamableHTTPServerTransport): boolean {
  const t = transport as unknown as Partial<EventWriting>;
  const sdkWrite = t.writeSSEEvent;
  if (typeof sdkWrite !== 'function' || sdkWrite.length !== 4) return false;
  const writing = t as EventWriting;
  writing.writeSSEEvent = function writeEvent(controller, encoder, message, eventId) {
    const parts = encodeRawMessage(message);
    if (!parts || parts.some((part) => part.includes(CARRIAGE_RETURN))) return sdkWrite.call(this, controller, encoder, message, eventId);
    try {
      controller.enqueue(Buffer.from(eventId ? `event: message\nid: ${eventId}\ndata: ` : 'event: message\ndata: '));
      for (const part of parts) controller.enqueue(part);
      controller.enqueue(EVENT_END);
      return true;
    } catch (error) {
      writing.onerror?.(error as Error);
      return false;
    }
  };
  return true;
}
