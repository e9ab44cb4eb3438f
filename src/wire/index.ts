/**
 * The byte-level hot path (DESIGN.md "Folders", issue 6 and issue 13 §8): what a legacy
 * `tools/call` crosses between the bytes a client wrote and the bytes an upstream answered,
 * without the SDK `Protocol` and without re-serialising results. It imports only `shared/`
 * (`.dependency-cruiser.cjs`); `upstream/`, `broker/` and `transports/` use it.
 *
 * One call, in order:
 *
 * 1. **In, downstream** (`framing.ts`): stdio bytes are split into lines by {@link LineFramer}
 *    (linear, BOM dropped, a line over `maxMessageBytes` dropped and answered from the id its
 *    ends show). Over HTTP the SDK's transport parses the body.
 * 2. **The downstream lane** (`direct-tools-call.ts`): a well-formed `tools/call` of a legacy
 *    session is taken off the transport and handed to the session's handler; anything else
 *    (a task-augmented call, odd params, an id already in flight, every other method) goes to
 *    the SDK `Server` unchanged. A modern (2026-07-28) call on stdio takes its own lane
 *    (`direct-modern-call.ts`) when its params are plain and its envelope is one the SDK accepted
 *    on the connection; the lane answers what it can answer as the SDK would (plain results,
 *    errors) and hands any other outcome to the SDK with the request. Over HTTP a modern call
 *    goes through the SDK. On stdio, once the connection is pinned to an era, a `tools/call`
 *    request reaches these lanes past the SDK `serveStdio` entry's pump and its channel's
 *    envelope checks, in the order the entry would keep (`stdio-entry-lane.ts`).
 * 3. **The upstream lane** (`direct-calls.ts`): the broker path sends the call upstream with an
 *    id of its own (`mcp-broker:N`) and takes its answer off the transport before the SDK
 *    `Client` sees it; everything else stays with the `Client`. To a Streamable HTTP upstream,
 *    that call's response stream is split into SSE events on the way in
 *    (`call-stream-logs.ts`), and its log messages are handed to the call, not the SDK.
 * 4. **In, upstream** (`framing.ts`, `raw-json.ts`): a response line of at least
 *    {@link RAW_MIN_BYTES} is parsed by its parts, its result's bytes remembered and frozen.
 * 5. **Out** (`raw-json.ts`, `framing.ts`): a result that passed the broker unchanged (or only
 *    gained `_meta` through {@link withMeta}) is written as the bytes it arrived in
 *    ({@link encodeMessage}); {@link writeMessage} writes the first message of a burst at once
 *    and corks the rest into one `writev`, honouring backpressure. While the process's stdout is
 *    congested ({@link stdoutPressure}, `output-pressure.ts`) stdio upstreams are not read.
 */
export { DEFAULT_MAX_MESSAGE_BYTES, LineFramer, oversizeError, serializeMessage, writeMessage, type FramerEvents } from './framing.js';
export { encodeMessage, knownJsonBytes, LAZY_STRING_MIN_BYTES, messageIdFromEnds, parseResponseLine, RAW_MIN_BYTES, rawJsonString, withMeta, type MessageEnds, type RawJsonString } from './raw-json.js';
export { DIRECT_ID_PREFIX, DirectCalls } from './direct-calls.js';
export { callStreamLogFetch, logEventFilter, type ArrivedNotification, type CallStreamLogSinks } from './call-stream-logs.js';
export { routeToolsCallDirectly, type DirectCallExtra, type DirectCallHandler, type DirectCallParams } from './direct-tools-call.js';
export { routeModernToolsCallDirectly, type LaneReplay, type ModernCallHandler, type ModernDirectLane, type ModernLaneOptions } from './direct-modern-call.js';
export { OutputPressure, stdoutPressure } from './output-pressure.js';
export { StdioEntryLane } from './stdio-entry-lane.js';
