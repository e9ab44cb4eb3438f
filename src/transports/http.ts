/**
 * Serves the gateway over HTTP (`--transport http`; DESIGN.md "Contract"): Streamable HTTP at
 * `/mcp` (both eras: modern requests stateless, legacy ones in sessions; `http/streamable.ts`),
 * legacy SSE at `GET /sse` + `POST /messages`, the admin API under `/api/v1/` (and the
 * session route `/v1/sessions/:id/mcp/reconnect`), `/healthz`, `/readyz`, `/metrics` and the
 * status page `/` (issue 20). The pieces live in
 * `http/`; settings are the config's `http` section (defaults in `httpSchema`) and `principals`.
 *
 * Upstream capabilities: every HTTP session shares one connection per upstream, so upstreams are
 * offered `http.clientCapabilities` (default none) at start, not what one client declared. An
 * upstream request (sampling, elicitation, roots) during a call goes to the session that made
 * the call, only when that session declared the capability. A Streamable HTTP upstream's request
 * travels on its call's response stream and is attributed exactly; a stdio or SSE upstream's
 * carries no link to its call, so such an upstream offered these capabilities runs one caller's
 * calls at a time and the request is that caller's (upstream/owner-gate.ts). Toward a modern caller it is held and answered to the call as `input_required`
 * (`held-calls.ts`); the held call lives in this process, so the retry must reach this process.
 */
import { createServer, type Server, type ServerOptions } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../config/schema.js';
import type { Gateway } from '../gateway.js';
import { PrincipalAuthenticator } from './http/auth.js';
import { buildRequestListener } from './http/app.js';
import { modernHttp } from './http/modern.js';
import { StreamCaps } from './http/caps.js';
import type { HttpContext } from './http/context.js';
import type { ConfigDiff } from '../config/diff.js';
import { startHttpUpstreams } from './http/start.js';
import { SessionTable } from './http/session-table.js';
import { withTraceHeaders } from './http/trace-headers.js';

export interface HttpServeOptions {
  /** Address to bind; `--host`, default 127.0.0.1. Non-loopback needs `principals`. */
  host: string;
  /** Port; `--port`, 0 picks a free one. */
  port: number;
  /** The upstreams' start from `startHttpUpstreams` (http/start.ts), when the caller began it; else begun here. */
  started?: Promise<void>;
}

export interface HttpServing {
  /** `http://host:port` actually bound. */
  readonly url: string;
  readonly port: number;
  readonly sessions: SessionTable;
  readonly server: Server;
  /** Ends every session and stops listening. Does not stop the gateway. */
  close(): Promise<void>;
}

/**
 * The Node server's timeouts, set from the `http` settings rather than left to Node's defaults:
 * `headersTimeout` (`http.headersTimeoutMs`) and `requestTimeout` (`http.requestTimeoutMs`, the
 * whole request, body included; not the response, so streams are not cut) answer 408 and close
 * the connection; `keepAliveTimeout` (`http.keepAliveTimeoutMs`) closes an idle keep-alive
 * connection. Node checks the first two every `connectionsCheckingInterval` (30 s by default),
 * so that is made a quarter of the shorter one (at least 100 ms, at most 30 s).
 */
export function serverOptions(settings: Pick<Config['http'], 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs'>): ServerOptions {
  const { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs } = settings;
  return {
    headersTimeout: headersTimeoutMs,
    requestTimeout: requestTimeoutMs,
    keepAliveTimeout: keepAliveTimeoutMs,
    connectionsCheckingInterval: Math.min(30_000, Math.max(100, Math.floor(Math.min(headersTimeoutMs, requestTimeoutMs) / 4))),
  };
}

/**
 * Checks the options (a non-loopback `--host` without principals is a `ConfigError` naming
 * `--host`: exit 2) and starts the gateway's upstreams with `http.clientCapabilities`
 * (`startHttpUpstreams`, unless `options.started` is that start already), then listens once the
 * gateway is ready (`Gateway.ready`: every first dial settled, or `broker.startGraceMs` passed);
 * rejects as the start does when it fails before that.
 */
export async function serveHttp(gateway: Gateway, options: HttpServeOptions): Promise<HttpServing> {
  await Promise.race([options.started ?? startHttpUpstreams(gateway, options), gateway.ready]);
  const config = gateway.config;
  const auth = new PrincipalAuthenticator(config.principals);
  const logger = gateway.logger.child({ transport: 'http' });
  const { sessionIdleMs, maxSessions, maxSessionsPerPrincipal, maxStreams, maxStreamsPerPrincipal } = config.http;
  const sessions = new SessionTable({ clock: gateway.clock, logger, idleMs: sessionIdleMs, maxSessions, maxSessionsPerPrincipal });
  const streams = new StreamCaps({ maxStreams, maxStreamsPerPrincipal });
  const ctx: HttpContext = { gateway, settings: config.http, sessions, streams, auth, logger };
  // A reload that changes a principal's token or role ends that principal's sessions and closes
  // its streams (issue 18 §5); one that would open a non-loopback face without principals is
  // refused (registered by startHttpUpstreams).
  const onReload = (diff: ConfigDiff) => {
    const wasOpen = !ctx.auth.enabled;
    ctx.auth = new PrincipalAuthenticator(gateway.config.principals);
    const revoked = new Set(diff.principalsChanged);
    // Principals configured where there were none: the tokenless `local` caller is gone too.
    if (wasOpen && ctx.auth.enabled) revoked.add('local');
    if (revoked.size) {
      void sessions.endPrincipals(revoked);
      streams.closePrincipals(revoked);
    }
  };
  gateway.on('reloaded', onReload);
  const modern = modernHttp(ctx);
  const listener = buildRequestListener(ctx, modern);
  const server = createServer(serverOptions(config.http), gateway.tracer ? withTraceHeaders(listener) : listener);
  await new Promise<void>((resolve, reject) => {
    const refused = (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new Error(`${options.host}:${options.port} is already in use; choose another port with --port (0 picks a free one)`) : err);
    server.once('error', refused);
    server.listen(options.port, options.host, () => {
      server.off('error', refused);
      resolve();
    });
  });
  sessions.startReaper();
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  logger.info({ url, principals: auth.principals.map((p) => p.name) }, 'serving http');
  let closing: Promise<void> | undefined;
  return {
    url,
    port: address.port,
    sessions,
    server,
    close() {
      closing ??= (async () => {
        gateway.off('reloaded', onReload);
        await modern.close();
        await sessions.closeAll();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
      })();
      return closing;
    },
  };
}
