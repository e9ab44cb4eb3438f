/**
 * A `tools/call` to an upstream of the 2026-07-28 era (`McpUpstream.callTool` on a modern
 * connection):
 *
 * - `_meta` carries the calling client's own capabilities (the input kinds it can answer:
 *   sampling, elicitation, roots; {@link offeredCapabilities}) and its log level
 *   (`io.modelcontextprotocol/logLevel`, only when it set one), over the connection-wide
 *   envelope the SDK attaches (protocol version, our clientInfo): the upstream checks each input
 *   request it makes against these, so it asks only what this caller can answer.
 * - `Mcp-Param-*` headers mirror the tool's `x-mcp-header` parameters (mcp-param-headers.ts);
 *   `Mcp-Method` and `Mcp-Name` (the upstream's own tool name) are set by the SDK's Streamable HTTP
 *   transport from the request body.
 * - An `input_required` answer is bridged to the caller: each input request is sent to the calling
 *   session as a live request (`CallOptions.onServerRequest`, the same route a legacy upstream's
 *   `elicitation/create` takes), and the call is sent again with the answers as `inputResponses`
 *   and the upstream's `requestState` echoed unchanged, until the upstream answers with a result,
 *   at most {@link MAX_INPUT_ROUNDS} rounds. A caller that cannot answer (no route, or it lacks the
 *   capability) fails the call with `BrokerError` `input_unanswerable`.
 *
 * - For a modern caller (`inputRelay` set) nothing is bridged: the first round carries the
 *   caller's answers and the upstream's own `requestState` (as the broker unsealed them), and an
 *   `input_required` answer is returned as it came, its input requests' params scrubbed. Naming
 *   its keys and sealing its state inside the broker's own is broker/relay-input.ts.
 */
import { CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY, ProtocolError } from '@modelcontextprotocol/client';
import type { Client, ClientCapabilities, LoggingLevel } from '@modelcontextprotocol/client';
import { z } from 'zod';
import { systemClock, type Clock } from '../shared/clock.js';
import { BrokerError, messageOf } from '../shared/errors.js';
import { pollDelayMs, UPSTREAM_TASKS_EXTENSION_ID, upstreamTaskOf, type UpstreamTask } from './upstream-task.js';
import type { CallOptions, InputRelay, ServerRequestHandler } from './types.js';

/** Methods a modern upstream may answer with `input_required` (the spec's list). */
export const INPUT_REQUIRED_METHODS: ReadonlySet<string> = new Set(['tools/call', 'prompts/get', 'resources/read']);

/** What bridging needs of a request: its signal, and the route to the calling session (or the relay of a modern caller). */
export interface ModernRequestOptions {
  signal?: AbortSignal;
  onServerRequest?: ServerRequestHandler;
  /** Set for a modern caller: the first round carries these, and an `input_required` answer is returned (params scrubbed by `scrubRequest`). */
  inputRelay?: InputRelay;
  /** Scrubs the params of each input request returned to a modern caller (the upstream's own requests to a legacy caller are scrubbed the same way). */
  scrubRequest?: (params: Record<string, unknown> | undefined) => Record<string, unknown> | undefined;
  /** Told when the upstream answered with a task of its own, before it is followed ({@link CallOptions.onUpstreamTask}). */
  onUpstreamTask?: CallOptions['onUpstreamTask'];
  /** Waits between an upstream task's polls (the connection's clock); default the system clock. */
  sleep?: Clock['sleep'];
}

/** Rounds of `input_required` answered for one call before it fails (`input_rounds_exceeded`). */
export const MAX_INPUT_ROUNDS = 8;

/** Results pass through untouched: no schema copy of large payloads on the hot path. */
const AnyObject = z.custom<Record<string, unknown>>((v) => typeof v === 'object' && v !== null);

