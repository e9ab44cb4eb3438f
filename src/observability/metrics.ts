/**
 * The broker's Prometheus metrics (issue 20; README "Observability"), served as text at
 * `GET /metrics` by the HTTP face. One prom-client `Registry` per gateway (never the global one),
 * so two gateways in one process count apart.
 *
 * Counted as they happen, in plain tallies: calls by outcome, tool and principal (from every
 * published record), call latency, attempts, records written and refused, upstream restarts.
 * Read at scrape time (gauges with `collect`): breaker states, upstream states, budget use, and
 * what a transport registers with {@link BrokerMetrics.gauge} (sessions and streams open per
 * era). Process metrics (`process_*`, `nodejs_*`) come from prom-client's defaults, sampled from
 * {@link BrokerMetrics.open} on (the CPU counters count from the process's start).
 *
 * prom-client itself is loaded by {@link BrokerMetrics.open}, at the first scrape: never on
 * stdio, where nothing serves the series (some 35 modules of the broker's start, issue 19), and
 * not on an HTTP face nobody scrapes. Its defaults sample the event loop's delay on a timer of
 * {@link EVENT_LOOP_RESOLUTION_MS}: opened at the start, an idle broker woke a hundred times a
 * second for a series no one read.
 */
import type { Registry } from 'prom-client';
import type { BreakerState } from '../broker/breaker.js';
import type { CallRecord } from '../broker/types.js';
import type { UpstreamState } from '../upstream/types.js';

/** Prefix of every series of ours. */
export const METRIC_PREFIX = 'mcp_broker_';

/** Upper bounds of the call latency buckets, in seconds. */
export const LATENCY_BUCKETS_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/** prom-client's event-loop delay sampling (`eventLoopMonitoringPrecision`, its default), in ms. */
export const EVENT_LOOP_RESOLUTION_MS = 10;

/**
 * How long the first {@link BrokerMetrics.open} waits once the registry is built, in ms: a few
 * samples of the event loop's delay, so the first scrape's `nodejs_eventloop_lag_*` are figures
 * (an empty histogram reads a minimum of 9.2e9 s and a mean of NaN).
 */
