/**
 * OpenTelemetry traces of the call path (issue 20; README "Observability"). Off unless
 * `observability.otlp.endpoint` is set: then the gateway builds one {@link CallTracer} and
 * {@link CallTracer.instrument} wraps the stages; when off nothing here runs and no span object
 * is made.
 *
 * Each call is one span (`tools/call <name>`, kind SERVER), its parent the trace context the
 * caller sent: `_meta.traceparent` (with `tracestate`, `baggage`), else the HTTP `traceparent`
 * header of the request (shared/trace-context.ts). Inside it, one span per stage that ran
 * (`broker.<stage>`, nested as the stages nest; a stage after a refusal never runs and has none)
 * and one per upstream attempt (`attempt <n>`, kind CLIENT, a child of the stage around invoke).
 * Each attempt's context is sent upstream ({@link BrokerCall.traceMeta}), so a chain of brokers
 * is one trace.
 *
 * Attributes (`mcp_broker.*`): subject, advertised name, principal, unit, outcome, status,
 * attempts, bytes out, era, call id; the unit (a modern caller's key in it) scrubbed as the
 * record's is, a legacy session's (its session id) cut to the 8 characters logs show.
 * Arguments and results never become attributes. The call span's ids are written
 * in the record (`traceId`, `spanId`) when the call is sampled.
 *
 * Sampling: parent-based; a call without a sampled parent is sampled with `samplingRatio`.
 * Spans are batched and exported over OTLP/HTTP (JSON) every `exportDelayMs`; {@link shutdown}
 * flushes what is left. Nothing here can fail a call: the API never throws, and an export
 * failure is the exporter's to log.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { OUTCOME_STATUS } from '../broker/outcomes.js';
import type { Stage } from '../broker/runner.js';
import type { BrokerCall } from '../broker/types.js';
import { sessionTag } from '../shared/ids.js';
import { callerTrace, traceCarrierOf, type TraceCarrier } from '../shared/trace-context.js';

import { LEGACY_ERA, MODERN_ERA, PROTOCOL_VERSION_META_KEY } from './eras.js';

export { LEGACY_ERA, MODERN_ERA, PROTOCOL_VERSION_META_KEY };
/** Longest wait for the last export at shutdown, in ms ({@link CallTracer.shutdown}). */
export const TRACE_SHUTDOWN_TIMEOUT_MS = 2000;
/** Name of the stage whose every run is one upstream attempt (broker/invoke.ts). */
const ATTEMPT_STAGE = 'invoke';

export interface CallTracerOptions {
  /** Where finished spans go (an OTLP exporter, or an in-memory one in tests). */
  readonly exporter: SpanExporter;
  /** Share of calls without a sampled parent that are traced, 0–1 (`observability.otlp.samplingRatio`). */
  readonly samplingRatio: number;
  readonly serviceName: string;
  readonly version: string;
  /** Time between batch exports, in ms (`observability.otlp.exportDelayMs`). */
  readonly exportDelayMs: number;
}

/** The OTLP settings of the config (`observability.otlp`). */
export interface OtlpSettings {
  readonly endpoint: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly samplingRatio: number;
  readonly serviceName: string;
  readonly exportDelayMs: number;
}

interface CallTrace {
  /** The context of the innermost span open now. */
  ctx: Context;
  /** Attempts started. */
  attempts: number;
}

const propagator = new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] });
const carrierGetter = {
  keys: (carrier: TraceCarrier) => Object.keys(carrier),
  get: (carrier: TraceCarrier, key: string) => carrier[key as keyof TraceCarrier],
};
const carrierSetter = { set: (carrier: TraceCarrier, key: string, value: string) => void (carrier[key as keyof TraceCarrier] = value) };

export class CallTracer {
  private readonly provider: BasicTracerProvider;
  private readonly tracer: Tracer;
  private readonly calls = new WeakMap<BrokerCall, CallTrace>();
  /** Makes caller-given text safe to export ({@link instrument}); none until told. */
  private scrubText: (text: string) => string = (text) => text;

