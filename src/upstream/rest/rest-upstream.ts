/**
 * An HTTP API served as tools (issue 7; seed 002_7bce204a86c1c7ba.txt step 6, "Invoke"): a
 * `"type": "rest"` server of `servers.json` (schema `restServerSchema`). Its tools come from the
 * hand-written `tools` and from the `operations` of an `openapi` file; it has no prompts or
 * resources, and no connection to hold: `start()` makes it `ready`, `reconnect()` re-reads
 * nothing and makes it `ready` again.
 *
 * A call sends only the tool's allowlisted arguments (the names of the others go to
 * `CallOptions.onArgumentsStripped`, which the router writes into the record's `stripped`), and
 * only to the pinned `baseUrl`: the URL is checked before sending, and redirects are followed
 * only inside the pinned origin and prefix, at most {@link MAX_REDIRECTS} times. The configured
 * `headers` (secrets via `${env:…}`) are added here, at send time, and never logged; their exact
 * values are masked in every result.
 *
 * Outcomes, as the invoke stage reads them:
 * - arguments that do not fit the tool's advertised `inputSchema` (checked with
 *   {@link JsonSchemas}, before anything else) → throws `BrokerError('invalid_arguments')` with
 *   Ajv's reasons (paths and rules, no values), unsent.
 * - 2xx → a result (`ok`); 4xx other than 429 → a result with `isError: true` (`tool_error`).
 * - 429 and 5xx → throws `BrokerError('upstream_http', {data: {httpStatus, retryAfterMs}})`
 *   (`upstream_error`, retryable, so the retry stage retries read-only tools).
 * - a URL or redirect that would leave the pinned base, a CR/LF in a header value →
 *   throws `BrokerError('rest_host_escape')` (`guard_error`), unsent.
 * - no answer (connection refused, reset, the attempt's `timeoutMs` plus
 *   {@link ATTEMPT_TIMEOUT_HEADROOM_MS} passed) → throws
 *   `BrokerError('transport_error')` (`upstream_error`, retryable); an abort of
 *   `CallOptions.signal` rethrows its reason (the deadline stage names it `timeout`/`cancelled`).
 */
import { EventEmitter } from 'node:events';
import type { CallToolResult, ServerCapabilities, Tool } from '@modelcontextprotocol/client';
import type { RestServerConfig } from '../../config/schema.js';
import type { CancelSignal } from '../../shared/cancel.js';
import type { Clock } from '../../shared/clock.js';
import { BrokerError, ConfigError, messageOf } from '../../shared/errors.js';
import { JsonSchemas } from '../../shared/json-schemas.js';
import type { Logger } from '../../shared/logger.js';
import type { CallOptions, Upstream, UpstreamCatalog, UpstreamEvents, UpstreamStatus } from '../types.js';
import { baseUrlProblem, definitionFromConfig, toMcpTool, type RestToolDefinition } from '../../config/rest-definition.js';
import { importOpenApi } from './openapi.js';
import { buildRequest, partitionArgs, pinBase, withinBase, type PinnedBase, type RestRequest } from './request.js';
import { CUT_MARGIN_BYTES, readBounded, responseResult, retryAfterMs, secretMask, type SecretMask } from './response.js';

/** Most redirects followed for one attempt (each inside the pinned base). */
export const MAX_REDIRECTS = 3;
/** Added to `CallOptions.timeoutMs` for our own attempt timer, so the deadline stage's fires first (outcome `timeout`), in ms. */
export const ATTEMPT_TIMEOUT_HEADROOM_MS = 5_000;

const ACCEPT = 'application/json, text/plain;q=0.9, */*;q=0.8';

