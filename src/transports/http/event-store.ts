/**
 * A bounded in-memory `EventStore` for Streamable HTTP resumption (`Last-Event-ID`): one per
 * session, holding at most `maxEvents` messages (`http.resumeEvents`, default 1000, in the
 * schema) and at most `maxBytes` of them ({@link DEFAULT_RESUME_BYTES}, estimated JSON size; a
 * message larger than that is not kept); the oldest are dropped first. A client that resumes after an event that was dropped
 * gets what is still held of that stream, so resumption is best effort beyond the bound.
 *
 * A message of {@link COMPACT_FROM_BYTES} or more is kept as its JSON encoding (for a result
 * that passes through unchanged, the very bytes it arrived in: `wire/raw-json.ts`), not as
 * the parsed object with its strings and the line it was parsed from: about half the memory
 * (issue 6: broker http RSS after the benchmark). It is parsed again only to be replayed.
 *
 * Event ids are `<streamId>|<seq>`: the stream is known from the id alone, even once the event
 * itself has been dropped.
 *
 * A message is stored as it was sent, scrubbed with the secrets known then. One stored before a
 * reload added a secret (the scrubber's `generation` moved since) is replayed scrubbed again with
 * the secrets of now (`Scrubber.mediaStrings`); one stored since, as it is. A string JSON-RPC `id`
 * or a key holding a secret is replayed redacted (fail closed: the client cannot match that answer).
 */
import { StringDecoder } from 'node:string_decoder';
import type { EventId, EventStore, StreamId, JSONRPCMessage } from '@modelcontextprotocol/server';
import { approximateJsonBytes } from '../../broker/record.js';
import type { Scrubber } from '../../shared/scrub.js';
import { encodeMessage, encodeRawMessage } from '../../wire/raw-json.js';

interface StoredEvent {
  readonly seq: number;
  readonly streamId: StreamId;
  /** The message, or its JSON encoding when it is large. */
  readonly message: JSONRPCMessage | Encoded;
  /** JSON size of `message` in bytes: estimated, exact when it is kept encoded. */
  readonly bytes: number;
  /** The scrubber's `generation` when it was stored (0 without a scrubber). */
  readonly generation: number;
}

/**
 * Most bytes of messages one session keeps for resumption: 8 MiB. Counting events alone let a
 * few large results pin hundreds of MiB (issue 6: 424 MiB after the benchmark).
 */
export const DEFAULT_RESUME_BYTES = 8 * 1024 * 1024;

/** Messages at least this large (estimated JSON bytes) are kept encoded, as is every pass-through result: 16 KiB. */
export const COMPACT_FROM_BYTES = 16 * 1024;

/**
 * A large message as the JSON text it is sent as, held in a V8 heap string: a large one gets
 * its own mapping, returned to the system once collected. A Buffer, or the external string
 * `Buffer#toString` makes past ~1 MiB, comes from malloc, and a few of them kept alive pin the
 * allocator's freed memory around them (issue 6: +40 MiB RSS for 7 MiB of kept results).
 */
class Encoded {
  readonly json: string;

  constructor(encoded: string | Buffer[]) {
    // Each part is whole UTF-8 (the parts split at JSON punctuation), so each decodes alone:
    // an all-ASCII text then becomes a one-byte string. A streaming TextDecoder would make
    // UTF-16 of it, twice the memory.
    this.json = typeof encoded === 'string' ? encoded : encoded.map(decodeInHeap).join('');
  }

  decode(): JSONRPCMessage {
    return JSON.parse(this.json) as JSONRPCMessage;
  }
}

/**
 * Bytes decoded at a time by {@link decodeInHeap}: 512 KiB, under the ~1 MiB past which Node makes
 * a one-byte text an external string.
 */
const DECODE_SLICE_BYTES = 512 * 1024;

/**
 * `part` as UTF-8 text in V8's heap: decoded a slice at a time through a `StringDecoder`, which
 * carries a character split between slices over to the next, so the text is what one decode
 * gives. `Buffer#toString` of a large one-byte text makes an external string from malloc instead
 * (class comment).
 */
