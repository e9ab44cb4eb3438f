/**
 * Request bodies of the HTTP face, and the one answer every route gives to a request error.
 *
 * `/mcp` reads its body here (raw-body, the reader under express's body parsers); the express
 * routes read theirs with `express.raw` and the same limit. Either way a body over
 * `http.maxBodyBytes` is 413, a request that is malformed at the HTTP level is 400, anything
 * else is 500 with `-32603` (never a client-fault code), always with a JSON-RPC error body.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import getRawBody from 'raw-body';
import { messageOf } from '../../shared/errors.js';
import type { HttpContext } from './context.js';
import { jsonRpcError, pathOf, sendJson } from './guards.js';

/** A request the route cannot read: answered with `status` by {@link answerRequestError}. */
export class RequestBodyError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type?: string,
  ) {
    super(message);
  }
}

/**
 * The body of `req` as bytes, at most `limit` bytes (`http.maxBodyBytes`).
 * Only `identity` content coding is read: any other is a {@link RequestBodyError} 415.
 * @throws raw-body's errors (`type` `entity.too.large` with status 413, 400 for an aborted or
 *   short body), answered by {@link answerRequestError}
 */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const coding = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
  if (coding !== 'identity') throw new RequestBodyError(415, `unsupported Content-Encoding ${JSON.stringify(coding)}`, 'encoding.unsupported');
  return getRawBody(req, { limit, length: req.headers['content-length'] });
}

/**
 * Answers a request that failed before or while its route ran: 413 for a body over
 * `http.maxBodyBytes`, its own status for another client fault (4xx), else 500 `-32603`
 * (logged). A response already started is ended as it is.
 */
export function answerRequestError(err: unknown, req: IncomingMessage, res: ServerResponse, ctx: Pick<HttpContext, 'settings' | 'logger'>): void {
  const e = err as { type?: string; status?: number; statusCode?: number };
  const status = e.status ?? e.statusCode;
  const path = pathOf(req);
  if (e.type === 'entity.too.large') {
    ctx.logger.info({ method: req.method, path, maxBodyBytes: ctx.settings.maxBodyBytes }, 'http request body too large');
    if (!res.headersSent) sendJson(res, 413, jsonRpcError(-32000, `Payload Too Large: the body exceeds http.maxBodyBytes (${ctx.settings.maxBodyBytes} bytes)`));
    return;
  }
  if (typeof status === 'number' && status >= 400 && status < 500) {
    if (!res.headersSent) sendJson(res, status, jsonRpcError(-32000, `Bad Request: ${messageOf(err)}`));
    return;
  }
  ctx.logger.error({ method: req.method, path, err: messageOf(err) }, 'http request failed');
  if (!res.headersSent) sendJson(res, 500, jsonRpcError(-32603, 'Internal error'));
  else res.end();
}
