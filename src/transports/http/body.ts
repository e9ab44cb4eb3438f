/**
 * Request bodies of the HTTP face, and the one answer every route gives to a request error.
 *
 * `/mcp` reads its body here (raw-body, the reader under express's body parsers, with the same
 * content codings: gzip, deflate, br); the express routes read theirs with `express.raw` and the
 * same limit. Either way a body over `http.maxBodyBytes` (decoded) is 413, an unknown content
 * coding 415, a request that is malformed at the HTTP level 400, anything else 500 with
 * `-32603` (never a client-fault code), always with a JSON-RPC error body.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import getRawBody from 'raw-body';
import { messageOf } from '../../shared/errors.js';
import type { HttpContext } from './context.js';
import { jsonRpcError, sendJson, shownPath } from './guards.js';

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

/** Whether `req` carries a body (a length, even 0, or chunked), as body-parser decides. */
export function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || req.headers['content-length'] !== undefined;
}

/**
 * The body of `req` as bytes, decoded from `gzip`, `deflate` or `br` when so sent, at most
 * `limit` decoded bytes (`http.maxBodyBytes`).
 * @throws {@link RequestBodyError} 415 for another content coding, 400 for a body that does not
 *   decode; raw-body's errors (`type` `entity.too.large` with status 413, 400 for an aborted or
 *   short body); all answered by {@link answerRequestError}
 */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const coding = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
  if (coding === 'identity') return getRawBody(req, { limit, length: req.headers['content-length'] });
  const decoder = coding === 'gzip' ? createGunzip() : coding === 'deflate' ? createInflate() : coding === 'br' ? createBrotliDecompress() : undefined;
  if (!decoder) throw new RequestBodyError(415, `unsupported Content-Encoding ${JSON.stringify(coding)}`, 'encoding.unsupported');
  // pipeline: an aborted request fails the decoder too, so the read below always settles.
  pipeline(req, decoder, () => undefined);
  try {
    return await getRawBody(decoder, { limit });
  } catch (err) {
    if ((err as { type?: string }).type === 'entity.too.large') throw err;
    throw new RequestBodyError(400, `the ${coding} body does not decode: ${messageOf(err)}`, 'encoding.invalid');
  } finally {
    decoder.destroy();
  }
}

/**
 * Answers a request that failed before or while its route ran: 413 for a body over
 * `http.maxBodyBytes`, its own status for another client fault (4xx), else 500 `-32603`
 * (logged). A response already started is ended as it is. The log lines name the path as
 * {@link shownPath} shows it, scrubbed with the gateway's scrubber.
 */
export function answerRequestError(err: unknown, req: IncomingMessage, res: ServerResponse, ctx: Pick<HttpContext, 'settings' | 'logger' | 'gateway'>): void {
  const e = err as { type?: string; status?: number; statusCode?: number };
  // A body left unread would be taken for the next request on this connection: end it instead.
  if (!req.complete && !res.headersSent) res.setHeader('connection', 'close');
  const status = e.status ?? e.statusCode;
  const path = shownPath(req, (text) => ctx.gateway.scrubber.text(text));
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
