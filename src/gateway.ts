/**
 * The composition root: builds every part from the config and owns start and stop
 * (DESIGN.md "Folders"). Transports create sessions on it; nothing else constructs parts.
 */
import { EventEmitter } from 'node:events';
import type { ClientCapabilities, LoggingMessageNotification } from '@modelcontextprotocol/server';
import { NdjsonRecordSink, RecordPublisher, type RecordSink } from './audit/index.js';
import { Broker, orderStages, type CallRecord } from './broker/index.js';
import { deadlineStage } from './broker/deadline.js';
import { invokeStage } from './broker/invoke.js';
import { judgeStage, type JudgeDeps } from './broker/judge.js';
import { ApprovalStates } from './broker/approval-state.js';
import { relayStage } from './broker/relay-input.js';
import { SealedStates } from './broker/sealed-state.js';
import { cutName, recordStage, shownRecord, type RecordDeps } from './broker/record.js';
import { cutReason } from './broker/failure.js';
import type { Stage } from './broker/runner.js';
import { Breakers, breakerStage } from './broker/breaker.js';
import { BudgetLedger, budgetFromEnv, budgetStage } from './broker/budget.js';
import { evaluateStage } from './broker/evaluate.js';
import { pinRoster } from './broker/pins.js';
import { ToolFacts } from './broker/tool-facts.js';
import { approveHint } from './broker/approve-hint.js';
import { isPrivilegedPrincipal, livePolicy, type LivePolicy } from './broker/policy.js';
import { diffConfig, type ConfigDiff } from './config/diff.js';
import { PrimitiveGuard } from './broker/primitive-judge.js';
import { publishStage } from './broker/publish.js';
import { visibleTools, type VisibleToolsDeps } from './broker/visible-tools.js';
import { retryStage } from './broker/retry.js';
import { scrubStage } from './broker/scrub.js';
import { SqliteStore, type Store } from './store/index.js';
import { TaskEngine } from './tasks/index.js';
import type { LoadedConfig } from './config/load.js';
import { serverKind, type RestServerConfig, type ServerConfig } from './config/schema.js';
import { assertNoRosterCollision, loadFunctionModules, ToolRouter, type ModuleImporter } from './router/index.js';
import { registerBuiltins, type Builtins, type ExperimentalCapabilities } from './builtins/index.js';
import { systemClock, type Clock } from './shared/clock.js';
import { BrokerError, ConfigError, messageOf } from './shared/errors.js';
import type { Logger } from './shared/logger.js';
import { cut } from './shared/cut.js';
import { Scrubber } from './shared/scrub.js';
import { scrubbedTaskRow } from './tasks/scrubbed-row.js';
import { McpUpstream, type McpUpstreamOptions } from './upstream/connection.js';
import { IsolatedUpstream } from './upstream/isolated.js';
import { offeredCapabilities } from './upstream/modern-call.js';
import { Registry, type ListKind } from './upstream/registry.js';
import type { Roster } from './upstream/roster.js';
import { ResourceRouter } from './upstream/resources.js';
import { isUpstreamSurface, liveSurface, servedSurface, surfaceKey, type ServedSurface, type SurfaceBasis, type UpstreamSurface } from './upstream/surface.js';
import { UpstreamLogLevel } from './upstream/log-level.js';
import { RestUpstream } from './upstream/rest/index.js';
import type { Upstream } from './upstream/types.js';
import { VERSION } from './version.js';
import { BrokerMetrics } from './observability/metrics.js';
import type { CallTracer } from './observability/tracing.js';

/** Most principal-and-upstream verdicts the gateway keeps for one roster ({@link Gateway.surface}); principals are configured, a bound all the same. */
const MAX_SIGHT_VERDICTS = 10_000;

/** The package version, for `serverInfo` and `clientInfo` (src/version.ts). */
export { VERSION } from './version.js';

/**
 * The tracer `observability.otlp` asks for (an OTLP/HTTP exporter to its endpoint), or none when
 * it is not set. OpenTelemetry (some 270 modules) is imported here, on demand, so a broker without
 * tracing never loads it (issue 19: cold start).
 */
export async function otlpTracer(config: LoadedConfig): Promise<CallTracer | undefined> {
  if (!config.observability.otlp) return undefined;
  const { CallTracer } = await import('./observability/tracing.js');
  return CallTracer.otlp(config.observability.otlp, VERSION);
}

export interface GatewayDeps {
  logger: Logger;
  /** How user function modules (`functions`) are imported; default the native `import()` (router/modules.ts {@link ModuleImporter}). */
  importModule?: ModuleImporter;
  /** The CLI script that started this broker (absolute), so refusals name an approve command that runs as printed. */
  cliPath?: string;
  clock?: Clock;
  /** Where records go; default the ndjson file of `broker.records`. */
  records?: RecordSink;
  scrubber?: Scrubber;
  /** Pins and approvals; default the SQLite store in `broker.dataDir`. */
  store?: Store;
  /** Where `MCP_BROKER_CALL_BUDGET` is read; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /**
   * Traces the call path; none by default. For `observability.otlp` the CLI passes
   * {@link otlpTracer}'s (OpenTelemetry loads only then); tests pass one with an in-memory exporter.
   */
  tracer?: CallTracer;
}