function decodeInHeap(part: Buffer): string {
  if (part.length <= DECODE_SLICE_BYTES) return part.toString('utf8');
  const decoder = new StringDecoder('utf8');
  const slices: string[] = [];
  for (let at = 0; at < part.length; at += DECODE_SLICE_BYTES) slices.push(decoder.write(part.subarray(at, at + DECODE_SLICE_BYTES)));
  slices.push(decoder.end());
  return slices.join('');
}

/** What a dropped event's slot holds until the array is compacted. */
const DROPPED: StoredEvent = Object.freeze({ seq: 0, streamId: '', message: {} as JSONRPCMessage, bytes: 0, generation: 0 });

const SEPARATOR = '|';

export class BoundedEventStore implements EventStore {
  private events: StoredEvent[] = [];
  private head = 0;
  private seq = 0;
  private bytes = 0;

  /**
   * @param maxEvents most events kept; 0 keeps none (ids are still issued).
   * @param maxBytes most bytes of events kept, estimated; default {@link DEFAULT_RESUME_BYTES}.
   * @param scrubber the gateway's: an event stored before its `generation` moved is replayed
   *   scrubbed again. Absent: events are replayed as stored.
   */
  constructor(
    private readonly maxEvents: number,
    private readonly maxBytes = DEFAULT_RESUME_BYTES,
    private readonly scrubber?: Scrubber,
  ) {}

  /** Events currently held. */
  get size(): number {
    return this.events.length - this.head;
  }

  async storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    const seq = ++this.seq;
    const id = `${streamId}${SEPARATOR}${seq}`;
    if (this.maxEvents === 0) return id;
    // A pass-through result is sized by its bytes: estimating it would read (decode) its held texts.
    const raw = encodeRawMessage(message);
    let bytes = raw ? raw.reduce((sum, part) => sum + part.length, 0) : approximateJsonBytes(message);
    if (bytes > this.maxBytes) return id;
    let kept: JSONRPCMessage | Encoded = message;
    if (raw || bytes >= COMPACT_FROM_BYTES) {
      kept = new Encoded(raw ?? encodeMessage(message));
      // What is held is the encoded text, escapes included.
      bytes = Buffer.byteLength(kept.json);
      if (bytes > this.maxBytes) return id;
    }
    this.events.push({ seq, streamId, message: kept, bytes, generation: this.scrubber?.generation ?? 0 });
    this.bytes += bytes;
    while (this.size > this.maxEvents || this.bytes > this.maxBytes) {
      this.bytes -= this.events[this.head]!.bytes;
      // Let the dropped message go now, not at the next compaction.
      this.events[this.head++] = DROPPED;
    }
    // Compact now and then so the array does not grow without bound.
    if (this.head > 1024 && this.head * 2 > this.events.length) {
      this.events = this.events.slice(this.head);
      this.head = 0;
    }
    return id;
  }

  async getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    return parseEventId(eventId)?.streamId;
  }

  async replayEventsAfter(
    lastEventId: EventId,
    { send }: { send: (eventId: EventId, message: JSONRPCMessage) => Promise<void> },
  ): Promise<StreamId> {
    const parsed = parseEventId(lastEventId);
    if (!parsed) throw new Error('unknown event id');
    for (let i = this.head; i < this.events.length; i++) {
      const event = this.events[i]!;
      if (event.streamId !== parsed.streamId || event.seq <= parsed.seq) continue;
      let message = event.message instanceof Encoded ? event.message.decode() : event.message;
      // Priming events carry an empty message: nothing to replay.
      if (Object.keys(message).length === 0) continue;
      // Scrubbed when stored; a secret added since is scrubbed now (a copy: the stored one stays).
      if (this.scrubber && event.generation !== this.scrubber.generation) message = this.scrubber.mediaStrings(message);
      await send(`${event.streamId}${SEPARATOR}${event.seq}`, message);
    }
    return parsed.streamId;
  }
}

function parseEventId(eventId: string): { streamId: string; seq: number } | undefined {
  const at = eventId.lastIndexOf(SEPARATOR);
  if (at <= 0) return undefined;
  const seq = Number(eventId.slice(at + 1));
  if (!Number.isSafeInteger(seq) || seq < 1) return undefined;
  return { streamId: eventId.slice(0, at), seq };
}