export interface RestUpstreamOptions {
  /** The server key. */
  name: string;
  config: RestServerConfig;
  logger: Logger;
  clock: Clock;
  /** Injected `fetch` (default the global one). */
  fetch?: typeof fetch;
  /** Default {@link ATTEMPT_TIMEOUT_HEADROOM_MS}. */
  attemptHeadroomMs?: number;
  /**
   * The gateway's scrubber's `text`: a body cut at `maxResponseBytes` is scrubbed whole with it
   * before it is cut (response.ts `CUT_MARGIN_BYTES`). Default: the configured header values only.
   */
  scrub?: (text: string) => string;
}

const EMPTY_CATALOG = (): UpstreamCatalog => ({ tools: [], prompts: [], resources: [], resourceTemplates: [] });

export class RestUpstream extends EventEmitter<UpstreamEvents> implements Upstream {
  readonly name: string;
  readonly kind = 'rest' as const;
  /** The configured header values: the exact secrets to scrub. */
  readonly secrets: readonly string[];
  status: UpstreamStatus = { state: 'idle' };
  catalog: UpstreamCatalog = EMPTY_CATALOG();
  capabilities: ServerCapabilities | undefined;

  private readonly config: RestServerConfig;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly fetch: typeof fetch;
  private readonly headroomMs: number;
  private readonly mask: SecretMask;
  private readonly scrub: ((text: string) => string) | undefined;
  private tools?: Map<string, RestToolDefinition>;
  /** The tools as advertised, by name; a call's arguments are checked against their `inputSchema`. */
  private advertised = new Map<string, Tool>();
  private readonly schemas = new JsonSchemas();
  private base?: PinnedBase;
  /** Aborted by close(): ends every request in flight. */
  private lifetime = new AbortController();

  constructor(options: RestUpstreamOptions) {
    super();
    this.name = options.name;
    this.config = options.config;
    this.logger = options.logger;
    this.clock = options.clock;
    this.fetch = options.fetch ?? globalThis.fetch;
    this.headroomMs = options.attemptHeadroomMs ?? ATTEMPT_TIMEOUT_HEADROOM_MS;
    this.secrets = Object.values(options.config.headers);
    this.mask = secretMask(this.secrets);
    this.scrub = options.scrub;
  }

  /**
   * Builds the tools (importing the OpenAPI operations) and becomes `ready`. Unlike a dial it
   * can throw: a bad OpenAPI file or operation is a {@link ConfigError} (exit 2), not a state.
   */
  async prepare(): Promise<void> {
    if (!this.config.disabled && !this.tools) await this.load();
  }

  async start(): Promise<void> {
    if (this.config.disabled) return this.setStatus({ state: 'disabled' });
    if (!this.tools) await this.load();
    this.becomeReady();
  }

  /** Re-reads nothing: a rest upstream holds no connection. Ready again after close(). */
  async reconnect(): Promise<UpstreamStatus> {
    if (this.config.disabled) return this.status;
    if (!this.tools) await this.load();
    this.becomeReady();
    return this.status;
  }

  /** Aborts requests in flight and withdraws the tools. */
  async close(): Promise<void> {
    this.lifetime.abort(new BrokerError('upstream_closed', `rest upstream "${this.name}" was closed`));
    const had = this.catalog.tools.length > 0;
    this.catalog = EMPTY_CATALOG();
    this.setStatus({ state: 'closed' });
    if (had) this.emit('changed', 'tools');
  }

  async callTool(toolName: string, args: Record<string, unknown> | undefined, options: CallOptions): Promise<CallToolResult> {
    const def = this.tools?.get(toolName);
    if (this.status.state !== 'ready' || !def || !this.base) {
      throw new BrokerError('upstream_unavailable', `rest upstream "${this.name}" is not serving tool "${toolName}" (${this.status.state})`);
    }
    const misfit = this.schemas.check(this.advertised.get(toolName)!.inputSchema, args ?? {});
    if (misfit !== undefined) {
      throw new BrokerError('invalid_arguments', `rest tool "${def.name}": the arguments do not fit its inputSchema (${misfit}); nothing was sent`);
    }
    const { kept, stripped } = partitionArgs(def, args);
    if (stripped.length) options.onArgumentsStripped?.(stripped);
    const request = buildRequest(def, this.base, kept);
    const headers: Record<string, string> = { accept: ACCEPT, ...this.config.headers, ...request.headers };
    if (request.body !== undefined) headers['content-type'] = 'application/json';

    const attempt = this.attemptSignal(options);
    try {
      return await this.send(def, request, headers, attempt);
    } finally {
      attempt.dispose();
    }
  }

