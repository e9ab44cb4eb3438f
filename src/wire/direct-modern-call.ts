/**
 * `tools/call` from a modern (2026-07-28) client without the SDK `Protocol` on the hot path
 * (issue 19): on stdio a modern call paid the SDK's dispatch in (the envelope lift and check, the
 * request schema parsed twice, the handler context built) and out (the result schema parsed,
 * copied and stamped), ~1.7× what a legacy call costs the broker. This lane takes a call it can
 * answer exactly as the SDK would and hands everything else to the SDK unchanged.
 *
 * Taken (the rest goes to the SDK `Server` as it came):
 * - a `tools/call` request as the SDK's request schema takes it ({@link isPlainRequest}: only
 *   `jsonrpc: "2.0"`, `id`, `method`, `params`; an id that is a string or a safe integer) with an
 *   id not already in flight here, delivered without an era classification (on stdio every
 *   request after the opening one);
 * - params of only `name` (a string), `arguments` (absent or an object) and `_meta` (an object),
 *   so no `task`, `inputResponses` or `requestState` (a multi-round-trip retry goes to the SDK);
 *   a `progressToken` absent, a string or a safe integer; no `io.modelcontextprotocol/related-task`
 *   (whose shape the SDK's schema checks);
 * - an envelope (the reserved `_meta` keys: protocol version, client info, capabilities, log
 *   level) deep-equal to one the SDK itself accepted on this connection ({@link ModernDirectLane.learn}):
 *   the SDK's envelope check is a pure function of the envelope, so its verdict is reused, never
 *   re-implemented. The first call with a new envelope is served by the SDK.
 *
 * The handler gets what the SDK's would: params with the envelope keys lifted out of `_meta`
 * (`_meta` dropped when nothing else is left), and a context with `mcpReq.envelope`, `signal`,
 * `notify`, `send` and `log` (sent only at or above the envelope's `logLevel`; none when it asks
 * none). Its answer is written as the SDK writes it (`{result, jsonrpc, id}`, the result as the
 * SDK's result schema and encode step leave it: known keys first, `resultType: "complete"`,
 * the server's identity in `_meta`) when the result is plain: text content only, no
 * `resultType`, no `capabilities`, no identity of its own. A thrown error is written as
 * `{jsonrpc, id, error: {code, message, data?}}` (-32002 answered as -32602, a code that is not a
 * safe integer as -32603). Any other outcome (an `input_required`, other content kinds, a -32042,
 * a throw that is not an `Error`) is handed to the SDK with the request, and the SDK's own
 * handler answers it from {@link ModernDirectLane.takeReplay}: the SDK validates, checks and
 * encodes it as if it had run the call itself. `notifications/cancelled` aborts the call and no
 * answer is sent; closing the transport aborts every call in flight.
 */
import { LoggingLevelSchema } from '@modelcontextprotocol/core';
import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  LOG_LEVEL_META_KEY,
  PROTOCOL_VERSION_META_KEY,
  ProtocolErrorCode,
  RELATED_TASK_META_KEY,
  SERVER_INFO_META_KEY,
} from '@modelcontextprotocol/server';
import type { JSONRPCMessage, LoggingLevel, Server, ServerContext, Transport } from '@modelcontextprotocol/server';
import { CALL_TIMING, markCall } from '../shared/call-timing.js';
import { Cancellation } from '../shared/cancel.js';
import { extend } from '../shared/extend.js';
import { InflightTable } from '../shared/inflight.js';
import { isProgressToken } from '../shared/progress-token.js';
import { abortOnClose, cancelNamedCall, sendFailureReporter, settleLaneCall, type DirectCallExtra, type DirectCallParams, type LaneCalls } from './direct-tools-call.js';
import { rawJsonString, withTail } from './raw-json.js';

/** The reserved envelope keys the SDK lifts out of a modern request's `_meta`, in its order. */
const ENVELOPE_KEYS = [PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY] as const;

