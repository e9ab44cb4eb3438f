/**
 * W3C trace context (`traceparent`, `tracestate`, `baggage`) carried beside a request where no
 * argument can carry it: the HTTP header of a downstream request, read by the broker's tracer
 * when the call's `_meta` has none; and the context of one upstream attempt, written as headers
 * by the fetch of an HTTP upstream (upstream/upstream-transport.ts). Only set while tracing is
 * on (`observability.otlp`); otherwise nothing here runs (issue 20).
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** The W3C trace context fields, as strings, keyed by their lower-case header names. */
export type TraceCarrier = Partial<Record<TraceField, string>>;

export type TraceField = 'traceparent' | 'tracestate' | 'baggage';

/** The trace context fields, in the order they are read and written. */
export const TRACE_FIELDS: readonly TraceField[] = ['traceparent', 'tracestate', 'baggage'];

const caller = new AsyncLocalStorage<TraceCarrier>();
const upstream = new AsyncLocalStorage<TraceCarrier>();

/** The trace fields of a header or `_meta` object that are strings; undefined when it has no `traceparent`. */
export function traceCarrierOf(source: Readonly<Record<string, unknown>> | undefined): TraceCarrier | undefined {
  if (!source || typeof source.traceparent !== 'string') return undefined;
  const out: TraceCarrier = {};
  for (const field of TRACE_FIELDS) {
    const value = source[field];
    if (typeof value === 'string') out[field] = value;
  }
  return out;
}

/** Runs `fn` with `carrier` as the downstream caller's trace context (from its HTTP headers). */
export function withCallerTrace<T>(carrier: TraceCarrier, fn: () => T): T {
  return caller.run(carrier, fn);
}

/** The downstream caller's trace context from its HTTP headers, when the request sent one. */
export function callerTrace(): TraceCarrier | undefined {
  return caller.getStore();
}

/** Runs `fn` (one upstream attempt) so that HTTP requests it makes carry `carrier` as headers. */
export function withUpstreamTrace<T>(carrier: TraceCarrier, fn: () => T): T {
  return upstream.run(carrier, fn);
}

/** The trace context of the upstream attempt in progress, for its HTTP request headers. */
export function upstreamTrace(): TraceCarrier | undefined {
  return upstream.getStore();
}

/**
 * A `fetch` that adds the trace context of the upstream attempt in progress
 * ({@link withUpstreamTrace}) to each request's headers; other requests pass unchanged.
 */
export function traceHeaderFetch(base: typeof fetch): typeof fetch {
  return (input, init) => {
    const carrier = upstream.getStore();
    if (!carrier) return base(input, init);
    const headers = new Headers(init?.headers);
    for (const field of TRACE_FIELDS) {
      const value = carrier[field];
      if (value !== undefined) headers.set(field, value);
    }
    return base(input, { ...init, headers });
  };
}