  /** Sends the request, following redirects inside the pinned base; reads the answer (module doc). */
  private async send(def: RestToolDefinition, request: RestRequest, headers: Record<string, string>, attempt: AttemptSignal): Promise<CallToolResult> {
    let { url, method, body } = request;
    const startedAt = this.clock.now();
    for (let hop = 0; ; hop++) {
      let res: Response;
      try {
        res = await this.fetch(url, { method, headers, body, redirect: 'manual', signal: attempt.signal });
      } catch (err) {
        throw this.fetchFailure(def, err, attempt);
      }
      const location = res.headers.get('location');
      if (isRedirect(res.status) && location !== null) {
        await res.body?.cancel().catch(() => undefined);
        const next = redirectTarget(location, url);
        if (!next || !withinBase(next, this.base!)) {
          throw new BrokerError('rest_host_escape', `rest tool "${def.name}": HTTP ${res.status} redirects outside the pinned base; not followed`, { data: { sent: true } });
        }
        if (hop >= MAX_REDIRECTS) {
          throw new BrokerError('upstream_http', `rest tool "${def.name}": more than ${MAX_REDIRECTS} redirects`, { data: { httpStatus: res.status } });
        }
        if (res.status === 303 || ((res.status === 301 || res.status === 302) && method !== 'GET' && method !== 'HEAD')) {
          method = 'GET';
          body = undefined;
          delete headers['content-type'];
        }
        url = next;
        continue;
      }
      this.logger.debug({ tool: def.name, method, path: def.path, httpStatus: res.status, ms: this.clock.now() - startedAt, redirects: hop }, 'rest call answered');
      if (res.status === 429 || res.status >= 500) {
        await res.body?.cancel().catch(() => undefined);
        const wait = retryAfterMs(res.headers.get('retry-after'), this.clock.now());
        throw new BrokerError('upstream_http', `rest tool "${def.name}": HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`, {
          data: { httpStatus: res.status, ...(wait !== undefined ? { retryAfterMs: wait } : {}) },
        });
      }
      let bounded;
      try {
        bounded = await readBounded(res, this.config.maxResponseBytes, CUT_MARGIN_BYTES);
      } catch (err) {
        throw this.fetchFailure(def, err, attempt);
      }
      return responseResult(
        { status: res.status, statusText: res.statusText, contentType: res.headers.get('content-type') ?? '', body: bounded, maxBytes: this.config.maxResponseBytes },
        this.mask,
        this.scrub,
      );
    }
  }

  /**
   * One attempt's signal: aborted by the call's signal, by close(), or after `timeoutMs` plus the
   * headroom (on the injected clock). Linked by hand, so nothing stays attached to the
   * long-lived close() signal once the attempt is over.
   */
  private attemptSignal(options: CallOptions): AttemptSignal {
    const controller = new AbortController();
    const timeoutMs = options.timeoutMs + this.headroomMs;
    const attempt: AttemptSignal = { signal: controller.signal, callSignal: options.signal, timeoutMs, timedOut: false, dispose: () => {} };
    const unlink = [options.signal, this.lifetime.signal].map((source: CancelSignal) => {
      const onAbort = () => controller.abort(source.reason);
      if (source.aborted) onAbort();
      else source.addEventListener('abort', onAbort, { once: true });
      return () => source.removeEventListener('abort', onAbort);
    });
    const cancelTimer = this.clock.setTimer(timeoutMs, () => {
      attempt.timedOut = true;
      controller.abort(new Error(`no answer within ${timeoutMs} ms`));
    });
    attempt.dispose = () => {
      cancelTimer();
      for (const f of unlink) f();
    };
    return attempt;
  }

