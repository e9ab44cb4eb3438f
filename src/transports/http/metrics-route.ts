/**
 * `GET /metrics`: the gateway's Prometheus series in the text exposition format
 * (observability/metrics.ts), to an operator (role `operator`, or `local`): its series count every
 * principal's calls by principal and tool, which a user may not see of another (403 `forbidden`
 * for one, 401 without a valid token). With `observability.metricsPublic` it is served to anyone,
 * before the auth guard ({@link mountPublicMetrics}): the operator's explicit choice.
 * Registers the HTTP face's own gauges on first mount: sessions open per kind and era, and event
 * streams open.
 */
import { MODERN_REVISION } from '../era.js';
import type { Express, Request, Response } from 'express';
import { LEGACY_ERA } from '../../observability/eras.js';
import type { HttpContext } from './context.js';
import { principalOf } from './guards.js';

export const METRICS_PATH = '/metrics';

export function mountMetrics(app: Express, ctx: HttpContext): void {
  const { metrics } = ctx.gateway;
  // prom-client loads at the first scrape (metrics.scrape), and its process metrics are sampled from then on.
  // Every HTTP session is a legacy (initialize) session: the modern era has none (its streams are counted below).
  metrics.gauge('sessions_open', 'Downstream sessions open, by transport (streamable, sse) and era.', ['transport', 'era'], () => {
    const counts = { streamable: 0, sse: 0 };
    for (const s of ctx.sessions.all()) counts[s.kind]++;
    return Object.entries(counts).map(([transport, value]) => ({ labels: { transport, era: LEGACY_ERA }, value }));
  });
  metrics.gauge('streams_open', 'Event streams open (GET /sse, GET /mcp, GET /api/v1/events; a 2026-07-28 subscriptions/listen), by era.', ['era'], () => [
    { labels: { era: LEGACY_ERA }, value: ctx.streams.sizeOf('legacy') },
    { labels: { era: MODERN_REVISION }, value: ctx.streams.sizeOf('modern') },
  ]);
  const open = ctx.gateway.config.observability.metricsPublic;
  app.get(METRICS_PATH, async (_req: Request, res: Response) => {
    if (!open && principalOf(res).role !== 'operator') {
      return void res.status(403).json({
        error: { code: 'forbidden', message: 'GET /metrics needs the operator role (its series count every principal\'s calls); or set observability.metricsPublic' },
      });
    }
    const { contentType, body } = await metrics.scrape();
    res.setHeader('Cache-Control', 'no-store');
    res.type(contentType).send(body);
  });
}

/** Serves `/metrics` without authentication when `observability.metricsPublic`; mounted before the auth guard. */
export function mountPublicMetrics(app: Express, ctx: HttpContext): void {
  if (ctx.gateway.config.observability.metricsPublic) mountMetrics(app, ctx);
}
