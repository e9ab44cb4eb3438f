/**
 * Log messages that arrive on a tool call's own response stream from a Streamable HTTP upstream.
 *
 * MCP ties a log message (`notifications/message`) to no request, except by where it travels:
 * a Streamable HTTP server sends a message it relates to a request (`relatedRequestId`) on that
 * request's SSE response stream, and there is no other proof of which call it belongs to. The
 * SDK's client transport hands every message to one `onmessage` without saying which stream it
 * came on, so the broker reads that here, in the `fetch` the transport is given: the response
 * stream of a broker `tools/call` POST (a {@link DIRECT_ID_PREFIX} request) is split into SSE
 * events, each log message on it is taken off the stream and handed to that call's sink, and
 * every other byte passes unchanged and uncopied (an event's chunks are held until the event
 * ends, as the SDK's own parser needs the whole event anyway). A log message taken off keeps its
 * event's `id` line, so resumption (`Last-Event-ID`) still counts it.
 *
 * Requests the upstream sends toward the client (`sampling/createMessage`, `elicitation/create`,
 * `roots/list`) are tied to a call the same way: one on a call's response stream is left on it
 * for the SDK, and its JSON-RPC id is first told to the sink's {@link CallStreamSink.request}, so
 * the request is routed to exactly that call. One on the standalone GET stream is by the
 * transport's rules tied to no call (the server sends there what it relates to no request): its id
 * is told to {@link CallStreamLogSinks.standalone}, so it is refused rather than guessed, and the
 * stream's log messages go on to the SDK as before.
 */
import { DIRECT_ID_PREFIX } from './direct-calls.js';

/** One JSON-RPC notification as it arrived (unvalidated). */
export interface ArrivedNotification {
  method: string;
  params?: unknown;
}

/** Takes the log messages of one call's response stream; `request`, when set, hears the id of each upstream→client request on it before the SDK sees the request. */
export type CallStreamSink = ((notification: ArrivedNotification) => void) & { readonly request?: (id: string | number, method: string) => void };

/**
 * The sink for log messages on the response stream of the direct request `requestId`, asked
 * once as its POST is sent; undefined leaves that stream untouched (its logs reach the SDK).
 * `standalone`, when set, hears the id of each upstream→client request on the standalone GET
 * stream before the SDK sees the request.
 */
export type CallStreamLogSinks = ((requestId: string) => CallStreamSink | undefined) & {
  readonly standalone?: (id: string | number, method: string) => void;
};

/** The body of a direct request starts so (wire/direct-calls.ts builds it in this key order). */
const DIRECT_REQUEST_START = new RegExp(`^\\{"jsonrpc":"2\\.0","id":"(${DIRECT_ID_PREFIX.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\d+)"`);

const LOG_METHOD = 'notifications/message';
const LF = 0x0a;
const CR = 0x0d;

/** Wraps `base` so the log messages on each direct request's response stream go to its sink. */
export function callStreamLogFetch(base: typeof fetch, sinks: CallStreamLogSinks): typeof fetch {
  return async (input: Parameters<typeof fetch>[0], init?: RequestInit): Promise<Response> => {
    // A GET with Last-Event-ID resumes a stream that dropped, a call's response stream among
    // them (the SDK resumes a POST's stream so): not known to be the standalone one, left alone.
    if (init?.method === 'GET' && sinks.standalone && !new Headers(init.headers).has('last-event-id')) {
      const response = await base(input, init);
      if (!response.body || !/^text\/event-stream\b/i.test(response.headers.get('content-type') ?? '')) return response;
      const noting: CallStreamSink = Object.assign(() => undefined, { request: sinks.standalone });
      return withBody(response, response.body.pipeThrough(logEventFilter(noting, { takeLogs: false })));
    }
    const body = init?.method === 'POST' && typeof init.body === 'string' ? init.body : undefined;
    const requestId = body === undefined ? undefined : DIRECT_REQUEST_START.exec(body.slice(0, 96))?.[1];
    const sink = requestId === undefined ? undefined : sinks(requestId);
    const response = await base(input, init);
    if (!sink || !response.body || !/^text\/event-stream\b/i.test(response.headers.get('content-type') ?? '')) return response;
    return withBody(response, response.body.pipeThrough(logEventFilter(sink)));
  };
}

/**
 * A byte stream of SSE events with every `message` event that carries a `notifications/message`
 * handed to `sink` and replaced by its `id` line alone (or nothing); other events pass as they came.
 * With `takeLogs: false` every event passes, and only requests are told to `sink.request`.
 */
export function logEventFilter(sink: CallStreamSink, options: { takeLogs?: boolean } = {}): TransformStream<Uint8Array, Uint8Array> {
  const splitter = new EventSplitter();
  const takeLogs = options.takeLogs ?? true;
  const emit = (parts: Uint8Array[], controller: TransformStreamDefaultController<Uint8Array>) => {
    if (sink.request && REQUEST_NEEDLES.some((needle) => mayCarry(parts, needle))) noteRequest(parts, sink.request);
    const taken = takeLogs && mayCarryLog(parts) ? takeLog(parts, sink) : undefined;
    if (taken === undefined) for (const p of parts) controller.enqueue(p);
    else if (taken.length) controller.enqueue(taken);
  };
  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      splitter.push(chunk, (parts) => emit(parts, controller));
    },
    flush(controller) {
      const rest = splitter.rest();
      if (rest.length) for (const p of rest) controller.enqueue(p);
    },
  });
}

