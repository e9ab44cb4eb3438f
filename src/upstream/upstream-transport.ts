/**
 * The transport an upstream is dialled over, by the kind of its config, and what a failed dial
 * reports (`McpUpstream`, connection.ts).
 */
import { SSEClientTransport, StreamableHTTPClientTransport, type Transport } from '@modelcontextprotocol/client';
import type { HttpServerConfig, SseServerConfig, StdioServerConfig } from '../config/schema.js';
import { BrokerError, messageOf } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import { httpStatusOf } from '../shared/sdk-errors.js';
import { ChildProcessTransport } from './child-transport.js';
import { isolatedAbortFetch } from './isolated-fetch.js';
import { stdioSpawnSpec } from './spawn-env.js';
import type { UpstreamStatus } from './types.js';

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
}

/**
 * The transport for an upstream's config: a child process for stdio, the SDK's client
 * transports for Streamable HTTP and SSE. Those load on the first HTTP upstream (with their
 * OAuth and EventSource modules), so a broker of stdio upstreams starts without them (cold
 * start, issue 6); and each of their requests gets its own abort signal (isolated-fetch.ts).
 * @throws when the SDK's transport modules cannot be loaded (a failed dial)
 */
export async function createUpstreamTransport(options: UpstreamTransportOptions): Promise<Transport> {
  const config = options.config;
  if ('command' in config) {
    return new ChildProcessTransport({
      ...stdioSpawnSpec(config, options.inheritEnv, options.nodePath),
      logger: options.logger,
      maxMessageBytes: options.maxMessageBytes,
    });
  }
  const requestInit: RequestInit = { headers: config.headers };
  const url = new URL(config.url);
  const fetchImpl = isolatedAbortFetch(options.fetch ?? fetch);
  if (config.type === 'sse') {
    return new SSEClientTransport(url, {
      requestInit,
      eventSourceInit: { fetch: (u, init) => fetchImpl(u, { ...init, headers: { ...(init?.headers as Record<string, string>), ...config.headers } }) },
      fetch: fetchImpl,
    });
  }
  return new StreamableHTTPClientTransport(url, { requestInit, fetch: fetchImpl });
}

/**
 * The status a failed dial leaves: the broker's own error code, `http_status` with the HTTP
 * status of an HTTP upstream's refusal, else `connect_failed` (with the last stderr line of a
 * stdio child).
 */
export function dialFailure(err: unknown, transport: Transport | undefined): UpstreamStatus {
  const message = messageOf(err);
  if (err instanceof BrokerError) {
    const httpStatus = undefined;
    return { state: 'failed', errorCode: err.code, httpStatus, message };
  }
  const httpStatus = httpStatusOf(err);
  if (httpStatus !== undefined && transport !== undefined && !(transport instanceof ChildProcessTransport)) {
    return { state: 'failed', errorCode: 'http_status', httpStatus, message };
  }
  const stderr = transport instanceof ChildProcessTransport ? transport.stderr.trim().split('\n').pop() : undefined;
  return { state: 'failed', errorCode: 'connect_failed', message: stderr ? `${message} (last stderr: ${stderr.slice(0, 200)})` : message };
}
