/**
 * A plain `tools/call` of a legacy (2025-03-26 to 2025-11-25) Streamable HTTP session, answered
 * on its SSE stream without the web-standard adaptation (issue 19): through the SDK's
 * `WebStandardStreamableHTTPServerTransport` a call cost a web `Request` built from the Node one,
 * the message's schema parse, a `ReadableStream` with a `TextEncoder`, a `Response` and
 * `@hono/node-server` piping that stream into the Node response; about half of the CPU the SDK's
 * own HTTP server spends on a call (`npm run bench`: its floor). This lane does what that
 * `POST` handling does for such a request and writes the stream's bytes to the Node response
 * itself.
 *
 * It stands in for the SDK's `handlePostRequest` and nothing else: the stream is registered in
 * the transport's own maps as that handler registers it (under a fresh stream id, the request id
 * mapped to it), the priming event and the keep-alive are the transport's own
 * (`writePrimingEvent`, `startKeepAlive`), and the message goes to the transport's `onmessage`
 * (the session's lanes and guards). So the answer, and every notification or request sent while
 * the call runs, is written by the transport's `send` as before (event ids, the event store,
 * closing the stream once answered), and a client that reconnects with `Last-Event-ID` is
 * replayed and followed by the transport as before. The bytes are the same as the SDK path's
 * (test/e2e/legacy-http-lane.test.ts compares them).
 *
 * Taken (the rest goes to the SDK as it came; {@link serveLegacyCall} returns undefined):
 * - a body of only `jsonrpc: "2.0"`, `id` (a string or a safe integer), `method: "tools/call"`
 *   and `params` the legacy `tools/call` lane takes (`wire/direct-tools-call.ts`: a `name`,
 *   `arguments` an object or absent, no `task`, no related task; a `progressToken` a string or a
 *   safe integer, as the SDK's schema wants it);
 * - an `Accept` naming both `application/json` and `text/event-stream`, a JSON `Content-Type`, an
 *   `MCP-Protocol-Version` absent or one the transport supports, HTTP/1.1 (chunked answers);
 * - a transport initialized, not closed, without JSON responses, DNS-rebinding checks or scope
 *   challenges of its own (the broker's routes guard hosts and principals), whose state has the
 *   shape this lane knows (checked once per transport: an SDK that moved it is never served
 *   here, so an upgrade can only make the lane stand aside).
 *
 * `MCP_BROKER_NO_HTTP_CALL_LANE=1` turns the lane off (every request takes the SDK's path).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { DEFAULT_NEGOTIATED_PROTOCOL_VERSION, isJsonContentType, RELATED_TASK_META_KEY } from '@modelcontextprotocol/server';
import type { JSONRPCMessage, WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';
import { acceptsBoth } from './guards.js';

/** The writable end of one SSE stream, as the transport's `send` and keep-alive use it (a `ReadableStream` controller's two methods). */
interface StreamController {
  enqueue(chunk: Uint8Array): void;
  close(): void;
}

/** The transport's own state and methods the lane uses, by the names SDK 2.4.0 gives them. */
interface TransportState {
  _closed: boolean;
  _initialized: boolean;
  _enableJsonResponse: boolean;
  _enableDnsRebindingProtection: boolean;
  _scopeChallengeResolver?: unknown;
  _hasHandledRequest: boolean;
  _supportedProtocolVersions: string[];
  _streamMapping: Map<string, { controller?: StreamController; encoder?: TextEncoder; cleanup: () => void }>;
  _requestToStreamMapping: Map<string | number, string>;
  sessionId?: string;
  onmessage?: (message: JSONRPCMessage, extra?: Record<string, unknown>) => void;
  writePrimingEvent(controller: StreamController, encoder: TextEncoder, streamId: string, protocolVersion: string): Promise<void>;
  startKeepAlive(controller: StreamController, encoder: TextEncoder): ReturnType<typeof setInterval> | undefined;
}

/** `MCP_BROKER_NO_HTTP_CALL_LANE=1` at start: every request takes the SDK's path (debugging, and the lane's tests). */
const DISABLED = process.env.MCP_BROKER_NO_HTTP_CALL_LANE === '1';

const known = new WeakMap<object, TransportState | undefined>();

/** The transport's state when it has the shape this lane knows; undefined otherwise (never served here). */
function stateOf(transport: WebStandardStreamableHTTPServerTransport): TransportState | undefined {
  if (known.has(transport)) return known.get(transport);
  const t = transport as unknown as Partial<TransportState>;
  const fits =
    typeof t._closed === 'boolean' &&
    typeof t._initialized === 'boolean' &&
    typeof t._enableJsonResponse === 'boolean' &&
    typeof t._enableDnsRebindingProtection === 'boolean' &&
    typeof t._hasHandledRequest === 'boolean' &&
    Array.isArray(t._supportedProtocolVersions) &&
    t._streamMapping instanceof Map &&
    t._requestToStreamMapping instanceof Map &&
    typeof t.writePrimingEvent === 'function' &&
    typeof t.startKeepAlive === 'function';
  const state = fits ? (t as TransportState) : undefined;
  known.set(transport, state);
  return state;
}