  /** Rest upstreams serve tools only. */
  async request(method: string): Promise<Record<string, unknown>> {
    throw new BrokerError('unsupported', `rest upstream "${this.name}" does not serve ${method}`);
  }

  private async load(): Promise<void> {
    const at = `mcpServers.${this.name}`;
    const tools = new Map<string, RestToolDefinition>();
    for (const [name, tool] of Object.entries(this.config.tools)) tools.set(name, definitionFromConfig(name, tool));
    let baseUrl = this.config.baseUrl;
    if (this.config.openapi) {
      const api = await importOpenApi({
        file: this.config.openapi,
        operations: this.config.operations ?? [],
        at,
        argHeaders: this.config.argHeaders,
        configuredHeaders: Object.keys(this.config.headers),
      });
      for (const def of api.tools) {
        if (tools.has(def.name)) throw new ConfigError(`${at}.operations`, `operation "${def.name}" has the name of a tool in "tools"`);
        tools.set(def.name, def);
      }
      baseUrl ??= api.serverUrl;
    }
    if (!baseUrl) throw new ConfigError(`${at}.baseUrl`, 'is required: the OpenAPI file has no servers[0].url');
    const problem = baseUrlProblem(baseUrl);
    if (problem) throw new ConfigError(this.config.baseUrl ? `${at}.baseUrl` : `${at}.openapi`, `${this.config.baseUrl ? '' : 'servers[0].url '}${problem}`);
    const advertised = new Map<string, Tool>();
    for (const [name, def] of tools) {
      const tool = toMcpTool(def);
      const problem = this.schemas.compileError(tool.inputSchema);
      if (problem) throw new ConfigError(Object.hasOwn(this.config.tools, name) ? `${at}.tools.${name}.args` : `${at}.operations`, `tool "${name}": ${problem}`);
      advertised.set(name, tool);
    }
    this.base = pinBase(baseUrl);
    this.tools = tools;
    this.advertised = advertised;
  }

  private becomeReady(): void {
    this.lifetime = this.lifetime.signal.aborted ? new AbortController() : this.lifetime;
    this.catalog = { ...EMPTY_CATALOG(), tools: [...this.advertised.values()] };
    this.capabilities = { tools: {} };
    this.setStatus({ state: 'ready' });
    this.emit('changed', 'tools');
  }

  private setStatus(status: UpstreamStatus): void {
    this.status = status;
    this.emit('state', status);
  }

  /** What a failed fetch means: the caller's abort (rethrown), close(), our attempt timeout, or a transport fault. */
  private fetchFailure(def: RestToolDefinition, err: unknown, attempt: AttemptSignal): unknown {
    if (attempt.callSignal.aborted) return attempt.callSignal.reason;
    if (this.lifetime.signal.aborted) return this.lifetime.signal.reason;
    if (attempt.timedOut) return new BrokerError('transport_error', `rest tool "${def.name}": no answer within ${attempt.timeoutMs} ms`);
    const cause = (err as { cause?: { code?: unknown } })?.cause?.code;
    return new BrokerError('transport_error', `rest tool "${def.name}": request failed (${typeof cause === 'string' ? cause : messageOf(err)})`, { cause: err });
  }
}

interface AttemptSignal {
  signal: AbortSignal;
  callSignal: CancelSignal;
  timeoutMs: number;
  timedOut: boolean;
  dispose(): void;
}

function isRedirect(status: number): boolean {
  return status === 301 || status === 302 || status === 303 || status === 307 || status === 308;
}

function redirectTarget(location: string, from: URL): URL | undefined {
  try {
    const url = new URL(location, from);
    url.hash = '';
    return url;
  } catch {
    return undefined;
  }
}
