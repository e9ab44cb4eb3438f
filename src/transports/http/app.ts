/**
 * The request listener of the HTTP face. Every route runs the same steps: Host/Origin guard
 * (403) → bearer auth (400 for several `Authorization` headers, 401) → body read up to
 * `http.maxBodyBytes` (413 above) → route → one error answer (every error answers JSON; a
 * catch-all is -32603, never a client-fault code).
 *
 * `/mcp`, which carries every Streamable HTTP call, runs them as plain functions
 * (`streamable.ts`): without express's router and body parser there, the broker's HTTP CPU per
 * call went 449 → 308–353 µs (bench/README.md). Everything else is an express 5 app: legacy SSE, the admin API, health.
 * Our own app, not the SDK's `createMcpExpressApp`, whose JSON parser stops at 100 kB. express
 * (with its body parsers: ~120 ms of a start on a 2-core VM) loads and the app is built at the
 * first request off `/mcp`, so a face that serves MCP alone never loads it (issue 19: cold start).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Express, NextFunction, Request, Response } from 'express';
import { mountAdminApi } from './admin.js';
import { answerRequestError } from './body.js';
import type { HttpContext } from './context.js';
import { authGuard, hostOriginGuard, oneAuthorizationGuard, pathOf } from './guards.js';
import type { ModernHttp } from './modern.js';
import { mountMetrics, mountPublicMetrics } from './metrics-route.js';
import { loadLegacySse, mountLegacySse, SSE_PATH } from './sse.js';
import { mountStatusApi, mountStatusAssets } from './status-page.js';
import { isMcpPath, streamableHttpHandler } from './streamable.js';

/**
 * Serves `/mcp` with {@link streamableHttpHandler} (its modern requests with `modern`, which the
 * caller owns and closes) and every other path with {@link buildApp}, built at the first such
 * request (a failure to build it answers that request 500, and the next one tries again).
 */
export function buildRequestListener(ctx: HttpContext, modern: ModernHttp): (req: IncomingMessage, res: ServerResponse) => void {
  let app: Promise<Express> | undefined;
  const mcp = streamableHttpHandler(ctx, modern);
  return (req, res) => {
    if (isMcpPath(pathOf(req))) {
      void mcp(req, res);
      return;
    }
    app ??= buildApp(ctx);
    app.then(
      // A client gone while the app was being built has nothing to be answered.
      (handle) => void (res.destroyed || handle(req, res)),
      (err: unknown) => {
        app = undefined;
        answerRequestError(err, req, res, ctx);
      },
    );
  };
}

/** The express app of every path but `/mcp`; loads express. */
export async function buildApp(ctx: HttpContext): Promise<Express> {
  const { default: express } = await import('express');
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const scrub = (text: string) => ctx.gateway.scrubber.text(text);
  app.use(hostOriginGuard({ allowedHosts: ctx.settings.allowedHosts, allowedOrigins: ctx.settings.allowedOrigins }, ctx.logger, scrub));
  // Several Authorization headers are 400 on the public routes below too (the auth guard answers the rest).
  app.use(oneAuthorizationGuard(ctx.logger, scrub));
  // The status page's shell and assets hold no data; /metrics is open only with observability.metricsPublic.
  mountStatusAssets(app);
  mountPublicMetrics(app, ctx);
  app.get(SSE_PATH, loadLegacySse);
  app.use(authGuard(() => ctx.auth, ctx.logger, scrub));
  // Raw bytes, parsed by each route: the MCP routes answer a bad body with a JSON-RPC error.
  app.use(express.raw({ type: () => true, limit: ctx.settings.maxBodyBytes }));
  mountLegacySse(app, ctx);
  mountAdminApi(app, ctx);
  mountStatusApi(app, ctx);
  if (!ctx.gateway.config.observability.metricsPublic) mountMetrics(app, ctx);
  app.use((_req: Request, res: Response) => {
    res.status(404).json({ error: { code: 'not_found', message: 'no such route' } });
  });
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => answerRequestError(err, req, res, ctx));
  return app;
}