/**
 * Whether the lane can serve `transport` at all: its state has the shape the lane knows (the
 * installed SDK's, checked in test/transports/legacy-call-lane.test.ts, so an SDK upgrade that
 * moves it fails there instead of only making the lane stand aside unseen).
 */
export function laneFits(transport: WebStandardStreamableHTTPServerTransport): boolean {
  return stateOf(transport) !== undefined;
}

const ENCODER = new TextEncoder();

/**
 * Serves `body` on `res` when the lane takes it (module doc); resolves once the stream is closed
 * (answered, or the client went away). Undefined (nothing done) for the SDK's path. `req` and
 * `res` are the session's, matched to `transport` by its `Mcp-Session-Id` already.
 */
export function serveLegacyCall(transport: WebStandardStreamableHTTPServerTransport, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> | undefined {
  if (DISABLED || !isPlainToolsCall(body)) return undefined;
  const t = stateOf(transport);
  if (!t || t._closed || !t._initialized || t._enableJsonResponse || t._enableDnsRebindingProtection || t._scopeChallengeResolver !== undefined) return undefined;
  if (res.useChunkedEncodingByDefault !== true || !acceptsBoth(req.headers.accept) || !isJsonContentType(single(req.headers['content-type']) ?? null)) return undefined;
  const header = req.headers['mcp-protocol-version'];
  if (header !== undefined && (typeof header !== 'string' || !t._supportedProtocolVersions.includes(header))) return undefined;
  return serve(t, res, body, header ?? DEFAULT_NEGOTIATED_PROTOCOL_VERSION);
}

async function serve(t: TransportState, res: ServerResponse, message: PlainRequest, protocolVersion: string): Promise<void> {
  t._hasHandledRequest = true;
  // The answer's headers, as the transport's Response and the web adapter wrote them.
  const headers: Record<string, string> = { 'cache-control': 'no-cache, no-transform', connection: 'keep-alive', 'content-type': 'text/event-stream' };
  if (t.sessionId !== undefined) headers['mcp-session-id'] = t.sessionId;
  headers['transfer-encoding'] = 'chunked';
  headers['x-accel-buffering'] = 'no';
  res.writeHead(200, headers);
  const controller: StreamController = {
    enqueue(chunk) {
      // A closed controller throws, which the transport's send catches (and reports).
      if (res.writableEnded || res.destroyed) throw new TypeError('Invalid state: the stream is closed');
      res.write(chunk);
    },
    close() {
      if (!res.writableEnded) res.end();
    },
  };
  const streamId = randomUUID();
  let keepAlive: ReturnType<typeof setInterval> | undefined;
  t._streamMapping.set(streamId, {
    controller,
    encoder: ENCODER,
    cleanup: () => {
      if (keepAlive !== undefined) clearInterval(keepAlive);
      t._streamMapping.delete(streamId);
      controller.close();
    },
  });
  t._requestToStreamMapping.set(message.id, streamId);
  // Resolves when the response closes. A client gone before the answer: the stream is no longer
  // written, as when the transport's ReadableStream is cancelled (the call goes on; its answer stays
  // in the event store).
  const closed = new Promise<void>((resolve) =>
    res.once('close', () => {
      if (!res.writableFinished) {
        if (keepAlive !== undefined) clearInterval(keepAlive);
        if (t._streamMapping.get(streamId)?.controller === controller) t._streamMapping.delete(streamId);
      }
      resolve();
    }),
  );
  await t.writePrimingEvent(controller, ENCODER, streamId, protocolVersion);
  t.onmessage?.(message as JSONRPCMessage, {});
  if (t._streamMapping.get(streamId)?.controller === controller) keepAlive = t.startKeepAlive(controller, ENCODER);
  await closed;
}

interface PlainRequest {
  jsonrpc: '2.0';
  id: string | number;
  method: 'tools/call';
  params: Record<string, unknown>;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isToken = (value: unknown) => typeof value === 'string' || (typeof value === 'number' && Number.isSafeInteger(value));

/** A request the SDK's schema takes as it is and the legacy `tools/call` lane takes (module doc). */
function isPlainToolsCall(body: unknown): body is PlainRequest {
  if (!isObject(body) || body.jsonrpc !== '2.0' || body.method !== 'tools/call' || !isToken(body.id)) return false;
  for (const key in body) if (key !== 'jsonrpc' && key !== 'id' && key !== 'method' && key !== 'params') return false;
  const params = body.params;
  if (!isObject(params) || typeof params.name !== 'string' || params.task !== undefined) return false;
  if (params.arguments !== undefined && !isObject(params.arguments)) return false;
  const meta = params._meta;
  if (meta === undefined) return true;
  if (!isObject(meta) || RELATED_TASK_META_KEY in meta) return false;
  return meta.progressToken === undefined || isToken(meta.progressToken);
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