export interface GatewayEvents {
  /** A merged list changed: every session sends `notifications/<kind>/list_changed`. */
  listChanged: [kind: ListKind];
  /** An upstream resource changed: sessions subscribed to `uri` send `resources/updated`. */
  resourceUpdated: [uri: string, server: string];
  /**
   * An upstream log message, scrubbed, for sessions at or above its level. `owner` is the session
   * it is provably tied to (it arrived on the response stream of that session's call; see
   * `UpstreamEvents.log`): only that session receives it. Undefined: it goes to privileged
   * sessions only (principal `local` or role `operator`), whatever calls are in flight, so one
   * principal never reads another's upstream logs.
   */
  /** A config reload was applied ({@link Gateway.reload}). */
  reloaded: [diff: ConfigDiff];
  log: [params: LoggingMessageNotification['params'], owner: string | undefined];
}

/**
 * Most characters of an upstream's last error kept for the status page (`lastError`), counted
 * after scrubbing (`…` marking a cut): an error an upstream answered to its listing is its own
 * text, up to `broker.maxMessageBytes`, and the page scrubs what is kept again on every read.
 */
export const LAST_ERROR_MAX_CHARS = 2048;

export class Gateway extends EventEmitter<GatewayEvents> {
  readonly config: LoadedConfig;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly scrubber: Scrubber;
  readonly registry: Registry;
  /** Which upstream serves a resource, and subscriptions counted across sessions (upstream/resources.ts). */
  readonly resources: ResourceRouter;
  /** The log level upstreams are asked for, from every session's `logging/setLevel` (upstream/log-level.ts). */
  readonly logLevel: UpstreamLogLevel;
  /** Per-tool settings, deadlines, text verdicts and read-only-ness, from the config (broker/tool-facts.ts). */
  readonly tools: ToolFacts;
  readonly router: ToolRouter;
  readonly broker: Broker;
  readonly records: RecordSink;
  /** The CLI script that started this broker, when it was the CLI ({@link GatewayDeps.cliPath}). */
  private readonly cliPath?: string;
  private readonly importModule?: ModuleImporter;
  readonly publisher: RecordPublisher<CallRecord>;
  /** Pins, approvals, first uses (issue 3); closed by `stop()`. */
  readonly store: Store;
  /** Durable tasks and the approval inbox (src/tasks/); started by `start()`, stopped by `stop()`. */
  readonly tasks: TaskEngine;
  /** The policy; a config reload replaces its rules in place ({@link reload}). */
  readonly policy: LivePolicy;
  /** The policy, records and publication of prompts, resources and completions (broker/primitive-judge.ts). */
  readonly primitives: PrimitiveGuard;
  /** The broker's one codec of sealed `requestState`s (approvals, relayed input requests), key in the store. */
  readonly sealedStates: SealedStates;
  /** Approval states of modern callers (over {@link sealedStates}), shared by the judge and the primitive guard. */
  readonly approvalStates: ApprovalStates;
  /** What the judge stage judges with (set by {@link buildStages}): a modern held retry of a tool is judged with it too (broker/judge.ts `heldRetryJoins`). */
  judgeDeps!: JudgeDeps;
  /** Prometheus series of this gateway (`GET /metrics`; observability/metrics.ts). */
  readonly metrics: BrokerMetrics;
  /** Traces of the call path; present only when `observability.otlp` is configured (observability/tracing.ts). Flushed by `stop()`. */
  readonly tracer?: CallTracer;
  /** Circuit breakers of every tool (broker/breaker.ts), for the status page and metrics. */
  readonly breakers: Breakers;
  private readonly env: NodeJS.ProcessEnv;
  /** `experimental` capabilities every session declares (the builtins', e.g. `mcp-broker/reconnect`). */
  readonly experimental: ExperimentalCapabilities;
  private readonly builtins: Builtins;
  /**
   * Settles when every upstream's first dial has settled (ready or failed), or once
   * `broker.startGraceMs` has passed since {@link start} began dialling, whichever comes first:
   * then the roster serves what is ready, and an upstream ready later joins it with `list_changed`.
   */
  readonly ready: Promise<void>;
  /** Whether {@link ready} has settled: awaiting it then would only cost a turn. */
  get readySettled(): boolean {
    return this.settled;
  }
  private settled = false;
  /** Whether {@link start} was called: until then {@link ready} waits for a dial nobody asked for. */
  get startRequested(): boolean {
    return this.started;
  }
  /** The surface remembered for these upstream definitions, once looked up (undefined: none). */
  private rememberedSurface?: Promise<UpstreamSurface | undefined>;
  /** That surface, while {@link ready} has not settled (what {@link surface} answers with then). */
  private knownSurface?: UpstreamSurface;
  private markReady!: () => void;
  private started = false;
  private isReady = false;
  private prepared?: Promise<void>;
  /** What upstreams are offered at dial (set by `start`), for upstreams a reload adds. */
  private offered: ClientCapabilities = {};
  /** Each upstream's first dial (set by `start`), by server: settles when it is ready or failed. */
  private readonly firstDials = new Map<string, Promise<void>>();
  /** Servers whose first dial has not settled yet. */
  private readonly dialling = new Set<string>();

