/**
 * The W3C trace context of a downstream HTTP request (`traceparent`, `tracestate`, `baggage`
 * headers), made the caller's trace context for every call the request carries (issue 20):
 * the broker's tracer reads it when the call's `_meta` has none (shared/trace-context.ts).
 * Installed only while tracing is on; a request without `traceparent` passes unchanged.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { traceCarrierOf, withCallerTrace } from '../../shared/trace-context.js';

export function withTraceHeaders(
  listener: (req: IncomingMessage, res: ServerResponse) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const carrier = traceCarrierOf(req.headers);
    if (carrier) withCallerTrace(carrier, () => listener(req, res));
    else listener(req, res);
  };
}
