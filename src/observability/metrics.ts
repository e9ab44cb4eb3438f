/**
 * The broker's Prometheus metrics (issue 20; README "Observability"), served as text at
 * `GET /metrics` by the HTTP face. One prom-client `Registry` per gateway (never the global one),
 * so two gateways in one process count apart.
 *
 * Counted as they happen: calls by outcome, tool and principal (from every published record),
 * call latency, attempts, records written and refused, upstream restarts. Read at scrape time
 * (gauges with `collect`): breaker states, upstream states, budget use, and what a transport
 * registers with {@link BrokerMetrics.gauge} (sessions and streams open per era).
 * Process metrics (`process_*`, `nodejs_*`) come from prom-client's defaults.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { BreakerState } from '../broker/breaker.js';
import type { CallRecord } from '../broker/types.js';
import type { UpstreamState } from '../upstream/types.js';

/** Prefix of every series of ours. */
export const METRIC_PREFIX = 'mcp_broker_';

/** Upper bounds of the call latency buckets, in seconds. */
export const LATENCY_BUCKETS_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

const UPSTREAM_STATES: readonly UpstreamState[] = ['idle', 'connecting', 'ready', 'backoff', 'failed', 'closed', 'disabled'];

/** What the scrape-time gauges read; each a function so the values are current. */
export interface MetricsSources {
  /** Every upstream's name and state now. */
  upstreams(): readonly { name: string; state: UpstreamState }[];
  /** Every breaker that is not closed: the tool's advertised name and its state. */
  breakers(): readonly { name: string; state: BreakerState }[];
  /** Calls spent per live budget unit. */
  budgets(): readonly { unit: string; used: number }[];
}

export class BrokerMetrics {
  readonly registry = new Registry();
  private readonly calls: Counter<'outcome' | 'tool' | 'principal' | 'kind'>;
  private readonly latency: Histogram<'outcome' | 'tool'>;
  private readonly attempts: Counter<'tool'>;
  private readonly records: Counter<'result'>;
  private readonly restarts: Counter<'upstream'>;

  constructor(sources: MetricsSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.calls = new Counter({
      name: `${METRIC_PREFIX}calls_total`,
      help: 'Judged calls, by outcome, tool (advertised name; for resources, subscriptions and completions the server; ? for an unknown name), principal and kind (tool, resource, prompt, completion, subscribe).',
      labelNames: ['outcome', 'tool', 'principal', 'kind'],
      registers,
    });
    this.latency = new Histogram({
      name: `${METRIC_PREFIX}call_duration_seconds`,
      help: 'Time from a call entering the broker path to its record, in seconds.',
      labelNames: ['outcome', 'tool'],
      buckets: LATENCY_BUCKETS_SECONDS,
      registers,
    });
    this.attempts = new Counter({ name: `${METRIC_PREFIX}attempts_total`, help: 'Upstream attempts sent (retries included), by tool.', labelNames: ['tool'], registers });
    this.records = new Counter({
      name: `${METRIC_PREFIX}records_total`,
      help: 'Call records: written, or refused (could not be written; the call was answered guard_error or kept its refusal).',
      labelNames: ['result'],
      registers,
    });
    this.restarts = new Counter({ name: `${METRIC_PREFIX}upstream_restarts_total`, help: 'Times an upstream was dialled again after it had been ready.', labelNames: ['upstream'], registers });
    new Gauge({
      name: `${METRIC_PREFIX}upstream_state`,
      help: 'Each upstream state: 1 for the state it is in, 0 for the others.',
      labelNames: ['upstream', 'state'],
      registers,
      collect() {
        this.reset();
        for (const u of sources.upstreams()) for (const state of UPSTREAM_STATES) this.set({ upstream: u.name, state }, u.state === state ? 1 : 0);
      },
    });
    new Gauge({
      name: `${METRIC_PREFIX}breaker_state`,
      help: 'Breakers that are not closed: 1 per tool and state (open, half_open).',
      labelNames: ['tool', 'state'],
      registers,
      collect() {
        this.reset();
        for (const b of sources.breakers()) this.set({ tool: b.name, state: b.state }, 1);
      },
    });
    new Gauge({
      name: `${METRIC_PREFIX}breakers_open`,
      help: 'Breakers open or half-open now.',
      registers,
      collect() {
        this.set(sources.breakers().length);
      },
    });
    new Gauge({
      name: `${METRIC_PREFIX}budget_used_calls`,
      help: 'Calls spent by all live budget units together.',
      registers,
      collect() {
        this.set(sources.budgets().reduce((sum, b) => sum + b.used, 0));
      },
    });
    new Gauge({
      name: `${METRIC_PREFIX}budget_units`,
      help: 'Live budget units that have spent at least one call.',
      registers,
      collect() {
        this.set(sources.budgets().length);
      },
    });
  }

  /** Counts one published record (the publisher's subscriber). */
  observeRecord(record: CallRecord): void {
    const tool = toolLabel(record);
    this.calls.inc({ outcome: record.outcome, tool, principal: record.principal, kind: record.kind ?? 'tool' });
    this.latency.observe({ outcome: record.outcome, tool }, record.durationMs / 1000);
    if (record.attempts > 0) this.attempts.inc({ tool }, record.attempts);
  }

  /** Counts a record written, or one that could not be written. */
  recordWritten(written: boolean): void {
    this.records.inc({ result: written ? 'written' : 'refused' });
  }

  /** Counts a re-dial of `upstream` after it had been ready. */
  upstreamRestarted(upstream: string): void {
    this.restarts.inc({ upstream });
  }

  /**
   * Adds a gauge read at scrape time, e.g. a transport's open sessions: `read` returns each
   * label set with its value. A name registered twice keeps the first (one HTTP face per gateway).
   */
  gauge(name: string, help: string, labelNames: readonly string[], read: () => readonly { labels: Record<string, string>; value: number }[]): void {
    const fullName = `${METRIC_PREFIX}${name}`;
    if (this.registry.getSingleMetric(fullName)) return;
    new Gauge({
      name: fullName,
      help,
      labelNames: [...labelNames],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { labels, value } of read()) this.set(labels, value);
      },
    });
  }

  /** The Prometheus text exposition of every series, and its content type. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/** Label of a name no roster entry has: callers choose such names, so each would be a new series. */
export const UNKNOWN_TOOL_LABEL = '?';

/**
 * The `tool` label of a record, bounded by the roster: the advertised name of a tool or prompt;
 * for a resource, subscription or completion (whose names are URIs, unbounded) the server key;
 * {@link UNKNOWN_TOOL_LABEL} for a name that resolved to nothing (subject `?/<name>`).
 */
export function toolLabel(record: Pick<CallRecord, 'name' | 'subject' | 'kind'>): string {
  if (record.subject.startsWith('?/')) return UNKNOWN_TOOL_LABEL;
  if (record.kind === undefined || record.kind === 'prompt') return record.name;
  const slash = record.subject.indexOf('/');
  return slash > 0 ? record.subject.slice(0, slash) : UNKNOWN_TOOL_LABEL;
}