  /**
   * Builds every part from `config`; nothing is dialled until {@link start}. Opens the records
   * file's lock (`broker.records.path`) and the store (`broker.dataDir`) unless `deps` gives them;
   * both are owned and closed by {@link stop}. Throws {@link ConfigError} for a records path or
   * store that cannot be used and for a bad `MCP_BROKER_CALL_BUDGET`; a constructor that throws
   * has closed again what it opened (what `deps` gave stays the caller's).
   */
  constructor(config: LoadedConfig, deps: GatewayDeps) {
    super();
    this.setMaxListeners(0);
    this.config = config;
    this.logger = deps.logger;
    this.clock = deps.clock ?? systemClock;
    this.scrubber = deps.scrubber ?? new Scrubber(config.secrets);
    // What the constructor opens (the records file's lock, the store), closed again when a later
    // step throws: a library user gets no open SQLite handle or records lock from a refused
    // construction (the CLI's exit hooks would release them; an in-process caller goes on).
    // Both closes finish synchronously (neither awaits), so they are released before the throw.
    const opened: { close(): Promise<void> }[] = [];
    try {
      this.records =
        deps.records ??
        atPath('broker.records.path', () =>
          new NdjsonRecordSink({
            path: config.broker.records.path,
            maxBytes: config.broker.records.maxBytes,
            maxFiles: config.broker.records.maxFiles,
            fsync: config.broker.records.fsync,
            logger: deps.logger,
          }),
        );
      if (!deps.records) opened.push(this.records);
      this.publisher = new RecordPublisher<CallRecord>(this.logger);
      // Read when judging: the roster of that moment (a tool renamed because a sibling's name sanitises alike is judged under the shared name too).
      const sharedOf = (names: ReadonlyMap<string, string>, name: string) => (names.size ? names.get(name) : undefined);
      this.policy = livePolicy(config.policy, {
        tool: (name) => sharedOf(this.registry.roster.sharedToolNames, name),
        prompt: (name) => sharedOf(this.registry.roster.sharedPromptNames, name),
      });
      this.env = deps.env ?? process.env;
      this.cliPath = deps.cliPath;
      this.importModule = deps.importModule;
      this.store = deps.store ?? atPath('broker.dataDir', () => SqliteStore.open(config.broker.dataDir));
      if (!deps.store) opened.push(this.store);
      this.registry = new Registry(this.logger, this.scrubber);
      this.sealedStates = new SealedStates({ store: this.store, clock: this.clock });
      // `policy.askTimeoutMs` is read where it is used (here and below): a reload replaces `config.policy`.
      this.approvalStates = new ApprovalStates({
        store: this.store,
        clock: this.clock,
        get ttlMs() {
          return config.policy.askTimeoutMs;
        },
        sealed: this.sealedStates,
      });
      this.logLevel = new UpstreamLogLevel(this.registry);
      this.tools = new ToolFacts(config, this.policy);
      this.resources = new ResourceRouter({ registry: this.registry, logger: this.logger, timeoutMs: config.broker.timeoutMs });
      this.primitives = new PrimitiveGuard({
        policy: this.policy,
        prefixOf: (server) => this.registry.prefixOf(server),
        records: this.records,
        publisher: this.publisher,
        clock: this.clock,
        logger: this.logger,
        scrubArgs: (a) => this.scrubber.value(a),
        scrubText: (t) => this.scrubber.text(t),
        shown: this.shownRecords(),
        get askTimeoutMs() {
          return config.policy.askTimeoutMs;
        },
        onRecorded: (written) => this.metrics.recordWritten(written),
        approvalStates: this.approvalStates,
        hold: (running, abort) => this.broker.hold(running, abort),
      });
      this.ready = new Promise((resolve) => (this.markReady = resolve));
      for (const [name, server] of Object.entries(config.mcpServers)) this.addUpstream(name, server, this.createUpstream(name, server));
      this.router = new ToolRouter(this.registry, this.clock, {
        get askTimeoutMs() {
          return config.policy.askTimeoutMs;
        },
      });
      // The broker's own tools (broker__reconnect, estate__*), served through the router (issue 4).
      this.builtins = registerBuiltins(this);
      this.experimental = this.builtins.experimental;
      this.breakers = new Breakers({ clock: this.clock, threshold: config.broker.breaker.threshold, openMs: config.broker.breaker.openMs });
      this.metrics = new BrokerMetrics({
        upstreams: () => this.registry.upstreams.map((u) => ({ name: u.name, state: u.status.state })),
        breakers: () => this.breakers.notClosed(),
        budgets: () => this.budgets.entries(),
      });
      this.publisher.subscribe((record) => this.metrics.observeRecord(record));
      this.tracer = deps.tracer;
      this.broker = new Broker(this.buildStages(), this.clock);
      this.tasks = new TaskEngine({
        store: this.store,
        clock: this.clock,
        logger: this.logger,
        run: (request, session, target) => this.broker.call(request, session, target),
        record: (record) => this.writeRecord(record),
        scrubArgs: (a) => this.scrubber.value(a),
        shown: (row) => scrubbedTaskRow(this.scrubber, row),
        ttlMs: config.broker.taskTtlMs,
        maxTtlMs: config.broker.maxTaskTtlMs,
        timing: { heartbeatMs: config.broker.taskHeartbeatMs, staleMs: config.broker.taskStaleMs, pollMs: config.broker.taskPollMs },
        askMode: () => this.policy.config.askMode,
        ready: (row) => this.isReady && this.firstDialOver(row.name),
        stopping: () => this.broker.draining,
      });
      this.broker.onSettled = (call, answer) => this.tasks.onSettled(call, answer);
      // Lists change many times during the first dial; clients list after `ready`, so stay quiet until then.
      this.registry.on('listChanged', (kind) => this.isReady && this.emit('listChanged', kind));
      // Tool pinning: every upstream tool's definition is pinned when first seen (issue 3).
      this.registry.on('listChanged', (kind) => kind === 'tools' && void pinRoster(this.store, this.registry.roster, this.clock, this.logger));
      this.registry.on('resourceUpdated', (uri, server) => this.emit('resourceUpdated', uri, server));
      this.registry.on('log', (params, server, owner) =>
        // Scrubbed like every other log line: an upstream may log its own secrets (issue 3 §6).
        this.emit(
          'log',
          { ...params, data: this.scrubber.value(params.data), logger: params.logger ?? server } as LoggingMessageNotification['params'],
          owner,
        ),
      );
    } catch (err) {
      for (const resource of opened.reverse()) void resource.close().catch(() => undefined);
      throw err;
    }
  }