  constructor(options: CallTracerOptions) {
    const processor: SpanProcessor = new BatchSpanProcessor(options.exporter, { scheduledDelayMillis: options.exportDelayMs });
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: options.serviceName, [ATTR_SERVICE_VERSION]: options.version }),
      sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(options.samplingRatio) }),
      spanProcessors: [processor],
    });
    this.tracer = this.provider.getTracer('mcp-broker', options.version);
  }

  /** A tracer exporting over OTLP/HTTP (JSON) to `settings.endpoint`, with `settings.headers`. */
  static otlp(settings: OtlpSettings, version: string): CallTracer {
    return new CallTracer({
      exporter: new OTLPTraceExporter({ url: settings.endpoint, headers: { ...settings.headers } }),
      samplingRatio: settings.samplingRatio,
      serviceName: settings.serviceName,
      version,
      exportDelayMs: settings.exportDelayMs,
    });
  }

  /**
   * The stages with a call span around them all and a span around each (outermost first, as
   * given). `scrubText` (the scrubber's `text`, as the record stage's) is applied to the
   * caller-given text that becomes an attribute (the unit), as it is to the record's.
   */
  instrument(stages: readonly Stage[], scrubText?: (text: string) => string): Stage[] {
    if (scrubText) this.scrubText = scrubText;
    return [this.callStage(), ...stages.map((stage) => this.stageSpans(stage))];
  }

  /** Exports every finished span now. */
  flush(): Promise<void> {
    return this.provider.forceFlush();
  }

  /**
   * Flushes and stops exporting; spans started afterwards are dropped. Waits at most
   * `timeoutMs` (default {@link TRACE_SHUTDOWN_TIMEOUT_MS}) for the last export, so a collector
   * that is down cannot hold up the broker's exit; then whatever was not exported is dropped.
   */
  async shutdown(timeoutMs = TRACE_SHUTDOWN_TIMEOUT_MS): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
      timer.unref();
    });
    try {
      await Promise.race([this.provider.shutdown(), gaveUp]);
    } finally {
      clearTimeout(timer);
    }
  }

  private callStage(): Stage {
    return {
      name: 'trace',
      run: async (call, next) => {
        const carrier = traceCarrierOf(call.request.meta) ?? callerTrace();
        const parent = carrier ? propagator.extract(ROOT_CONTEXT, carrier, carrierGetter) : ROOT_CONTEXT;
        const span = this.tracer.startSpan('tools/call', { kind: SpanKind.SERVER, attributes: callerAttributes(call, this.scrubText) }, parent);
        const ids = span.spanContext();
        if (span.isRecording()) {
          call.notes.traceId = ids.traceId;
          call.notes.spanId = ids.spanId;
        }
        this.calls.set(call, { ctx: trace.setSpan(parent, span), attempts: 0 });
        try {
          await next();
        } finally {
          this.calls.delete(call);
          endCallSpan(span, call);
        }
      },
    };
  }

  private stageSpans(stage: Stage): Stage {
    const attempt = stage.name === ATTEMPT_STAGE;
    return {
      name: stage.name,
      run: async (call, next) => {
        const state = this.calls.get(call);
        if (!state) return stage.run(call, next);
        const parent = state.ctx;
        let span: Span;
        if (attempt) {
          const n = ++state.attempts;
          span = this.tracer.startSpan(
            `attempt ${n}`,
            { kind: SpanKind.CLIENT, attributes: { 'mcp_broker.attempt': n, 'mcp_broker.server': call.target?.server ?? '', 'mcp_broker.tool': call.target?.toolName ?? '' } },
            parent,
          );
        } else {
          span = this.tracer.startSpan(`broker.${stage.name}`, { kind: SpanKind.INTERNAL }, parent);
        }
        state.ctx = trace.setSpan(parent, span);
        if (attempt) {
          const carrier: TraceCarrier = {};
          propagator.inject(state.ctx, carrier, carrierSetter);
          call.traceMeta = carrier;
        }
        try {
          await stage.run(call, next);
        } finally {
          state.ctx = parent;
          if (call.outcome) span.setAttribute('mcp_broker.outcome', call.outcome);
          if (attempt && call.outcome && call.outcome !== 'ok' && call.outcome !== 'tool_error') span.setStatus({ code: SpanStatusCode.ERROR, message: call.outcome });
          span.end();
        }
      },
    };
  }
}

/** The form of a protocol revision (`2026-07-28`). */
const REVISION = /^\d{4}-\d{2}-\d{2}$/;

/** What is known of the call before any stage ran. */
function callerAttributes(call: BrokerCall, scrubText: (text: string) => string): Attributes {
  const version = call.request.meta?.[PROTOCOL_VERSION_META_KEY];
  return {
    'mcp.method.name': 'tools/call',
    'mcp_broker.call_id': call.callId,
    'mcp_broker.principal': call.session.principal,
    'mcp_broker.unit': unitAttribute(call, scrubText),
    // The request's own revision; a modern request whose envelope the SDK took off reads as 2026-07-28.
    // Only a revision's form is taken: a legacy session's request may claim any text there, unchecked.
    'mcp_broker.era': typeof version === 'string' && REVISION.test(version) ? version : call.session.era === 'modern' ? MODERN_ERA : LEGACY_ERA,
  };
}

/**
 * The unit as a span shows it. A legacy (2025-11-25) session's unit is its session id, a
 * credential: only its {@link sessionTag} (first 8 characters, as the logs show it), which still
 * ties the session's spans together. A modern unit ends in the caller's own key: scrubbed, as
 * the record's is.
 */
function unitAttribute(call: BrokerCall, scrubText: (text: string) => string): string {
  const { unit, sessionId } = call.session;
  return sessionId !== null && unit === sessionId ? sessionTag(unit) : scrubText(unit);
}

/** Names the call span after its tool and sets what the path settled. */
function endCallSpan(span: Span, call: BrokerCall): void {
  const record = call.record;
  const name = record?.name ?? call.target?.name;
  // Named after a roster tool only: a name nobody serves is the caller's text, unbounded.
  if (call.target) span.updateName(`tools/call ${call.target.name}`);
  const outcome = call.outcome ?? 'guard_error';
  span.setAttributes({
    'mcp_broker.subject': record?.subject ?? (call.target ? `${call.target.server}/${call.target.toolName}` : ''),
    'mcp_broker.name': name ?? '',
    'gen_ai.tool.name': name ?? '',
    'mcp_broker.outcome': outcome,
    'mcp_broker.status': OUTCOME_STATUS[outcome],
    'mcp_broker.attempts': call.attempts,
    'mcp_broker.bytes_out': call.bytesOut,
  });
  // The outcome only: a reason can quote the result (a tool_error's text), and results never become attributes.
  if (outcome !== 'ok') span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
  span.end();
}
