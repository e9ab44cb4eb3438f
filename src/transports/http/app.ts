/**
 * The express 5 app of the HTTP face. Our own app (not the SDK's `createMcpExpressApp`, whose
 * JSON parser stops at 100 kB): Host/Origin guard (403) → bearer auth (401) → body read up to
 * `http.maxBodyBytes` (413 above) → routes → one error handler (every error answers JSON; a
 * catch-all is -32603, never a client-fault code).
 */
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { messageOf } from '../../shared/errors.js';
import { mountAdminApi } from './admin.js';
import type { HttpContext } from './context.js';
import { authGuard, hostOriginGuard, jsonRpcError } from './guards.js';
import { mountLegacySse } from './sse.js';
import { mountStreamableHttp } from './streamable.js';

export function buildApp(ctx: HttpContext): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(hostOriginGuard({ allowedHosts: ctx.settings.allowedHosts, allowedOrigins: ctx.settings.allowedOrigins }, ctx.logger));
  app.use(authGuard(ctx.auth, ctx.logger));
  // Raw bytes, parsed by each route: the MCP routes answer a bad body with a JSON-RPC error.
  app.use(express.raw({ type: () => true, limit: ctx.settings.maxBodyBytes }));
  mountStreamableHttp(app, ctx);
  mountLegacySse(app, ctx);
  mountAdminApi(app, ctx);
  app.use((_req: Request, res: Response) => {
    res.status(404).json({ error: { code: 'not_found', message: 'no such route' } });
  });
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const e = err as { type?: string; status?: number; statusCode?: number };
    const status = e.status ?? e.statusCode;
    if (e.type === 'entity.too.large') {
      ctx.logger.info({ method: req.method, path: req.path, maxBodyBytes: ctx.settings.maxBodyBytes }, 'http request body too large');
      if (!res.headersSent) res.status(413).json(jsonRpcError(-32000, `Payload Too Large: the body exceeds http.maxBodyBytes (${ctx.settings.maxBodyBytes} bytes)`));
      return;
    }
    if (typeof status === 'number' && status >= 400 && status < 500) {
      if (!res.headersSent) res.status(status).json(jsonRpcError(-32000, `Bad Request: ${messageOf(err)}`));
      return;
    }
    ctx.logger.error({ method: req.method, path: req.path, err: messageOf(err) }, 'http request failed');
    if (!res.headersSent) res.status(500).json(jsonRpcError(-32603, 'Internal error'));
    else res.end();
  });
  return app;
}