  /** Adds the upstream of one server to the registry (in its place when it replaces one). */
  private addUpstream(name: string, server: ServerConfig, upstream: Upstream): Upstream {
    this.scrubber.addSecrets(upstream.secrets);
    const prefix = server.prefix === false ? '' : (server.prefix ?? name);
    const settings = this.tools.settings(name);
    this.registry.add({
      upstream,
      prefix,
      isDisabled: settings ? (toolName, advertised) => settings.for(toolName, advertised).disabled === true : undefined,
      resourcePriority: 'resourcePriority' in server ? server.resourcePriority : 0,
    });
    upstream.on('state', (status) => this.logger.debug({ upstream: name, ...status }, 'upstream state'));
    let wasReady = false;
    upstream.on('state', (status) => {
      if (status.state === 'ready') wasReady = true;
      else if (status.state === 'connecting' && wasReady) this.metrics.upstreamRestarted(name);
    });
    upstream.on('state', (status) => {
      if (status.message && (status.state === 'failed' || status.state === 'backoff')) {
        // Scrubbed whole, then cut: a secret known now that ran across the cut is redacted whole.
        this.lastErrors.set(name, { at: this.clock.now(), message: cut(this.scrubber.text(status.message), LAST_ERROR_MAX_CHARS) });
      }
    });
    return upstream;
  }

  /**
   * Applies a new config without a restart (issue 18 §5): servers added are started, removed
   * ones closed, changed ones re-dialled (the others, and every session, untouched); the policy,
   * principals and per-tool settings take effect on the next request; every session is sent
   * `list_changed`. Other changed sections (`broker`, `http`, `estate`, `functions`) apply at the
   * next start and are returned in `needsRestart`. Secrets of the old config stay scrubbed.
   * Reloads run one at a time. `next` must already be validated (`loadConfigFile`).
   */
  reload(next: LoadedConfig): Promise<ConfigDiff> {
    const run = this.reloading.then(() => this.applyConfig(next));
    this.reloading = run.catch(() => undefined);
    return run;
  }
  private reloading: Promise<unknown> = Promise.resolve();

  /** Checks a reload must pass before anything is applied (a transport's own rules); each throws a {@link ConfigError}. */
  readonly reloadChecks: ((next: LoadedConfig) => void)[] = [];