/** Splits a byte stream at SSE event ends (an empty line; lines end with LF, CR or CRLF), without copying. */
class EventSplitter {
  private parts: Uint8Array[] = [];
  private atLineStart = true;
  private afterCR = false;

  push(bytes: Uint8Array, onEvent: (parts: Uint8Array[]) => void): void {
    const chunk = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let start = 0;
    let i = 0;
    let nextLF = chunk.indexOf(LF);
    let nextCR = chunk.indexOf(CR);
    while (i < chunk.length) {
      if (nextLF !== -1 && nextLF < i) nextLF = chunk.indexOf(LF, i);
      if (nextCR !== -1 && nextCR < i) nextCR = chunk.indexOf(CR, i);
      const t = nextLF === -1 ? nextCR : nextCR === -1 ? nextLF : Math.min(nextLF, nextCR);
      if (t === -1) {
        this.atLineStart = false;
        this.afterCR = false;
        break;
      }
      if (t === i && this.afterCR && chunk[t] === LF) {
        // The LF of a CRLF: the line already ended.
        this.afterCR = false;
        i = t + 1;
        continue;
      }
      if (t > i) this.atLineStart = false;
      this.afterCR = chunk[t] === CR;
      if (this.atLineStart) {
        this.parts.push(chunk.subarray(start, t + 1));
        const parts = this.parts;
        this.parts = [];
        start = t + 1;
        onEvent(parts);
      }
      this.atLineStart = true;
      i = t + 1;
    }
    if (start < chunk.length) this.parts.push(start === 0 ? bytes : chunk.subarray(start));
  }

  /** The bytes of an event the stream ended inside. */
  rest(): Uint8Array[] {
    const parts = this.parts;
    this.parts = [];
    return parts;
  }
}

const NEEDLE = new TextEncoder().encode(LOG_METHOD);

const REQUEST_METHODS = new Set(['sampling/createMessage', 'elicitation/create', 'roots/list']);
const REQUEST_NEEDLES = [...REQUEST_METHODS].map((m) => new TextEncoder().encode(m));

/** Whether the event's bytes contain the log method name, also across parts (a rolling tail of the bytes before). */
function mayCarryLog(parts: Uint8Array[]): boolean {
  return mayCarry(parts, NEEDLE);
}

/** Whether the event's bytes contain `needle`, also across parts. */
function mayCarry(parts: Uint8Array[], needle: Uint8Array): boolean {
  const keep = needle.length - 1;
  let tail: Buffer = Buffer.alloc(0);
  for (const part of parts) {
    const p = Buffer.from(part.buffer, part.byteOffset, part.byteLength);
    if (p.indexOf(needle) !== -1) return true;
    if (tail.length && Buffer.concat([tail, p.subarray(0, keep)]).indexOf(needle) !== -1) return true;
    tail = p.length >= keep ? p.subarray(p.length - keep) : Buffer.concat([tail, p]).subarray(-keep);
  }
  return false;
}

/**
 * The replacement bytes of an event that is a log message (its `id` line, or nothing), after
 * handing the message to `sink`; undefined when the event is anything else.
 */
function takeLog(parts: Uint8Array[], sink: (notification: ArrivedNotification) => void): Uint8Array | undefined {
  const parsed = parseEvent(parts);
  if (!parsed) return undefined;
  const { message, id } = parsed;
  const m = message as { method?: unknown; id?: unknown };
  if (typeof message !== 'object' || message === null || Array.isArray(message) || m.method !== LOG_METHOD || 'id' in m) return undefined;
  sink(message as ArrivedNotification);
  return new TextEncoder().encode(id === undefined ? '' : `id: ${id}\n\n`);
}

/** Tells `request` the JSON-RPC id of the event when it is an upstream→client request. */
function noteRequest(parts: Uint8Array[], request: (id: string | number, method: string) => void): void {
  const m = parseEvent(parts)?.message as { method?: unknown; id?: unknown } | undefined;
  if (typeof m !== 'object' || m === null || Array.isArray(m) || !REQUEST_METHODS.has(m.method as string)) return;
  if (typeof m.id === 'string' || typeof m.id === 'number') request(m.id, m.method as string);
}

/** The JSON message of a `message` event and its SSE `id`; undefined for other events and unparsable data. */
function parseEvent(parts: Uint8Array[]): { message: unknown; id: string | undefined } | undefined {
  const text = Buffer.concat(parts).toString('utf8');
  let event = 'message';
  let id: string | undefined;
  const data: string[] = [];
  for (const line of text.split(/\r\n|\r|\n/)) {
    const colon = line.indexOf(':');
    if (colon === 0) continue;
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(line[colon + 1] === ' ' ? colon + 2 : colon + 1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id') id = value;
  }
  if (event !== 'message' || data.length === 0) return undefined;
  try {
    return { message: JSON.parse(data.join('\n')), id };
  } catch {
    return undefined;
  }
}

/**
 * `response` with another body; keeps what the SDK reads besides status and headers (the final
 * URL for redirect messages, `redirected`, the type).
 */
export function withBody(response: Response, body: ReadableStream<Uint8Array>): Response {
  const wrapped = new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  Object.defineProperties(wrapped, {
    url: { value: response.url },
    redirected: { value: response.redirected },
    type: { value: response.type },
  });
  return wrapped;
}
