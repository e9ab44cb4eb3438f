/**
 * Request guards of the HTTP face, in the order they run: Host and Origin (DNS-rebinding
 * protection, 403), then the bearer token (400 for several `Authorization` headers, 401 with
 * `WWW-Authenticate`). Also the start-up check that refuses to expose an unauthenticated
 * broker beyond loopback (exit 2).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { cut } from '../../shared/cut.js';
import { ConfigError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import { printable } from '../../shared/printable.js';
import type { PrincipalAuthenticator, Principal } from './auth.js';

/** Host names that mean "this machine". */
const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** Whether a bind address or host name is loopback (`localhost`, `127.0.0.0/8`, `::1`). */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase();
  return LOOPBACK_NAMES.has(h) || /^127(\.\d{1,3}){3}$/.test(h) || h === '0:0:0:0:0:0:0:1';
}

/**
 * Refuses a non-loopback `--host` when no principals are configured: an HTTP face without
 * authentication serves this machine only. Throws {@link ConfigError} naming `--host` (exit 2).
 */
export function checkServeOptions(options: { host: string; principalsConfigured: boolean }): void {
  if (!options.principalsConfigured && !isLoopback(options.host)) {
    throw new ConfigError(
      '--host',
      `${JSON.stringify(options.host)} is not a loopback address, and no "principals" are configured: without authentication the HTTP face serves 127.0.0.1 only`,
    );
  }
}

/** The host name of a `Host` header: `[::1]:8080` → `[::1]`, `example.com:80` → `example.com`. */
export function hostnameOf(hostHeader: string): string {
  const h = hostHeader.trim().toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    return end > 0 ? h.slice(0, end + 1) : h;
  }
  const colon = h.indexOf(':');
  return colon >= 0 ? h.slice(0, colon) : h;
}

export interface OriginPolicy {
  /** `http.allowedHosts`: host names (or `host:port`); `*` accepts any. */
  allowedHosts: readonly string[];
  /** `http.allowedOrigins`: exact origins (`https://app.example.com`); `*` accepts any. Loopback origins always pass. */
  allowedOrigins: readonly string[];
}

/**
 * Most characters of a refused Host or Origin value a 403 and its log line name, counted after
 * scrubbing (a longer one is cut, `…` marking the cut): the value is the caller's, up to Node's
 * 16 KiB header limit.
 */
export const SHOWN_HEADER_MAX_CHARS = 200;

/**
 * A refused header value as a refusal names it: as the caller sent it (trimmed; never lowercased
 * or otherwise rewritten first: a configured secret is matched as written, so `SeCrEt` lowercased
 * would pass the scrub), scrubbed whole with `scrub` (the gateway's scrubber: a cut through a
 * secret would leave its start unrecognised), then cut at {@link SHOWN_HEADER_MAX_CHARS}, quoted
 * as JSON (`"`, `\` and C0 controls escaped), and every other control, bidi or invisible format
 * character written as an escape ({@link printable}).
 */
export function shownHeaderValue(value: string, scrub: (text: string) => string): string {
  return printable(JSON.stringify(cut(scrub(value), SHOWN_HEADER_MAX_CHARS)));
}

/**
 * Why a request's Host or Origin is refused, or undefined when both pass. The refused header is
 * named whole as it came (compared lowercased, without the port or trailing slashes, but shown as
 * sent), as {@link shownHeaderValue} shows it, scrubbed with `scrub` (default: as it came).
 */
export function checkHostAndOrigin(
  host: string | undefined,
  origin: string | undefined,
  policy: OriginPolicy,
  scrub: (text: string) => string = (text) => text,
): string | undefined {
  if (!policy.allowedHosts.includes('*')) {
    if (!host) return 'missing Host header';
    const full = host.trim().toLowerCase();
    const name = hostnameOf(full);
    const ok = policy.allowedHosts.some((allowed) => {
      const a = allowed.toLowerCase();
      return a === name || a === full;
    });
    if (!ok) return `Host ${shownHeaderValue(host.trim(), scrub)} is not in http.allowedHosts`;
  }
  if (origin !== undefined && !policy.allowedOrigins.includes('*')) {
    const normalized = origin.trim().toLowerCase().replace(/\/+$/, '');
    let originHost: string | undefined;
    try {
      originHost = new URL(normalized).hostname;
    } catch {
      originHost = undefined;
    }
    const listed = policy.allowedOrigins.some((o) => o.toLowerCase().replace(/\/+$/, '') === normalized);
    if (!listed && !(originHost && isLoopback(originHost))) {
      return `Origin ${shownHeaderValue(origin.trim(), scrub)} is not in http.allowedOrigins`;
    }
  }
  return undefined;
}

/**
 * Answers 403 (JSON-RPC error body) when the Host or Origin of `req` is not allowed, and logs a
 * warning; both name the refused value as {@link shownHeaderValue} shows it, scrubbed with `scrub`,
 * and the log line names the path as {@link shownPath} shows it.
 * @returns whether `req` was refused (and answered)
 */
export function refuseHostOrigin(req: IncomingMessage, res: ServerResponse, policy: OriginPolicy, logger: Logger, scrub: (text: string) => string): boolean {
  const why = checkHostAndOrigin(req.headers.host, req.headers.origin, policy, scrub);
  if (!why) return false;
  logger.warn({ method: req.method, path: shownPath(req, scrub), why }, 'http request refused (Host/Origin)');
  sendJson(res, 403, jsonRpcError(-32000, `Forbidden: ${why}`));
  return true;
}

/** Express middleware: {@link refuseHostOrigin}. */
export function hostOriginGuard(policy: OriginPolicy, logger: Logger, scrub: (text: string) => string) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (!refuseHostOrigin(req, res, policy, logger, scrub)) next();
  };
}