export const FIRST_SAMPLES_MS = 3 * EVENT_LOOP_RESOLUTION_MS;

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
  /** Per label set of (outcome, tool, principal, kind): calls, attempts and latency. Bounded by the roster, the principals and the outcomes. */
  private readonly tallies = new Map<string, Tally>();
  /** Records written and refused ({@link recordWritten}). */
  private readonly records = { written: 0, refused: 0 };
  /** Re-dials per upstream ({@link upstreamRestarted}). */
  private readonly restarts = new Map<string, number>();
  /** Gauges a transport added ({@link gauge}), by full name. */
  private readonly gauges = new Map<string, GaugeSpec>();
  private registry?: Promise<Registry>;
  /** prom-client's `Gauge`, once {@link open} has loaded it. */
  private Gauge?: typeof import('prom-client').Gauge;

  constructor(private readonly sources: MetricsSources) {}

  /**
   * Counts one published record (the publisher's subscriber). On the call path, so it only adds
   * to plain per-label-set tallies; prom-client reads them at scrape time. (Its labelled
   * `inc`/`observe` validate and hash the labels on every call: measured here at 6–10 µs a
   * record with three series, against under 1 µs for this, on a loaded 2-core machine.)
   */
  observeRecord(record: CallRecord): void {
    const tool = toolLabel(record);
    // Tool calls (no `kind`, the hot case) get a three-part key; a template over a possibly
    // undefined `kind` measured about ten times slower on Node 20.
    const key = record.kind === undefined ? `${record.outcome}\0${tool}\0${record.principal}` : `${record.outcome}\0${tool}\0${record.principal}\0${record.kind}`;
    let tally = this.tallies.get(key);
    if (!tally) {
      const kind = record.kind ?? 'tool';
      tally = { outcome: record.outcome, tool, principal: record.principal, kind, calls: 0, attempts: 0, buckets: new Float64Array(LATENCY_BUCKETS_SECONDS.length), sum: 0 };
      this.tallies.set(key, tally);
    }
    tally.calls++;
    tally.attempts += record.attempts;
    const seconds = record.durationMs / 1000;
    tally.sum += seconds;
    // Non-cumulative here; made cumulative when scraped. Past the last bound: only in the count (+Inf).
    for (let i = 0; i < LATENCY_BUCKETS_SECONDS.length; i++) {
      if (seconds <= LATENCY_BUCKETS_SECONDS[i]!) {
        tally.buckets[i]!++;
        break;
      }
    }
  }

  /** Counts a record written, or one that could not be written. */
  recordWritten(written: boolean): void {
    if (written) this.records.written++;
    else this.records.refused++;
  }

  /** Counts a re-dial of `upstream` after it had been ready. */
  upstreamRestarted(upstream: string): void {
    this.restarts.set(upstream, (this.restarts.get(upstream) ?? 0) + 1);
  }

  /**
   * Adds a gauge read at scrape time, e.g. a transport's open sessions: `read` returns each
   * label set with its value. A name registered twice keeps the first (one HTTP face per gateway).
   */
  gauge(name: string, help: string, labelNames: readonly string[], read: () => readonly { labels: Record<string, string>; value: number }[]): void {
    const fullName = `${METRIC_PREFIX}${name}`;
    if (this.gauges.has(fullName)) return;
    const spec: GaugeSpec = { name: fullName, help, labelNames, read };
    this.gauges.set(fullName, spec);
    void this.registry?.then((registry) => registerGauge(registry, spec, this.Gauge!));
  }

  /**
   * Loads prom-client and builds the registry (once; later calls return the same promise), then
   * waits {@link FIRST_SAMPLES_MS} for the first event-loop samples. {@link scrape} calls it.
   * Process metrics are sampled from here on; every tally above counts from the gateway's start.
   * Rejects when prom-client cannot be loaded.
   */
  open(): Promise<Registry> {
    return (this.registry ??= import('prom-client').then(async (client) => {
      this.Gauge = client.Gauge;
      const registry = this.build(client);
      await new Promise((resolve) => setTimeout(resolve, FIRST_SAMPLES_MS));
      return registry;
    }));
  }

  /** The Prometheus text exposition of every series, and its content type. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    const registry = await this.open();
    return { contentType: registry.contentType, body: await registry.metrics() };
  }

  private build({ collectDefaultMetrics, Counter, Gauge, Registry }: typeof import('prom-client')): Registry {
    const registry = new Registry();
    const registers = [registry];
    const { tallies, records, restarts, sources } = this;
    const spent = process.cpuUsage();
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_RESOLUTION_MS });
    // prom-client's CPU counters add what the process spends from when they are made (here, at the
    // first scrape): given what it had spent before, they count from its start, as their help says.
    const spentMicros = { process_cpu_user_seconds_total: spent.user, process_cpu_system_seconds_total: spent.system, process_cpu_seconds_total: spent.user + spent.system };
    for (const [name, micros] of Object.entries(spentMicros)) {
      const counter = registry.getSingleMetric(name);
      if (counter instanceof Counter) counter.inc(micros / 1e6);
    }
    new Counter({
      name: `${METRIC_PREFIX}calls_total`,
      help: 'Judged calls, by outcome, tool (advertised name; for resources, subscriptions and completions the server; ? for an unknown name), principal and kind (tool, resource, prompt, completion, subscribe).',
      labelNames: ['outcome', 'tool', 'principal', 'kind'],
      registers,
      collect() {
        this.reset();
        for (const t of tallies.values()) this.inc({ outcome: t.outcome, tool: t.tool, principal: t.principal, kind: t.kind }, t.calls);
      },
    });
    new Counter({
      name: `${METRIC_PREFIX}attempts_total`,
      help: 'Upstream attempts sent (retries included), by tool.',
      labelNames: ['tool'],
      registers,
      collect() {
        this.reset();
        const byTool = new Map<string, number>();
        for (const t of tallies.values()) if (t.attempts > 0) byTool.set(t.tool, (byTool.get(t.tool) ?? 0) + t.attempts);
        for (const [tool, n] of byTool) this.inc({ tool }, n);
      },
    });
    registry.registerMetric(latencyHistogram(tallies) as never);
    new Counter({
      name: `${METRIC_PREFIX}records_total`,
      help: 'Call records: written, or refused (could not be written; the call was answered guard_error or kept its refusal).',
      labelNames: ['result'],
      registers,
      collect() {
        this.reset();
        for (const result of ['written', 'refused'] as const) if (records[result] > 0) this.inc({ result }, records[result]);
      },
    });
    new Counter({
      name: `${METRIC_PREFIX}upstream_restarts_total`,
      help: 'Times an upstream was dialled again after it had been ready.',
      labelNames: ['upstream'],
      registers,
      collect() {
        this.reset();
        for (const [upstream, n] of restarts) this.inc({ upstream }, n);
      },
    });
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
    for (const spec of this.gauges.values()) registerGauge(registry, spec, Gauge);
    return registry;
  }
}

interface GaugeSpec {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  readonly read: () => readonly { labels: Record<string, string>; value: number }[];
}

/** Registers a transport's gauge ({@link BrokerMetrics.gauge}) in `registry`. */
function registerGauge(registry: Registry, spec: GaugeSpec, Gauge: typeof import('prom-client').Gauge): void {
  if (registry.getSingleMetric(spec.name)) return;
  new Gauge({
    name: spec.name,
    help: spec.help,
    labelNames: [...spec.labelNames],
    registers: [registry],
    collect() {
      this.reset();
      for (const { labels, value } of spec.read()) this.set(labels, value);
    },
  });
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

interface Tally {
  readonly outcome: string;
  readonly tool: string;
  readonly principal: string;
  readonly kind: string;
  calls: number;
  attempts: number;
  /** Observations per latency bucket, not cumulative ({@link LATENCY_BUCKETS_SECONDS}). */
  readonly buckets: Float64Array;
  /** Sum of the latencies, in seconds. */
  sum: number;
}

/**
 * `mcp_broker_call_duration_seconds`, a Prometheus histogram by outcome and tool, read from the
 * tallies when scraped. A metric object of prom-client's shape (`name`, `help`, `type`,
 * `aggregator`, `get()`, `reset()`), since its own `Histogram` takes observations one by one.
 */
function latencyHistogram(tallies: ReadonlyMap<string, Tally>) {
  const name = `${METRIC_PREFIX}call_duration_seconds`;
  return {
    name,
    help: 'Time from a call entering the broker path to its record, in seconds.',
    type: 'histogram',
    aggregator: 'sum',
    reset() {},
    get() {
      const merged = new Map<string, { outcome: string; tool: string; buckets: Float64Array; count: number; sum: number }>();
      for (const t of tallies.values()) {
        const key = `${t.outcome}\0${t.tool}`;
        let m = merged.get(key);
        if (!m) merged.set(key, (m = { outcome: t.outcome, tool: t.tool, buckets: new Float64Array(LATENCY_BUCKETS_SECONDS.length), count: 0, sum: 0 }));
        for (let i = 0; i < t.buckets.length; i++) m.buckets[i]! += t.buckets[i]!;
        m.count += t.calls;
        m.sum += t.sum;
      }
      const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
      for (const m of merged.values()) {
        const labels = { outcome: m.outcome, tool: m.tool };
        let cumulative = 0;
        LATENCY_BUCKETS_SECONDS.forEach((le, i) => {
          cumulative += m.buckets[i]!;
          values.push({ labels: { ...labels, le }, value: cumulative, metricName: `${name}_bucket` });
        });
        values.push({ labels: { ...labels, le: '+Inf' }, value: m.count, metricName: `${name}_bucket` });
        values.push({ labels, value: m.sum, metricName: `${name}_sum` });
        values.push({ labels, value: m.count, metricName: `${name}_count` });
      }
      return { name, help: this.help, type: 'histogram', values, aggregator: 'sum' };
    },
  };
}
