/**
 * `tools/call` from a modern (2026-07-28) client over Streamable HTTP without the SDK's
 * per-request instance (issue 19): the SDK's `createMcpHandler` serves every modern request with
 * a new `DownstreamSession` (an SDK `Server` with its handlers), a web `Request`/`Response` pair
 * and a single-exchange transport, which cost a modern HTTP call more than the broker path does.
 * This lane answers a plain call exactly as that path would and hands everything else to it.
 *
 * Taken (the rest goes to the SDK as it came; {@link ModernHttpLane.take} returns undefined):
 * - a body of only `jsonrpc: "2.0"`, `id` (a string or a safe integer), `method: "tools/call"`
 *   and `params`; params as the stdio lane takes them (`direct-modern-call.ts` `liftPlainCall`:
 *   `name`, `arguments`, `_meta`), a `name` of roster characters (`[A-Za-z0-9_-]{1,64}`), no
 *   `progressToken` and no `logLevel` in the envelope: such a call sends nothing before its
 *   result, so the SDK answers it with one JSON body (`responseMode: "auto"`), never a stream;
 * - a JSON `Content-Type` (the SDK's `isJsonContentType`), and the standard headers mirroring the
 *   body exactly: `MCP-Protocol-Version` the envelope's version, `Mcp-Method: tools/call`,
 *   `Mcp-Name` the tool name;
 * - an envelope deep-equal to one the SDK accepted, with headers mirroring its body the same way,
 *   for the same principal ({@link ModernHttpLane.learn}, from the SDK-served handler): the
 *   SDK's checks before the handler (the envelope, the claimed revision, the standard headers
 *   against the body, the request schema) are a pure function of those, so its verdict is reused,
 *   never re-implemented. The first call with a new envelope is served by the SDK.
 *
 * The call runs on one long-lived modern {@link LaneSession} per principal (`callTool` of a
 * `DownstreamSession`: its caller is built from this request alone, as on stdio, where one
 * instance serves every request of a connection); nothing of one principal's instance or learned
 * envelopes is used for another's request. A plain result (`encodePlainResult`, with only the
 * `CallToolResult` keys) is written as the SDK writes it: status 200, `Content-Type:
 * application/json`, `JSON.stringify({result, jsonrpc, id})`; a large one that still has the
 * bytes it arrived in, as those (the stdio face's bytes). Any other outcome (a thrown
 * error, an `input_required`, a task, other content kinds) is handed to the SDK path with the
 * request, whose `tools/call` handler answers it from {@link ModernHttpLane.takeReplay}: the SDK
 * validates, encodes and frames it as if it had run the call. Closing the response before the
 * answer aborts the call (recorded `cancelled`), as the SDK's request signal does;
 * {@link ModernHttpLane.close} aborts every call in flight.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  LOG_LEVEL_META_KEY,
  PROTOCOL_VERSION_META_KEY,
  ProtocolError,
  ProtocolErrorCode,
  SdkError,
  SdkErrorCode,
  isJsonContentType,
} from '@modelcontextprotocol/server';
import type { JSONRPCMessage, ServerContext } from '@modelcontextprotocol/server';
import { CALL_TIMING, markCall } from '../shared/call-timing.js';
import { Cancellation } from '../shared/cancel.js';
import { InflightTable } from '../shared/inflight.js';
import { encodePlainResult, isPlainRequest, LaneRequestContext, liftPlainCall, sameJson, type LaneReplay, type ModernCallHandler } from './direct-modern-call.js';
import type { DirectCallExtra } from './direct-tools-call.js';
import { encodeRawMessage } from './raw-json.js';

/** How many accepted envelopes are remembered per principal (a client sends one, or a few). */
const LEARNED_ENVELOPES = 8;

/** Names the lane takes: the roster's characters, so `Mcp-Name` can only mirror them verbatim (no encoded form). */
const PLAIN_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** The keys of a `CallToolResult` the lane writes itself; a result with any other key goes to the SDK. */
const RESULT_KEYS = new Set(['_meta', 'content', 'structuredContent', 'isError']);