/** The input kinds a caller can be asked on an upstream's behalf: of what it declared, only sampling, elicitation and roots. */
export function offeredCapabilities(declared: ClientCapabilities | undefined): ClientCapabilities {
  const out: ClientCapabilities = {};
  if (!declared) return out;
  if (declared.sampling) out.sampling = declared.sampling;
  if (declared.elicitation) out.elicitation = declared.elicitation;
  if (declared.roots) out.roots = declared.roots;
  return out;
}

/**
 * The caller's part of a modern request's `_meta`: its capabilities, and its log level when it set one.
 * @param tasks offer the tasks extension (`extensions["io.modelcontextprotocol/tasks"]`): the broker
 *   follows an upstream task for the caller ({@link callModern}); default false
 */
export function callerMeta(caller: CallOptions['caller'], tasks = false): Record<string, unknown> {
  const offered: ClientCapabilities = offeredCapabilities(caller?.clientCapabilities);
  if (tasks) (offered as { extensions?: Record<string, unknown> }).extensions = { [UPSTREAM_TASKS_EXTENSION_ID]: {} };
  const meta: Record<string, unknown> = { [CLIENT_CAPABILITIES_META_KEY]: offered };
  if (caller?.logLevel) meta[LOG_LEVEL_META_KEY] = caller.logLevel satisfies LoggingLevel;
  return meta;
}

/**
 * Sends `method` with `params` (complete, `_meta` included; `tools/call`, `prompts/get` or
 * `resources/read`) and answers the upstream's input requests through `options.onServerRequest`
 * until it returns a result.
 * @param timeoutMs the SDK's timer for each round, in ms (the broker's deadline aborts `options.signal` sooner)
 * @param headers extra HTTP headers of every round (`Mcp-Param-*`)
 */
export async function callModern(
  client: Client,
  upstream: string,
  method: string,
  params: Record<string, unknown>,
  options: ModernRequestOptions,
  timeoutMs: number,
  headers: Record<string, string> | undefined,
): Promise<Record<string, unknown>> {
  const relay = options.inputRelay;
  let round = relay ? withRetryFields(params, relay.inputResponses, relay.requestState) : params;
  for (let rounds = 0; ; rounds++) {
    const result = await client.request({ method, params: round } as never, AnyObject, {
      signal: options.signal,
      timeout: timeoutMs,
      allowInputRequired: true,
      ...(headers && Object.keys(headers).length ? { headers } : {}),
    });
    const task = upstreamTaskOf(result);
    if (task) {
      options.onUpstreamTask?.(task);
      return followTask(client, upstream, task, options, timeoutMs);
    }
    if (result.resultType !== 'input_required') return result;
    if (relay) return scrubbedInputRequests(result, options.scrubRequest);
    if (rounds >= MAX_INPUT_ROUNDS) {
      throw new BrokerError('input_rounds_exceeded', `upstream "${upstream}" still asked for input after ${MAX_INPUT_ROUNDS} rounds of answers`);
    }
    const inputResponses = await answerInputRequests(upstream, result.inputRequests, options);
    round = withRetryFields(params, inputResponses, typeof result.requestState === 'string' ? result.requestState : undefined);
  }
}

/**
 * Follows an upstream task to its end and answers what the request would have answered at once:
 * polls `tasks/get` (every `pollIntervalMs` it suggests, bounded: upstream-task.ts), asks the
 * calling session each new input request of an `input_required` poll (`options.onServerRequest`)
 * and sends the answers with `tasks/update`; aborting `options.signal` sends `tasks/cancel` (best
 * effort) and rejects. `completed` answers its `result`; `failed` throws its JSON-RPC `error` as a
 * `ProtocolError`; `cancelled` (by the upstream) throws `BrokerError` `upstream_error`.
 */