/** How many accepted envelopes a connection remembers (a client sends one, or a few). */
const LEARNED_ENVELOPES = 8;

/** -32002 (resource not found, 2025-11-25) is never sent on 2026-07-28: the SDK answers -32602. */
const RESOURCE_NOT_FOUND = -32002;

const SEVERITY = new Map<string, number>(LoggingLevelSchema.options.map((level, index) => [level, index]));

export type ModernCallHandler = (params: DirectCallParams, extra: DirectCallExtra, ctx: ServerContext) => Promise<unknown>;

export interface ModernLaneOptions {
  /** The identity the SDK stamps into every result's `_meta["io.modelcontextprotocol/serverInfo"]` (the `Server`'s own). */
  serverInfo: { name: string; version: string };
  /** Whether the server declares `logging` (without it the SDK's `ctx.mcpReq.log` sends nothing). */
  logging: boolean;
}

/** A call's outcome handed to the SDK with its request. */
export type LaneReplay = { ok: true; value: unknown } | { ok: false; err: unknown };

export interface ModernDirectLane {
  /** Remembers an envelope the SDK accepted (call from the SDK-served `tools/call` handler with `ctx.mcpReq.envelope`). */
  learn(envelope: Record<string, unknown> | undefined): void;
  /** The outcome for a request the lane handed to the SDK after running it; undefined for any other request. */
  takeReplay(id: string | number): LaneReplay | undefined;
}

/**
 * Wraps `transport.onmessage` (as the SDK `Server` set it in `connect`) so the modern `tools/call`
 * requests described above go to `handler` directly. Call right after `server.connect(transport)`.
 */
export function routeModernToolsCallDirectly(server: Server, transport: Transport, handler: ModernCallHandler, options: ModernLaneOptions): ModernDirectLane {
  const learned: Record<string, unknown>[] = [];
  const replays = new InflightTable<string | number, LaneReplay>();
  /** Calls in flight: their controller, and whether the client cancelled (then nothing is answered). */
  const inflight: LaneCalls = new InflightTable();
  const sdkMessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const m = message as { id?: unknown; method?: unknown; params?: unknown };
    if (m.method === 'tools/call' && extra === undefined && isPlainRequest(message) && !inflight.has(m.id as string | number)) {
      const lifted = liftPlainCall(m.params);
      if (lifted && learned.some((known) => sameJson(known, lifted.envelope, 0))) return run(message, m.id as string | number, lifted);
    }
    cancelNamedCall(m, inflight);
    sdkMessage?.(message, extra);
  };
  abortOnClose(transport, inflight);
  const sendFailed = sendFailureReporter(server);

  function run(message: JSONRPCMessage, id: string | number, { params, envelope }: PlainCall): void {
    if (CALL_TIMING) markCall('modern lane');
    const controller = new Cancellation();
    const state = { controller, cancelled: false };
    inflight.set(id, state);
    const notify = (notification: Parameters<Server['notification']>[0], opts?: Parameters<Server['notification']>[1]) =>
      server.notification(notification, { ...opts, relatedRequestId: id });
    const send = ((request: never, schema: never, opts?: object) => server.request(request, schema, { ...opts, relatedRequestId: id })) as Server['request'];
    const extra: DirectCallExtra = { signal: controller, abort: (reason) => controller.abort(reason), requestId: id, _meta: params._meta, sendNotification: notify, sendRequest: send };
    const log = (level: LoggingLevel, data: unknown, logger?: string) => {
      const threshold = envelope[LOG_LEVEL_META_KEY] as string | undefined;
      if (!options.logging || threshold === undefined || SEVERITY.get(level)! < SEVERITY.get(threshold)!) return Promise.resolve();
      return notify({ method: 'notifications/message', params: { level, data, logger } });
    };
    const ctx = { sessionId: transport.sessionId, mcpReq: new LaneRequestContext(id, params._meta, envelope, controller, send, notify, log) } as unknown as ServerContext;
    settleLaneCall(
      handler(params, extra, ctx),
      (ok, value) => {
        if (state.cancelled) return;
        if (ok) {
          const encoded = encodePlainResult(value, options.serverInfo);
          if (encoded === undefined) return replay(message, id, { ok: true, value });
          return transport.send({ result: encoded, jsonrpc: '2.0', id } as JSONRPCMessage);
        }
        const e = value as { code?: unknown; message?: string; data?: unknown };
        if (!(value instanceof Error) || e.code === ProtocolErrorCode.UrlElicitationRequired) return replay(message, id, { ok: false, err: value });
        const thrown = typeof e.code === 'number' && Number.isSafeInteger(e.code) ? e.code : ProtocolErrorCode.InternalError;
        const code = thrown === RESOURCE_NOT_FOUND ? ProtocolErrorCode.InvalidParams : thrown;
        const body = { code, message: e.message ?? 'Internal error', ...(e.data !== undefined && { data: e.data }) };
        return transport.send({ jsonrpc: '2.0', id, error: body } as JSONRPCMessage);
      },
      () => {
        if (inflight.get(id) === state) inflight.delete(id);
      },
      sendFailed,
    );
  }

  /** Hands a request the lane ran to the SDK, whose handler answers it with `outcome`. */
  function replay(message: JSONRPCMessage, id: string | number, outcome: LaneReplay): void {
    replays.set(id, outcome);
    inflight.delete(id);
    sdkMessage?.(message);
  }

  return {
    learn(envelope) {
      if (!envelope || learned.some((known) => sameJson(known, envelope, 0))) return;
      if (learned.length >= LEARNED_ENVELOPES) learned.shift();
      learned.push(envelope);
    },
    takeReplay(id) {
      const outcome = replays.get(id);
      replays.delete(id);
      return outcome;
    },
  };
}

