/**
 * The transport an upstream is dialled over, by the kind of its config, and what a failed dial
 * reports (`McpUpstream`, connection.ts).
 */
import { SSEClientTransport, StreamableHTTPClientTransport, type Transport } from '@modelcontextprotocol/client';
import { SseSessionGuard } from './sse-session-guard.js';
import type { HttpServerConfig, SseServerConfig, StdioServerConfig } from '../config/schema.js';
import type { Scrubber } from '../shared/scrub.js';
import { BrokerError, messageOf, messageWithCauses } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import { httpStatusOf } from '../shared/sdk-errors.js';
import { callStreamLogFetch, type CallStreamLogSinks } from '../wire/call-stream-logs.js';
import { ChildProcessTransport } from './child-transport.js';
import { FallbackTransport } from './fallback-transport.js';
import { isolatedAbortFetch } from './isolated-fetch.js';
import { stdioSpawnSpec } from './spawn-env.js';
import { shownStderrLine } from './stderr-line.js';
import type { UpstreamStatus } from './types.js';
import { traceHeaderFetch } from '../shared/trace-context.js';

export interface UpstreamTransportOptions {
  config: StdioServerConfig | HttpServerConfig | SseServerConfig;
  /** Names every stdio child inherits (`broker.env.inherit`). */
  inheritEnv: readonly string[];
  /** Used for `node` commands; default `process.execPath`. */
  nodePath?: string;
  logger: Logger;
  /** Upper bound of one stdio message, in bytes. */
  maxMessageBytes: number;
  /** Injected `fetch` for HTTP kinds (tests). */
  fetch?: typeof fetch;
  /** The gateway's scrubber: a stdio child's stray lines are scrubbed before they are cut for the log. */
  scrubber?: Scrubber;
  /** Streamable HTTP: where log messages on a tool call's own response stream go (call-stream-logs.ts). */
  callStreamLogs?: CallStreamLogSinks;
}

/**
 * The transport for an upstream's config: a child process for stdio, the SDK's client
 * transports for Streamable HTTP and SSE, and for a URL-only entry (no `type`) Streamable HTTP
 * falling back to SSE on a 4xx ({@link FallbackTransport}). Each of their requests gets its own
 * abort signal (isolated-fetch.ts). The SDK v2 client package exports them from the same entry
 * as its `Client`, so they load with it rather than on the first HTTP upstream as with SDK v1;
 * the stdio upstreams still start before (early-spawn.ts, cold start, issue 6).
 * Over Streamable HTTP, log messages on a tool call's own response stream go to
 * `callStreamLogs` instead of the SDK (call-stream-logs.ts).
 */
export async function createUpstreamTransport(options: UpstreamTransportOptions): Promise<Transport> {
  const config = options.config;
  if ('command' in config) {
    return new ChildProcessTransport({
      ...stdioSpawnSpec(config, options.inheritEnv, options.nodePath),
      logger: options.logger,
      maxMessageBytes: options.maxMessageBytes,
      scrub: options.scrubber && ((text) => options.scrubber!.text(text)),
    });
  }
  const requestInit: RequestInit = { headers: config.headers };
  const url = new URL(config.url);
  // Each attempt's trace context rides as `traceparent`/`tracestate`/`baggage` headers (issue 20).
  const baseFetch = traceHeaderFetch(options.fetch ?? fetch);
  const fetchImpl = isolatedAbortFetch(baseFetch);
  // A lost event stream is a lost server session: the transport closes, and the connection dials again (sse-session-guard.ts).
  const sse = async (): Promise<Transport> =>
    new SseSessionGuard(
      new SSEClientTransport(url, {
        requestInit,
        eventSourceInit: { fetch: (u, init) => fetchImpl(u, { ...init, headers: { ...(init?.headers as Record<string, string>), ...config.headers } }) },
        fetch: fetchImpl,
      }),
    );
  if (config.type === 'sse') return sse();
  const streamable = options.callStreamLogs ? isolatedAbortFetch(callStreamLogFetch(baseFetch, options.callStreamLogs)) : fetchImpl;
  const transport = new StreamableHTTPClientTransport(url, { requestInit, fetch: streamable });
  // A URL-only entry: legacy SSE when the server refuses Streamable HTTP (fallback-transport.ts).
  return config.type === undefined ? new FallbackTransport(transport, sse) : transport;
}

/**
 * The status a failed dial leaves: the broker's own error code, `http_status` with the HTTP
 * status of an HTTP upstream's refusal, else `connect_failed`, whose message for a URL upstream
 * ends with what the error's causes add (the refused connection behind `fetch failed`), scrubbed
 * with `scrub`. For a stdio child the message
 * says why from the child's side: `exited with code 1 before it was ready: <line>` when it died,
 * else the dial's error followed by `(stderr: <line>)`, where `<line>` is the stderr line that
 * states the error ({@link ChildProcessTransport.stderrLine}), not merely the last one, scrubbed
 * with `scrub` and then cut ({@link shownStderrLine}).
 */
export function dialFailure(err: unknown, transport: Transport | undefined, scrub: (text: string) => string): UpstreamStatus {
  const message = messageOf(err);
  if (err instanceof BrokerError) {
    const httpStatus = undefined;
    return { state: 'failed', errorCode: err.code, httpStatus, message };
  }
  const httpStatus = httpStatusOf(err);
  if (httpStatus !== undefined && transport !== undefined && !(transport instanceof ChildProcessTransport)) {
    return { state: 'failed', errorCode: 'http_status', httpStatus, message };
  }
  // Node's fetch says only `fetch failed`; the refused or unresolved connection is in its cause.
  if (!(transport instanceof ChildProcessTransport)) return { state: 'failed', errorCode: 'connect_failed', message: scrub(messageWithCauses(err)) };
  const stderr = transport.stderrLine;
  const line = stderr === undefined ? undefined : shownStderrLine(stderr, scrub);
  const exit = transport.exitDescription;
  if (exit) return { state: 'failed', errorCode: 'exited', message: `${exit} before it was ready${line ? `: ${line}` : ` (${message})`}` };
  return { state: 'failed', errorCode: 'connect_failed', message: line ? `${message} (stderr: ${line})` : message };
}
