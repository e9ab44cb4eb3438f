/**
 * What every route of the HTTP face shares: the gateway, the `http` settings, the session table,
 * the stream caps and the authenticator. Built once by `serveHttp`.
 */
import type { Request } from 'express';
import type { Gateway } from '../../gateway.js';
import type { Config } from '../../config/schema.js';
import type { Logger } from '../../shared/logger.js';
import type { PrincipalAuthenticator } from './auth.js';
import type { StreamCaps } from './caps.js';
import type { SessionTable } from './session-table.js';

export interface HttpContext {
  readonly gateway: Gateway;
  /** The `http` section of the config (defaults in the schema's `httpSchema`). */
  readonly settings: Config['http'];
  readonly sessions: SessionTable;
  /** Open event streams, against `http.maxStreams` and `http.maxStreamsPerPrincipal`. */
  readonly streams: StreamCaps;
  /** Replaced when a config reload changes `principals`. */
  auth: PrincipalAuthenticator;
  readonly logger: Logger;
  /** Experimental capabilities every session declares (the broker's own). */
  readonly experimental?: Gateway['experimental'];
}

/** The request body parsed as JSON, or `undefined` for an empty body; throws `SyntaxError` on bad JSON. */
export function jsonBody(req: Request): unknown {
  const raw = req.body as unknown;
  if (raw === undefined || raw === null) return undefined;
  if (Buffer.isBuffer(raw)) {
    if (raw.length === 0) return undefined;
    return JSON.parse(raw.toString('utf8'));
  }
  // express.raw leaves `{}` when there was no body to read.
  if (typeof raw === 'object' && Object.keys(raw).length === 0) return undefined;
  return raw;
}

/**
 * Writes an SSE comment (`: keepalive`) on `res` every `intervalMs` until the response closes
 * (none when it has closed already), so proxies and clients keep an idle stream open. The timer
 * never keeps the process alive.
 */
export function keepStreamAlive(
  res: { write(chunk: string): unknown; readonly writableEnded: boolean; readonly destroyed: boolean; once(event: 'close', fn: () => void): unknown },
  intervalMs: number,
): void {
  const timer = setInterval(() => {
    if (!res.writableEnded) res.write(': keepalive\n\n');
  }, intervalMs);
  timer.unref();
  whenClosed(res, () => clearInterval(timer));
}

/**
 * Runs `fn` once `res` closes, or at once when it has closed already (a client that went away
 * while the request waited would otherwise leave a stream or request counted for good).
 */
export function whenClosed(res: { readonly destroyed: boolean; once(event: 'close', fn: () => void): unknown }, fn: () => void): void {
  if (res.destroyed) fn();
  else res.once('close', fn);
}