export interface PlainCall {
  /** The params as the SDK's handler would see them: envelope keys lifted out of `_meta`. */
  params: DirectCallParams;
  /** The reserved `_meta` keys the request carried. */
  envelope: Record<string, unknown>;
}

/**
 * The SDK's `ctx.mcpReq` for a call a modern lane serves (what the session's handler reads of
 * it). Its `signal` is a real `AbortSignal` made from the call's {@link Cancellation} only when
 * read (shared/cancel.ts): the broker path itself uses the cancellation (issue 19).
 */
export class LaneRequestContext {
  readonly method = 'tools/call';

  constructor(
    readonly id: string | number,
    readonly _meta: Record<string, unknown> | undefined,
    readonly envelope: Record<string, unknown>,
    private readonly cancellation: Cancellation,
    readonly send: Server['request'],
    readonly notify: (notification: Parameters<Server['notification']>[0], options?: Parameters<Server['notification']>[1]) => Promise<void>,
    readonly log: (level: LoggingLevel, data: unknown, logger?: string) => Promise<void>,
  ) {}

  get signal(): AbortSignal {
    return this.cancellation.signal;
  }

  /** A plain call carries no `requestState` (those go to the SDK). */
  requestState(): undefined {
    return undefined;
  }
}

/**
 * Deep equality of two JSON values (what `isDeepStrictEqual` says of them, without its generality:
 * it cost ~5 µs a call here), keys compared whatever their order. Past 32 levels: unequal (the
 * SDK is asked).
 */
export function sameJson(a: unknown, b: unknown, depth: number): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || depth > 32) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i], depth + 1)) return false;
    return true;
  }
  if (Array.isArray(b) || Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  let count = 0;
  for (const key in a) {
    if (!Object.hasOwn(a, key)) continue;
    if (!Object.hasOwn(b, key) || !sameJson((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key], depth + 1)) return false;
    count++;
  }
  for (const key in b) if (Object.hasOwn(b, key)) count--;
  return count === 0;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Whether `message` is a request as the SDK's JSON-RPC request schema takes it (a strict object:
 * `jsonrpc: "2.0"`, an `id` that is a string or a safe integer, `method`, `params`, nothing else).
 * Anything else goes to the SDK, which refuses it before any handler runs.
 */