/** Where the lane runs a call: a modern `DownstreamSession`'s `callTool`, one per principal. */
export interface LaneSession {
  directCall: ModernCallHandler;
}

export interface ModernHttpLaneOptions {
  /** The identity the SDK stamps into every result's `_meta["io.modelcontextprotocol/serverInfo"]`. */
  serverInfo: { name: string; version: string };
  /** The principal's long-lived instance (made on first use, owned and closed by the caller). */
  sessionFor(principal: string): LaneSession;
  /**
   * Serves the request on the SDK path, where its `tools/call` handler answers from
   * {@link ModernHttpLane.takeReplay}; resolves once the answer is written.
   */
  handOff(principal: string, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void>;
  /** Reports a failure to write an answer (debug). */
  onerror?(err: unknown): void;
}

export interface ModernHttpLane {
  /** Serves `req` when the lane takes it (module doc); resolves once answered. Undefined (nothing done) for the SDK path. */
  take(principal: string, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> | undefined;
  /** Remembers the envelope of an SDK-served `tools/call` of `principal` (call from its handler with `ctx.mcpReq.envelope`). */
  learn(principal: string, req: IncomingMessage, body: unknown, envelope: Record<string, unknown> | undefined): void;
  /** The outcome of a call the lane ran and handed to the SDK with `req`; undefined for any other request. */
  takeReplay(req: IncomingMessage): LaneReplay | undefined;
  /** Aborts every call in flight (shutdown). */
  close(): void;
}

interface PlainHttpCall {
  id: string | number;
  params: ReturnType<typeof liftPlainCall> & object;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The call when `body` and the headers are ones the lane takes (module doc, all but the learned envelope); undefined otherwise. */
function plainHttpCall(req: IncomingMessage, body: unknown): PlainHttpCall | undefined {
  if (!isPlainRequest(body) || (body as { method: unknown }).method !== 'tools/call') return undefined;
  const { id, params } = body as { id: string | number; params?: unknown };
  const lifted = liftPlainCall(params);
  if (!lifted || !PLAIN_NAME.test(lifted.params.name)) return undefined;
  if (lifted.params._meta?.progressToken !== undefined || LOG_LEVEL_META_KEY in lifted.envelope) return undefined;
  const { headers } = req;
  const version = lifted.envelope[PROTOCOL_VERSION_META_KEY];
  if (typeof version !== 'string' || headers['mcp-protocol-version'] !== version) return undefined;
  if (headers['mcp-method'] !== 'tools/call' || headers['mcp-name'] !== lifted.params.name) return undefined;
  if (!isJsonContentType(headers['content-type'] ?? null)) return undefined;
  return { id, params: lifted };
}

/** The result as the SDK would write it, for a plain result with only `CallToolResult` keys; undefined otherwise. */
function encodeResult(result: unknown, serverInfo: ModernHttpLaneOptions['serverInfo']): Record<string, unknown> | undefined {
  if (!isObject(result)) return undefined;
  for (const key in result) if (!RESULT_KEYS.has(key)) return undefined;
  return encodePlainResult(result, serverInfo);
}

/**
 * A plain result that still has the bytes it arrived in (`raw-json.ts`), written as them: the
 * body is the line the stdio face would write, without its newline. No decode of a held text,
 * no serialisation, no encoding of the whole (issue 19: the cost of a large result; the SSE
 * face's `transports/http/raw-sse.ts` does the same).
 */
function writeRaw(res: ServerResponse, parts: Buffer[]): void {
  const last = parts.length - 1;
  parts[last] = parts[last]!.subarray(0, -1);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': parts.reduce((sum, part) => sum + part.length, 0) });
  for (let i = 0; i < last; i++) res.write(parts[i]);
  res.end(parts[last]);
}

export function modernHttpLane(options: ModernHttpLaneOptions): ModernHttpLane {
  const learned = new Map<string, Record<string, unknown>[]>();
  const replays = new WeakMap<IncomingMessage, LaneReplay>();
  /** Calls in flight, by a number of the lane's: their controller, and whether their client went away (then nothing is answered). */
  const inflight = new InflightTable<number, { controller: Cancellation; gone: boolean }>();
  let seq = 0;
  const closed = () => new SdkError(SdkErrorCode.ConnectionClosed, 'Connection closed');

  function run(principal: string, req: IncomingMessage, res: ServerResponse, body: unknown, { id, params: { params, envelope } }: PlainHttpCall): Promise<void> {
    if (CALL_TIMING) markCall('modern http lane');
    const controller = new Cancellation();
    const state = { controller, gone: false };
    const key = ++seq;
    inflight.set(key, state);
    // As the SDK's request signal: the client going away before the answer cancels the call.
    const onClose = () => {
      if (res.writableFinished) return;
      state.gone = true;
      controller.abort(closed());
    };
    res.once('close', onClose);
    // Nothing is sent before the result (module doc): no progress token, no log level.
    const notify = () => Promise.resolve();
    const send = (() => Promise.reject(new ProtocolError(ProtocolErrorCode.MethodNotFound, 'the 2026-07-28 era has no server-to-client requests'))) as never;
    // `abort` is the broker's (its deadline): the answer is still sent.
    const extra: DirectCallExtra = { signal: controller, abort: (reason) => controller.abort(reason), requestId: id, _meta: params._meta, sendNotification: notify, sendRequest: send };
    const ctx = {
      sessionId: undefined,
      mcpReq: new LaneRequestContext(id, params._meta, envelope, controller, send, notify, () => Promise.resolve()),
      http: { authInfo: { token: '', clientId: principal, scopes: [] } },
    } as unknown as ServerContext;
    const settle = (outcome: LaneReplay): Promise<void> | void => {
      inflight.delete(key);
      res.off('close', onClose);
      if (state.gone) {
        // Closed by the broker (shutdown) with the response still open: as the SDK answers a closed exchange.
        if (!res.destroyed && !res.headersSent) res.writeHead(499).end();
        return;
      }
      const encoded = outcome.ok ? encodeResult(outcome.value, options.serverInfo) : undefined;
      if (encoded === undefined) {
        replays.set(req, outcome);
        return options.handOff(principal, req, res, body);
      }
      const message = { result: encoded, jsonrpc: '2.0', id } as JSONRPCMessage;
      const raw = encodeRawMessage(message);
      if (raw) return writeRaw(res, raw);
      const text = JSON.stringify(message);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
    };
    return options
      .sessionFor(principal)
      .directCall(params, extra, ctx)
      .then(
        (value) => settle({ ok: true, value }),
        (err: unknown) => settle({ ok: false, err }),
      )
      .catch((err: unknown) => options.onerror?.(err));
  }

  return {
    take(principal, req, res, body) {
      const call = plainHttpCall(req, body);
      if (!call) return undefined;
      const known = learned.get(principal);
      if (!known?.some((envelope) => sameJson(envelope, call.params.envelope, 0))) return undefined;
      return run(principal, req, res, body, call);
    },
    learn(principal, req, body, envelope) {
      if (!envelope) return;
      const call = plainHttpCall(req, body);
      if (!call || !sameJson(call.params.envelope, envelope, 0)) return;
      const known = learned.get(principal) ?? [];
      if (known.some((e) => sameJson(e, envelope, 0))) return;
      if (known.length >= LEARNED_ENVELOPES) known.shift();
      known.push(envelope);
      learned.set(principal, known);
    },
    takeReplay(req) {
      const replay = replays.get(req);
      replays.delete(req);
      return replay;
    },
    close() {
      for (const state of inflight.values()) {
        state.gone = true;
        state.controller.abort(closed());
      }
      inflight.clear();
    },
  };
}