  private async applyConfig(next: LoadedConfig): Promise<ConfigDiff> {
    for (const check of this.reloadChecks) check(next);
    const diff = diffConfig(this.config, next);
    // The upstreams to start, made and prepared (a REST upstream's OpenAPI file loaded) before
    // anything is applied: one that cannot be refuses the reload with the running config whole.
    // (Prepared after the old config was half replaced, a failure left a mix of both serving.)
    const made = new Map<string, Upstream>();
    for (const name of [...diff.changed, ...diff.added]) made.set(name, this.createUpstream(name, next.mcpServers[name]!));
    if (this.started || this.prepared) await Promise.all([...made.values()].map((u) => u.prepare?.()));
    const config = this.config;
    this.scrubber.addSecrets(next.secrets);
    // Sections read on demand are replaced in place, so closures holding them see the new values.
    replaceContents(config.principals, next.principals);
    replaceContents(config.mcpServers, next.mcpServers);
    config.policy = next.policy;
    this.policy.replace(next.policy);
    this.tools.forget();
    const closing: Promise<void>[] = [];
    for (const name of diff.removed) {
      const entry = this.registry.remove(name);
      if (entry) closing.push(entry.upstream.close().catch(() => undefined));
    }
    const starting: Upstream[] = [];
    for (const name of [...diff.changed, ...diff.added]) {
      const old = this.registry.upstream(name);
      starting.push(this.addUpstream(name, next.mcpServers[name]!, made.get(name)!));
      if (old) closing.push(old.close().catch(() => undefined));
    }
    await Promise.all(closing);
    if (this.started) {
      await Promise.all(
        starting.map(async (u) => {
          if (u instanceof McpUpstream) u.setClientCapabilities(this.offered);
          await u.start();
        }),
      );
    }
    this.registry.rebuild();
    // Resource subscriptions judged under the new policy: one no subscriber may have any more is
    // let go upstream, one allowed again is taken again (not awaited: upstream round trips).
    void this.resources.recheck().catch((err) => this.logger.warn({ err: messageOf(err) }, 'resource subscriptions not judged again after the reload'));
    if (this.isReady) for (const kind of ['tools', 'prompts', 'resources'] as const) this.emit('listChanged', kind);
    this.emit('reloaded', diff);
    return diff;
  }

  /**
   * The last error line of each upstream that failed or went into backoff, and when (ms since the
   * epoch); for the status page. Scrubbed when kept, then cut at {@link LAST_ERROR_MAX_CHARS}; a reader scrubs it again as it shows it (a
   * reload may have added a secret since) with `Scrubber.cutText`: the line may have been cut
   * when kept, through a value that became a secret only later.
   */
  readonly lastErrors = new Map<string, { at: number; message: string }>();

  /** Calls spent per unit; a session's unit is forgotten when the session ends. */
  readonly budgets = new BudgetLedger();

  /**
   * Writes and publishes a record made outside the call path (a parked call settled with no call
   * waiting on it, src/tasks/engine.ts), its caller- and upstream-given text scrubbed, then cut,
   * as on the call path: `name` and `subject` at `RECORD_NAME_MAX_CHARS` (the record stage), the
   * reason at `MAX_REASON_CHARS` (the scrub stage). Its `args` are the row's, scrubbed when the row
   * was stored: scrubbed again, as a record is scrubbed with the secrets known when it is written.
   * Published as shown (`shownRecord`, as the record stage does). Rejects when the sink refuses it.
   */
  private async writeRecord(record: CallRecord): Promise<void> {
    const text = (t: string) => this.scrubber.text(t);
    const generation = this.scrubber.generation;
    const scrubbed: CallRecord = {
      ...record,
      unit: text(record.unit),
      subject: cutName(text(record.subject)),
      name: cutName(text(record.name)),
      args: this.scrubber.value(record.args),
      ...(record.reason !== undefined && { reason: cutReason(text(record.reason)) }),
    };
    try {
      await this.records.append(scrubbed);
    } catch (err) {
      this.metrics.recordWritten(false);
      throw err;
    }
    this.metrics.recordWritten(true);
    try {
      this.publisher.publish(this.scrubber.generation === generation ? scrubbed : shownRecord(this.scrubber, scrubbed));
    } catch (err) {
      this.logger.warn({ callId: record.callId, err: messageOf(err) }, 'record publication failed');
    }
  }

  /** The record stage's and the primitive guard's `shown` (broker/record.ts `RecordDeps`): the scrubber's generation and `shownRecord`. */
  private shownRecords(): NonNullable<RecordDeps['shown']> {
    return { generation: () => this.scrubber.generation, record: (r) => shownRecord(this.scrubber, r) };
  }