export function isPlainRequest(message: unknown): boolean {
  if (!isObject(message) || message.jsonrpc !== '2.0' || typeof message.method !== 'string') return false;
  const id = message.id;
  if (typeof id !== 'string' && !(typeof id === 'number' && Number.isSafeInteger(id))) return false;
  for (const key in message) if (key !== 'jsonrpc' && key !== 'id' && key !== 'method' && key !== 'params') return false;
  return true;
}

/** The call's params and envelope when the params are ones the lane takes (module doc); undefined otherwise. */
export function liftPlainCall(params: unknown): PlainCall | undefined {
  if (!isObject(params) || typeof params.name !== 'string' || !isObject(params._meta)) return undefined;
  for (const key in params) if (key !== 'name' && key !== 'arguments' && key !== '_meta') return undefined;
  if (params.arguments !== undefined && !isObject(params.arguments)) return undefined;
  const envelope: Record<string, unknown> = {};
  const meta: Record<string, unknown> = {};
  let rest = 0;
  for (const key in params._meta) {
    if ((ENVELOPE_KEYS as readonly string[]).includes(key)) envelope[key] = params._meta[key];
    else {
      meta[key] = params._meta[key];
      rest++;
    }
  }
  if (!isProgressToken(meta.progressToken)) return undefined;
  // The SDK's request schema holds this key to a shape of its own: a request carrying it is the SDK's to check.
  if (RELATED_TASK_META_KEY in meta) return undefined;
  const lifted: DirectCallParams = { name: params.name };
  if ('arguments' in params) lifted.arguments = params.arguments as Record<string, unknown> | undefined;
  if (rest > 0) lifted._meta = meta;
  return { params: lifted, envelope };
}

/**
 * A text content block exactly as the SDK's schema outputs it: `{type: "text", text}`. A text
 * still in its bytes (raw-json.ts) is a string without being read.
 */
function isPlainText(block: unknown): boolean {
  if (!isObject(block) || block.type !== 'text' || (rawJsonString(block, 'text') === undefined && typeof block.text !== 'string')) return false;
  const keys = Object.keys(block);
  return keys.length === 2 && keys[0] === 'type';
}

/** Keys the SDK's 2026-07-28 `tools/call` result schema names, in its order; any other key follows them as it came. */
const RESULT_KEYS = ['_meta', 'content', 'structuredContent', 'isError'] as const;

/**
 * The result as the SDK's dispatch leaves it (its result schema's parse, then `resultType` and
 * the server identity stamped), for a plain result (module doc); undefined for any other.
 */
export function encodePlainResult(result: unknown, serverInfo: ModernLaneOptions['serverInfo']): Record<string, unknown> | undefined {
  if (!isObject(result) || 'resultType' in result || 'capabilities' in result) return undefined;
  const { _meta: meta, content, isError } = result;
  if (!Array.isArray(content) || !content.every(isPlainText)) return undefined;
  if ('_meta' in result && (!isObject(meta) || SERVER_INFO_META_KEY in meta)) return undefined;
  if ('isError' in result && typeof isError !== 'boolean') return undefined;
  const out: Record<string, unknown> = {};
  for (const key of RESULT_KEYS) if (key in result) out[key] = result[key];
  for (const key in result) if (!(RESULT_KEYS as readonly string[]).includes(key)) out[key] = result[key];
  out.resultType = 'complete';
  out._meta = extend(meta as Record<string, unknown> | undefined, { [SERVER_INFO_META_KEY]: serverInfo });
  // A large result that passed through unchanged is written as the bytes it arrived in (raw-json.ts).
  return withTail(out, result, { resultType: 'complete' });
}