/** Paths served without a token (health probes). */
const OPEN_PATHS = new Set(['/healthz', '/readyz']);

/**
 * How many `Authorization` header lines `req` carries. Node keeps only the first of several in
 * `req.headers.authorization`, so they are counted on `rawHeaders` (names at even indexes).
 */
export function authorizationHeaderCount(req: IncomingMessage): number {
  const raw = req.rawHeaders;
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 13 && raw[i]!.toLowerCase() === 'authorization') count++;
  return count;
}

/**
 * Answers 400 (JSON-RPC error -32000) for more than one `Authorization` header, whichever tokens
 * they hold: the caller would be ambiguous. The log line names the path as {@link shownPath}
 * shows it, scrubbed with `scrub`.
 * @returns whether `req` was refused (and answered)
 */
function refuseSeveralAuthorizations(req: IncomingMessage, res: ServerResponse, logger: Logger, scrub: (text: string) => string): boolean {
  const headers = authorizationHeaderCount(req);
  if (headers <= 1) return false;
  logger.info({ method: req.method, path: shownPath(req, scrub), headers }, 'http request refused (several Authorization headers)');
  sendJson(res, 400, jsonRpcError(-32000, `Bad Request: send one Authorization header, not ${headers}`));
  return true;
}

/**
 * Express middleware for the routes served without a token (the status page's shell and
 * assets, `/metrics` with `observability.metricsPublic`), mounted before them: several
 * `Authorization` headers are 400 there too, as on every route but the health probes.
 */
export function oneAuthorizationGuard(logger: Logger, scrub: (text: string) => string) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (OPEN_PATHS.has(req.path) || !refuseSeveralAuthorizations(req, res, logger, scrub)) next();
  };
}

/**
 * The principal whose bearer token `req` carries, or undefined once `res` has been answered:
 * 400 (JSON-RPC error -32000) for more than one `Authorization` header, whichever tokens they
 * hold and whether or not principals are configured, since the caller would be ambiguous; 401
 * with `WWW-Authenticate: Bearer realm="mcp-broker"` (plus `error="invalid_token"` for a token
 * no principal holds). Each refusal's log line names the path as {@link shownPath} shows it,
 * scrubbed with `scrub`.
 */
export function authenticateRequest(req: IncomingMessage, res: ServerResponse, auth: PrincipalAuthenticator, logger: Logger, scrub: (text: string) => string): Principal | undefined {
  if (refuseSeveralAuthorizations(req, res, logger, scrub)) return undefined;
  const result = auth.authenticate(req.headers.authorization);
  if ('principal' in result) return result.principal;
  const challenge = result.failure === 'invalid' ? 'Bearer realm="mcp-broker", error="invalid_token"' : 'Bearer realm="mcp-broker"';
  logger.info({ method: req.method, path: shownPath(req, scrub), failure: result.failure }, 'http request refused (authentication)');
  const message = result.failure === 'invalid' ? 'Unauthorized: unknown bearer token' : 'Unauthorized: send Authorization: Bearer <token>';
  sendJson(res, 401, jsonRpcError(-32001, message), { 'www-authenticate': challenge });
  return undefined;
}

/**
 * Express middleware: {@link authenticateRequest}, the principal kept in `res.locals.principal`.
 * Health probes pass without a token.
 */
export function authGuard(auth: () => PrincipalAuthenticator, logger: Logger, scrub: (text: string) => string) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (OPEN_PATHS.has(req.path)) return next();
    // Read per request: a config reload replaces the authenticator.
    const principal = authenticateRequest(req, res, auth(), logger, scrub);
    if (!principal) return;
    res.locals.principal = principal;
    next();
  };
}

/** The path of a request, without its query; of an absolute-form target (`http://host/mcp`) too. */
export function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '/';
  if (!url.startsWith('/')) {
    try {
      return new URL(url).pathname;
    } catch {
      return url;
    }
  }
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

/**
 * Most characters of a request's path a log line of a refused or failed request names, counted
 * after scrubbing (a longer one is cut, `…` marking the cut): the path is the caller's, up to
 * Node's 16 KiB header limit.
 */
export const SHOWN_PATH_MAX_CHARS = 200;

/**
 * The path of `req` ({@link pathOf}) as a log line names it: scrubbed whole with `scrub` (the
 * gateway's scrubber: a cut through a secret would leave its start unrecognised; the logger's own
 * scrub comes after the cut), then cut at {@link SHOWN_PATH_MAX_CHARS}. Not escaped: Node's HTTP
 * parser answers 400 to a request target holding a control character or any byte outside ASCII
 * before a listener sees it, so the path holds printable ASCII only.
 */
export function shownPath(req: IncomingMessage, scrub: (text: string) => string): string {
  return cut(scrub(pathOf(req)), SHOWN_PATH_MAX_CHARS);
}

/** Answers with `status` and `body` as JSON (`application/json; charset=utf-8`, as express's `res.json`). */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** The principal set by {@link authGuard}. */
export function principalOf(res: Response): Principal {
  return res.locals.principal as Principal;
}

/**
 * Whether a POST's `Accept` header lists both `application/json` and `text/event-stream`, as
 * Streamable HTTP requires of every client (the server may answer a request either way). The
 * SDK transport's own test: a missing header, or one listing only one of them, is false.
 */
export function acceptsBoth(accept: string | undefined): boolean {
  return typeof accept === 'string' && accept.includes('application/json') && accept.includes('text/event-stream');
}

/** A JSON-RPC error body with a null id, the shape the SDK transports answer HTTP errors with. */
export function jsonRpcError<I extends string | number | null = null>(code: number, message: string, id: I = null as I): { jsonrpc: '2.0'; error: { code: number; message: string }; id: I } {
  return { jsonrpc: '2.0', error: { code, message }, id };
}