  /** The call path, in the seed's order. */
  protected buildStages(): Stage[] {
    const config = this.config;
    const { broker, principals } = config;
    const scrubber = this.scrubber;
    const budget = budgetFromEnv(this.env) ?? broker.budgetPerUnit;
    const stages = orderStages({
      publish: publishStage({ publisher: this.publisher, logger: this.logger }),
      record: recordStage({
        records: this.records,
        clock: this.clock,
        logger: this.logger,
        scrubArgs: (a) => scrubber.value(a),
        scrubText: (t) => scrubber.text(t),
        shown: this.shownRecords(),
        onRecorded: (written) => this.metrics.recordWritten(written),
      }),
      // Read at each call: a reload replaces `config.policy` (the output policy applies from the next call).
      evaluate: evaluateStage({
        get maxBytes() {
          return config.policy.output.maxBytes;
        },
        get deny() {
          return config.policy.output.deny;
        },
      }),
      scrub: scrubStage({ scrubber }),
      judge: judgeStage((this.judgeDeps = {
        resolve: (name) => this.router.resolve(name),
        isReadOnly: (t) => this.tools.isReadOnly(t),
        policy: this.policy,
        store: this.store,
        clock: this.clock,
        get askTimeoutMs() {
          return config.policy.askTimeoutMs;
        },
        scrubArgs: (a) => scrubber.value(a),
        isPrivileged: (p) => isPrivilegedPrincipal(principals, p),
        approveHint: approveHint(this.cliPath, this.config.file),
        park: (call, why) => this.tasks.park(call, why),
        approvalStates: this.approvalStates,
        logger: this.logger,
      })),
      relay: relayStage({
        states: this.sealedStates,
        get ttlMs() {
          return config.policy.askTimeoutMs;
        },
      }),
      budget: budgetStage({
        ledger: this.budgets,
        limitFor: (call) => principals[call.session.principal]?.budgetPerUnit ?? budget,
        windowMs: broker.budgetWindowMs,
        now: () => this.clock.now(),
        logger: this.logger,
      }),
      breaker: breakerStage(this.breakers),
      retry: retryStage({
        now: () => this.clock.now(),
        sleep: (ms, signal) => this.clock.sleep(ms, signal),
        maxRetries: broker.retry.maxRetries,
        baseDelayMs: broker.retry.baseDelayMs,
      }),
      deadline: deadlineStage({
        clock: this.clock,
        timeoutFor: (call) => this.tools.timeoutFor(call.target),
        extendOnProgress: broker.extendOnProgress,
        maxTotalTimeoutMs: broker.maxTotalTimeoutMs,
      }),
      invoke: invokeStage({ router: this.router, verdictFromText: (call) => this.tools.verdictFromText(call.target) }),
    });
    return this.tracer ? this.tracer.instrument(stages, (t) => scrubber.text(t)) : stages;
  }

  /** What `tools/list` needs to show a principal its tools (broker/visible-tools.ts). */
  get toolVisibility(): VisibleToolsDeps {
    return (this.visibility ??= {
      policy: this.policy,
      resolve: (name) => this.router.resolve(name),
      isReadOnly: (t) => this.tools.isReadOnly(t),
      isPrivileged: (p) => isPrivilegedPrincipal(this.config.principals, p),
      present: (tool, target) => this.tools.settings(target.server)?.present(tool, target.toolName) ?? tool,
    });
  }
  private visibility?: VisibleToolsDeps;

  /**
   * Dials every upstream (in parallel) with the capabilities the downstream client declared;
   * settles {@link ready} when each first dial has settled or `broker.startGraceMs` has passed,
   * and resolves when each first dial has settled. Tools of two upstreams that would share one
   * advertised name in the roster {@link ready} serves are a {@link ConfigError} here (exit 2;
   * {@link ready} then never settles), a withheld tool later.
   */
  async start(options: { clientCapabilities?: ClientCapabilities } = {}): Promise<void> {
    if (this.started) return this.ready;
    this.started = true;
    await this.prepare();
    // Reaps the tasks of dead instances (a previous run of this broker killed mid-task) first.
    await this.tasks.start();
    const offered = (this.offered = offeredCapabilities(options.clientCapabilities));
    for (const u of this.registry.upstreams) {
      if (u instanceof McpUpstream) u.setClientCapabilities(offered);
      const dial = u.start();
      this.firstDials.set(u.name, dial);
      this.dialling.add(u.name);
      const settled = () => void this.dialling.delete(u.name);
      dial.then(settled, settled);
    }
    const dialled = Promise.all(this.firstDials.values());
    // One upstream that never answers holds nobody past the grace (its own dial may take its connectTimeoutMs).
    let endGrace!: () => void;
    const graceOver = new Promise<void>((resolve) => (endGrace = this.clock.setTimer(this.config.broker.startGraceMs, resolve)));
    await Promise.race([dialled, graceOver]);
    endGrace();
    const roster = this.registry.rebuild();
    if (roster.collisions.length) {
      const c = roster.collisions[0]!;
      throw new ConfigError(
        `mcpServers.${c.withheld.split('/')[0]}`,
        `${c.kind} "${c.withheld}" and "${c.kept}" would both be advertised as "${c.name}"; set a different "prefix"`,
      );
    }
    assertNoRosterCollision(this.router.localNames(), roster.tools.keys());
    this.isReady = true;
    this.settled = true;
    this.markReady();
    await dialled;
    void this.rememberSurface();
  }

  /**
   * Resolves once a `tools/call` of `name` can be served as it will be: at once when it names a
   * ready upstream's tool; when it names a tool of an upstream in its first dial, once that dial
   * settles or {@link ready} does; else (the broker's own tools, names not known yet) with {@link ready}.
   */
  async readyFor(name: string): Promise<void> {
    if (this.settled) return;
    const target = this.router.resolve(name);
    if (target?.source === 'upstream' && target.state !== 'down') return;
    const dial = target?.state === 'down' ? this.firstDials.get(target.server) : undefined;
    await (dial ? Promise.race([dial, this.ready]) : this.ready);
  }