async function followTask(client: Client, upstream: string, task: UpstreamTask, options: ModernRequestOptions, timeoutMs: number): Promise<Record<string, unknown>> {
  const { taskId } = task;
  const signal = options.signal;
  const send = (method: string, params: Record<string, unknown>, own?: AbortSignal) =>
    client.request({ method, params: { taskId, ...params } } as never, AnyObject, { signal: own, timeout: timeoutMs });
  const onAbort = () => void send('tasks/cancel', {}).catch(() => undefined);
  signal?.addEventListener('abort', onAbort, { once: true });
  const answered = new Set<string>();
  let interval = task.pollIntervalMs;
  try {
    for (;;) {
      signal?.throwIfAborted();
      await (options.sleep ?? systemClock.sleep)(pollDelayMs(interval), signal);
      const got = await send('tasks/get', {}, signal);
      if (typeof got.pollIntervalMs === 'number') interval = got.pollIntervalMs;
      switch (got.status) {
        case 'completed':
          return (got.result ?? { content: [] }) as Record<string, unknown>;
        case 'failed': {
          const error = (got.error ?? {}) as { code?: unknown; message?: unknown; data?: unknown };
          throw new ProtocolError(typeof error.code === 'number' ? error.code : -32603, typeof error.message === 'string' ? error.message : `upstream task "${taskId}" failed`, error.data);
        }
        case 'cancelled':
          throw new BrokerError('upstream_error', `upstream "${upstream}" cancelled its task${typeof got.statusMessage === 'string' ? `: ${got.statusMessage}` : ''}`);
        case 'input_required': {
          const requests = (got.inputRequests ?? {}) as Record<string, unknown>;
          const fresh = Object.fromEntries(Object.entries(requests).filter(([key]) => !answered.has(key)));
          if (!Object.keys(fresh).length) break;
          const inputResponses = await answerInputRequests(upstream, fresh, options);
          for (const key of Object.keys(fresh)) answered.add(key);
          await send('tasks/update', { inputResponses }, signal);
          break;
        }
        default:
          break;
      }
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}

/** `params` with its retry fields replaced by these (absent ones left out). */
function withRetryFields(params: Record<string, unknown>, inputResponses: Record<string, unknown> | undefined, requestState: string | undefined): Record<string, unknown> {
  const { inputResponses: _previous, requestState: _state, ...base } = params;
  return { ...base, ...(inputResponses !== undefined && { inputResponses }), ...(requestState !== undefined && { requestState }) };
}

/** An `input_required` result with each input request's params scrubbed; the same object when nothing changed. */
function scrubbedInputRequests(result: Record<string, unknown>, scrub: ModernRequestOptions['scrubRequest']): Record<string, unknown> {
  const requests = result.inputRequests;
  if (!scrub || !requests || typeof requests !== 'object') return result;
  const out: Record<string, unknown> = {};
  for (const [key, request] of Object.entries(requests as Record<string, { params?: Record<string, unknown> } | undefined>)) {
    out[key] = request && typeof request === 'object' ? { ...request, params: scrub(request.params) } : request;
  }
  return { ...result, inputRequests: out };
}

/** Asks the calling session each input request (in parallel) and collects the answers by key. */
async function answerInputRequests(upstream: string, requests: unknown, options: ModernRequestOptions): Promise<Record<string, unknown>> {
  const entries = requests && typeof requests === 'object' ? Object.entries(requests as Record<string, { method?: unknown; params?: unknown }>) : [];
  const route = options.onServerRequest;
  if (!route) throw new BrokerError('input_unanswerable', `upstream "${upstream}" asked for input and the caller has no way to answer it`);
  const signal = options.signal ?? new AbortController().signal;
  const answers = await Promise.all(
    entries.map(async ([key, request]) => {
      const method = typeof request?.method === 'string' ? request.method : '';
      try {
        return [key, await route({ method, params: request.params as Record<string, unknown> | undefined }, signal)] as const;
      } catch (err) {
        if (signal.aborted) throw err;
        throw new BrokerError('input_unanswerable', `upstream "${upstream}" asked for ${method || 'input'} and the caller did not answer: ${messageOf(err)}`, { cause: err });
      }
    }),
  );
  return Object.fromEntries(answers);
}
