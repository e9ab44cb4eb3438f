/** Traces and metrics of the broker (issue 20; README "Observability"). */
export { BrokerMetrics, LATENCY_BUCKETS_SECONDS, METRIC_PREFIX, toolLabel, UNKNOWN_TOOL_LABEL, type MetricsSources } from './metrics.js';
export { CallTracer, LEGACY_ERA, PROTOCOL_VERSION_META_KEY, type CallTracerOptions, type OtlpSettings } from './tracing.js';