  /**
   * Whether a call of `name` meets no upstream in its first dial: its own upstream's dial has
   * settled (ready or failed); for the broker's own tools (a flow's steps may call any upstream)
   * and names not known yet, every first dial has.
   */
  private firstDialOver(name: string): boolean {
    if (this.dialling.size === 0) return true;
    const target = this.router.resolve(name);
    return target?.source === 'upstream' && !this.dialling.has(target.server);
  }

  /**
   * The upstreams' part of a modern `server/discover` answer for `principal` (upstream/surface.ts):
   * what the ready upstreams declare once {@link ready} has settled; before that, the surface
   * remembered for these upstream definitions (looked up by {@link surfaceKnown}), else what is
   * ready so far. The instructions are those of the upstreams `principal` sees a tool, prompt,
   * resource or template of ({@link seesUpstream}); a remembered surface's, before any list is
   * known, only while the policy can hide no upstream ({@link policyMayHide}).
   */
  surface(principal: string): ServedSurface {
    if (this.settled || !this.knownSurface) {
      const live = liveSurface(this.registry.upstreams);
      // Instructions were scrubbed when each upstream was dialled; a reload may have added secrets since.
      const scrubbed = live.instructions === undefined ? live : { ...live, instructions: live.instructions.map((i) => ({ ...i, text: this.scrubber.text(i.text) })) };
      return servedSurface(scrubbed, (server) => this.seesUpstream(principal, server));
    }
    // A reload since the lookup may have made the policy one that hides upstreams: none of the instructions then.
    const mayHide = this.policyMayHide();
    return servedSurface(this.knownSurface, () => !mayHide);
  }

  /**
   * What {@link surface} is judged on now (upstream/surface.ts {@link SurfaceBasis}): an answer
   * built from it holds while a later basis is the same (`sameSurfaceBasis`), so a connection that
   * outlives a reload or a catalog change judges its surface again (transports/discover-answer.ts).
   */
  surfaceBasis(): SurfaceBasis {
    return { roster: this.registry.roster, policy: this.config.policy, settled: this.settled };
  }

  /**
   * Whether `principal` sees anything of upstream `server` in the current roster: a tool
   * `tools/list` would show it, or a prompt, resource or template the lists would.
   */
  private seesUpstream(principal: string, server: string): boolean {
    // Every SDK-served modern HTTP request builds a session and asks: judged once per roster and
    // policy (a reload replaces the policy and rebuilds the roster), not per request.
    const roster = this.registry.roster;
    const policy = this.config.policy;
    let sight = this.upstreamSight;
    if (!sight || sight.roster !== roster || sight.policy !== policy || sight.verdicts.size >= MAX_SIGHT_VERDICTS) {
      this.upstreamSight = sight = { roster, policy, verdicts: new Map() };
    }
    const key = `${principal}\0${server}`;
    let sees = sight.verdicts.get(key);
    if (sees === undefined) sight.verdicts.set(key, (sees = this.judgeSeesUpstream(principal, server)));
    return sees;
  }

  /** {@link seesUpstream}'s verdicts for one roster and one policy, by principal and server. */
  private upstreamSight?: { roster: Roster; policy: LoadedConfig['policy']; verdicts: Map<string, boolean> };

  /** {@link seesUpstream}, judged now. */
  private judgeSeesUpstream(principal: string, server: string): boolean {
    const roster = this.registry.roster;
    const visibility = this.toolVisibility;
    for (const tool of roster.tools.values()) {
      if (tool.server === server && visibleTools([tool.definition], principal, visibility).length > 0) return true;
    }
    const shown = (type: 'prompt' | 'resource', name: string) => this.primitives.visible(principal, { server, type, name });
    for (const prompt of roster.prompts.values()) if (prompt.server === server && shown('prompt', prompt.name)) return true;
    for (const { server: own, resource } of roster.resources.values()) if (own === server && shown('resource', resource.uri)) return true;
    return roster.resourceTemplates.some((t) => t.server === server && shown('resource', t.template.uriTemplate));
  }

  /**
   * Whether the policy may hide a whole upstream from some principal: a run mode other than
   * `normal`, a `deny` default or any `deny` rule. While it may not, every principal sees every
   * upstream's instructions, and a remembered surface can be served before any list is known.
   */
  private policyMayHide(): boolean {
    const policy = this.config.policy;
    return policy.mode !== 'normal' || policy.default === 'deny' || policy.rules.some((rule) => rule.action === 'deny');
  }

  /**
   * Resolves once {@link surface} answers for these upstreams: at once when {@link ready} has
   * settled or a surface is remembered for their definitions (and the policy can hide no
   * upstream, {@link policyMayHide}), else when {@link ready} settles. A store that cannot be
   * read, or a surface stored in an older shape, counts as nothing remembered (logged at warn).
   */
  async surfaceKnown(): Promise<void> {
    if (this.settled) return;
    this.rememberedSurface ??= this.store.getSurface(surfaceKey(this.config.mcpServers)).then(
      (found) => (isUpstreamSurface(found) ? found : undefined),
      (err: unknown) => {
        this.logger.warn({ err: messageOf(err) }, 'remembered discover surface could not be read; waiting for the upstreams');
        return undefined;
      },
    );
    const remembered = await this.rememberedSurface;
    // Scrubbed again as it is served: the secrets known now may not be the ones known when it was stored.
    if (remembered && !this.settled && !this.policyMayHide()) this.knownSurface = this.scrubber.value(remembered);
    else await this.ready;
  }

  /**
   * Stores the live surface for these upstream definitions, only when every enabled MCP upstream
   * is ready (a dial cut short by shutdown, or an upstream that failed, would store less than
   * these upstreams offer). A failure is logged, never thrown.
   */
  private async rememberSurface(): Promise<void> {
    if (this.registry.upstreams.some((u) => u.kind !== 'rest' && u.status.state !== 'disabled' && u.status.state !== 'ready')) return;
    try {
      await this.store.setSurface(surfaceKey(this.config.mcpServers), liveSurface(this.registry.upstreams), new Date(this.clock.now()).toISOString());
    } catch (err) {
      this.logger.warn({ err: messageOf(err) }, 'discover surface could not be remembered');
    }
  }

  /**
   * Loads everything the config points at without connecting anything: user function modules
   * (`functions`) and OpenAPI documents of rest upstreams. The CLI runs it before serving, so a
   * bad module or document exits 2 at once; `start()` runs it if nobody did. Throws
   * {@link ConfigError}. Idempotent.
   */
  prepare(): Promise<void> {
    this.prepared ??= (async () => {
      this.router.register(await loadFunctionModules(this.config.functions, this.importModule, (text) => this.scrubber.text(text)), { server: 'functions' });
      for (const u of this.registry.upstreams) await u.prepare?.();
    })();
    return this.prepared;
  }

  /** Closes every upstream (ending stdio children's process groups) and the records file. */
  async stop(): Promise<void> {
    // Our running tasks are killed by `system` (never left running), then calls in flight are
    // cancelled, answered and recorded before their upstreams go away.
    await this.tasks.stop();
    await this.broker.drain(3000);
    // Every call has its spans now; what the batch holds is exported before the process goes.
    await this.tracer?.shutdown().catch((err) => this.logger.warn({ err: messageOf(err) }, 'trace export at shutdown failed'));
    // Upstreams closing withdraw their tools: nobody needs to hear list_changed about that now.
    this.isReady = false;
    await Promise.all(this.registry.upstreams.map((u) => u.close().catch(() => undefined)));
    await this.records.close().catch(() => undefined);
    await this.builtins.close().catch(() => undefined);
    await this.store.close().catch(() => undefined);
  }

  /** Ends every stdio child at once; for a last-resort exit. */
  kill(): void {
    for (const u of this.registry.upstreams) if (u instanceof McpUpstream) u.kill();
  }

  private createUpstream(name: string, server: ServerConfig): Upstream {
    const kind = serverKind(server);
    if (kind === 'rest') {
      return new RestUpstream({ name, config: server as RestServerConfig, logger: this.logger.child({ upstream: name }), clock: this.clock, scrub: (text) => this.scrubber.text(text) });
    }
    const options: McpUpstreamOptions = {
      name,
      sharedByPrincipals: () => Object.keys(this.config.principals).length > 1,
      config: server as Exclude<ServerConfig, { type: 'rest' }>,
      logger: this.logger.child({ upstream: name }),
      clock: this.clock,
      inheritEnv: this.config.broker.env.inherit,
      maxMessageBytes: this.config.broker.maxMessageBytes,
      restart: this.config.broker.restart,
      version: VERSION,
      scrubber: this.scrubber,
      eras: this.store,
      legacyEraMaxAgeMs: this.config.broker.legacyEraMaxAgeMs,
    };
    if (kind === 'stdio' && 'isolation' in server && server.isolation === 'principal') {
      return new IsolatedUpstream(options, { idleMs: server.isolationIdleMs, maxPrincipals: server.isolationMaxPrincipals });
    }
    return new McpUpstream(options);
  }
}

/**
 * `make()`, with a file system error (a folder that cannot be made: a file on the way, a read-only
 * or pseudo file system) or a store that cannot be opened reported as a {@link ConfigError} at
 * `path` (exit 2), not as a crash; so is a records lock file that cannot be created, and a records
 * file that cannot be appended to (`records_unwritable`, from `mcp-broker check`'s probe). A
 * records lock another broker holds passes as it is.
 */
export function atPath<T>(path: string, make: () => T): T {
  try {
    return make();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const fsError = typeof code === 'string' && /^E[A-Z]+$/.test(code);
    if (fsError || (err instanceof BrokerError && (err.code === 'store_unavailable' || err.code === 'records_lock_failed' || err.code === 'records_unwritable'))) {
      throw new ConfigError(path, `cannot be used: ${messageOf(err).replace(/^broker\.records\.path: /, '')}`);
    }
    throw err;
  }
}

/** Makes `target` hold exactly the entries of `source`, in its order (the object itself is kept). */
function replaceContents<T>(target: Record<string, T>, source: Readonly<Record<string, T>>): void {
  for (const key of Object.keys(target)) delete target[key];
  Object.assign(target, source);
}
