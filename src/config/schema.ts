/**
 * The `servers.json` schema: a superset of the `mcpServers` format of Claude Desktop, Cursor and
 * VS Code (DESIGN.md, "Contract"). Every default lives here, with two exceptions: the plain
 * values in `constants.ts` (inherited environment names, server-key rules), which code running
 * before zod loads shares; and the stdio server defaults that `upstream/early-spawn.ts` repeats
 * to guess spawn specs before validation (test/unit/early-spawn.test.ts keeps the two equal).
 */
import { z } from 'zod';
import { DEFAULT_INHERITED_ENV, RESERVED_SERVER_NAMES, SERVER_KEY } from './constants.js';
import { restServerProblems } from './rest-definition.js';

export { DEFAULT_INHERITED_ENV, RESERVED_SERVER_NAMES, SERVER_KEY } from './constants.js';

/** Default deadline of one call, in ms. */
export const DEFAULT_TIMEOUT_MS = 60_000;
/**
 * Default call budget of a unit, in invoked calls: a person's interactive session works all day
 * within it (issue 18 §1); a runaway agent loop is still stopped. `"unlimited"` means no budget.
 */
export const DEFAULT_BUDGET_PER_UNIT = 10_000;
/**
 * Default of `broker.budgetWindowMs`: how long a sessionless unit's budget lasts before it renews,
 * in ms (one hour). A sessionless unit (the admin API's `api:<principal>`, a modern request's) has no session whose
 * end would release it, so without a window it would lock its principal out for good.
 */
export const DEFAULT_BUDGET_WINDOW_MS = 3_600_000;
/** Default of `broker.drainTimeoutMs`: after stdin EOF, time for the requests received to be answered, in ms. */
export const DEFAULT_DRAIN_TIMEOUT_MS = 10_000;
/** Default of `broker.startGraceMs`: how long the first listing waits for upstreams still in their first dial, in ms. */
export const DEFAULT_START_GRACE_MS = 10_000;
/** Default heartbeat period of a broker instance in the store, in ms (`broker.taskHeartbeatMs`). */
export const DEFAULT_TASK_HEARTBEAT_MS = 5_000;
/** Default age of a heartbeat past which its instance is dead, in ms: three missed beats (`broker.taskStaleMs`). */
export const DEFAULT_TASK_STALE_MS = 15_000;
/** Default period of the task tick, in ms; also the poll interval suggested to clients (`broker.taskPollMs`). */
export const DEFAULT_TASK_POLL_MS = 1_000;
/** Default of `broker.maxPendingOutputBytes`: stdout bytes not yet taken by the client past which reading stops (16 MiB). */
export const DEFAULT_MAX_PENDING_OUTPUT_BYTES = 16 * 1024 * 1024;
/** A call budget: a non-negative number of invoked calls, or `"unlimited"`. */
export const budgetSchema = z.union([z.number().int().min(0), z.literal('unlimited')]);

const ms = (max = 24 * 3600_000) => z.number().int().min(1).max(max);
const stringMap = z.record(z.string(), z.string());

/**
 * Per-tool settings inside a server: `tools: {"<key>": {timeoutMs, readOnly, disabled, verdictFromText, description,
 * title, annotations}}`, the key the upstream's own tool name, the advertised name, or a glob over
 * either (upstream/tool-settings.ts).
 */
const toolOverride = z
  .object({
    /** Deadline for this tool, in ms; wins over the server's and the broker's. */
    timeoutMs: ms().optional(),
    /** Treat as read-only (retry on transport faults, allowed in `read-only` mode). */
    readOnly: z.boolean().optional(),
    /** Hide and refuse this tool (`unregistered`, reason `disabled`). */
    disabled: z.boolean().optional(),
    /** Read this tool's verdict from its JSON text too; wins over the server's `verdictFromText`. */
    verdictFromText: z.boolean().optional(),
    /** Listed instead of the upstream's description (what the model reads). */
    description: z.string().optional(),
    /** Listed instead of the upstream's title. */
    title: z.string().optional(),
    /** Laid over the upstream's annotations, field by field (e.g. `{"readOnlyHint": true}`). */
    annotations: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

const commonServer = {
  /** Advertised-name prefix: a string, or `false` for bare names. Default: the server key. */
  prefix: z.union([z.string().regex(SERVER_KEY, 'must match ^[A-Za-z0-9][A-Za-z0-9_-]*$'), z.literal(false)]).optional(),
  /** Deadline for this server's calls, in ms; default `broker.timeoutMs`. */
  timeoutMs: ms().optional(),
  /** Time allowed for connect plus the first listing, in ms. */
  connectTimeoutMs: ms().default(30_000),
  /** `/readyz` waits for this server. */
  required: z.boolean().default(false),
  /** Configured but not started. */
  disabled: z.boolean().default(false),
  /** Per-tool settings, keyed by the upstream's own tool name, the advertised name or a glob. */
  tools: z.record(z.string(), toolOverride).default({}),
  /**
   * Whether a text block holding a JSON object with a top-level `success: false` is this
   * server's verdict `tool_error` (broker/handler-failure.ts). Default `false`: text is data (a
   * file, a fetched body); the verdict is `isError: true` or `structuredContent.success: false`.
   */
  verdictFromText: z.boolean().default(false),
  /**
   * When several upstreams list one resource URI or one template string, or templates of several
   * match a URI: the highest serves it; equal priorities: the earlier server in config order.
   * The others' copies are withheld, with a logged warning. An integer; default 0.
   */
  resourcePriority: z.number().int().default(0),
};

/** A stdio upstream; `command: "node"` runs with this Node (`process.execPath`). */
export const stdioServerSchema = z
  .object({
    type: z.literal('stdio').optional(),
    command: z.string().min(1),
    args: z.array(z.string()).default([]),
    /** Environment given to the child on top of the inherited names; wins over them. */
    env: stringMap.default({}),
    /**
     * A dotenv file (VS Code), relative to `servers.json`, read at load and merged under `env`
     * (`env` wins); the loaded config has it merged and this field absent. Format: `config/env-file.ts`.
     */
    envFile: z.string().min(1).optional(),
    /** Extra names inherited from our environment, beside `broker.env.inherit`. */
    inheritEnv: z.array(z.string()).default([]),
    /** Working directory; default the folder of `servers.json`. */
    cwd: z.string().optional(),
    /**
     * The MCP era spoken to this server: `"auto"` (default) finds it out (`server/discover`, then
     * `initialize`) and remembers it (upstream/era-memory.ts); `"legacy"` speaks 2025-11-25 and
     * older at once, never probing (a server that misbehaves on the probe, or one whose sessions
     * you rely on).
     */
    era: z.enum(['auto', 'legacy']).default('auto'),
    /**
     * How the server's child is shared among principals. `"shared"` (default): one child serves
     * every caller. `"principal"`: the roster comes from that one child, but each principal's
     * calls (`tools/call`, `prompts/get`, `resources/read`, completion) go to a child of its own,
     * spawned on its first call (upstream/isolated.ts): what the server caches per connection
     * (roots, a login) is never another principal's, and one principal's unanswered sampling or
     * elicitation request does not hold up another's calls. Costs one child per active principal.
     */
    isolation: z.enum(['shared', 'principal']).default('shared'),
    /** `isolation: "principal"`: a principal's child idle this long is closed, in ms; default 10 min. */
    isolationIdleMs: z.number().int().positive().default(600_000),
    /**
     * `isolation: "principal"`: most principal children at once; default 16. Past it the least
     * recently used idle one is closed; with none idle a new principal's call fails `upstream_error`.
     */
    isolationMaxPrincipals: z.number().int().positive().default(16),
    ...commonServer,
  })
  .strict();

/** Fields only stdio servers take; named in the error when another kind has one. */
const STDIO_ONLY_FIELDS: ReadonlySet<string> = new Set(['isolation', 'isolationIdleMs', 'isolationMaxPrincipals']);

/**
 * A Streamable HTTP upstream. Without `type` (a URL-only entry, as Cursor and Claude Code write
 * it), Streamable HTTP is tried first and legacy SSE is used when the server answers the
 * `initialize` POST with a 4xx (upstream/upstream-transport.ts).
 */
export const httpServerSchema = z
  .object({
    type: z.union([z.literal('http'), z.literal('streamable-http'), z.literal('streamableHttp')]).optional(),
    url: z.url(),
    headers: stringMap.default({}),
    /**
     * The MCP era spoken to this server: `"auto"` (default) finds it out (`server/discover`, then
     * `initialize`) and remembers it (upstream/era-memory.ts); `"legacy"` speaks 2025-11-25 and
     * older at once, never probing (a server that misbehaves on the probe, or one whose sessions
     * you rely on).
     */
    era: z.enum(['auto', 'legacy']).default('auto'),
    ...commonServer,
  })
  .strict();

/** A legacy SSE upstream (`GET /sse` + `POST /messages`). */
export const sseServerSchema = z
  .object({
    type: z.literal('sse'),
    url: z.url(),
    headers: stringMap.default({}),
    ...commonServer,
  })
  .strict();

const restArgSchema = z
  .object({
    /** Where the value goes. */
    in: z.enum(['path', 'query', 'header', 'body']),
    /** JSON Schema of the value, copied into the tool's `inputSchema`. */
    schema: z.record(z.string(), z.unknown()).default({ type: 'string' }),
    required: z.boolean().default(false),
    description: z.string().optional(),
    /** Name on the wire (query key, header name or body field); default the argument name. */
    name: z.string().optional(),
  })
  .strict();

const restToolSchema = z
  .object({
    description: z.string().default(''),
    method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD']).default('GET'),
    /** Path template below `baseUrl`, e.g. `/repos/{owner}/{repo}/issues/{number}`. */
    path: z.string().startsWith('/'),
    args: z.record(z.string(), restArgSchema).default({}),
    /** Retried on 429/5xx, allowed in `read-only` mode; absent: true for GET and HEAD only. */
    readOnly: z.boolean().optional(),
    timeoutMs: ms().optional(),
  })
  .strict();

/** An HTTP API served as tools (issue 7). */
export const restServerSchema = z
  .object({
    type: z.literal('rest'),
    /**
     * Scheme, host, port and path prefix are pinned: no request leaves them. http(s), no
     * credentials, query or fragment. Optional with `openapi`: then its `servers[0].url`.
     */
    baseUrl: z.url().optional(),
    /** Sent with every request; secrets via `${env:…}`; injected only at invoke time. */
    headers: stringMap.default({}),
    /** Header names an `"in": "header"` argument may set (never credentials or framing: see `FORBIDDEN_ARG_HEADERS`). */
    argHeaders: z.array(z.string()).default([]),
    /** Hand-written tools, keyed by tool name. */
    tools: z.record(z.string(), restToolSchema).default({}),
    /** A local OpenAPI 3.x file (relative to `servers.json`) to import operations from. */
    openapi: z.string().optional(),
    /** operationIds imported from `openapi`; required with it. */
    operations: z.array(z.string()).optional(),
    /** Largest response body kept, in bytes. */
    maxResponseBytes: z.number().int().min(1).default(1024 * 1024),
    prefix: commonServer.prefix,
    timeoutMs: commonServer.timeoutMs,
    required: commonServer.required,
    disabled: commonServer.disabled,
  })
  .strict()
  .superRefine((server, ctx) => {
    for (const p of restServerProblems(server)) ctx.addIssue({ code: 'custom', message: p.message, path: p.path });
  });

type AnyServer =
  | z.output<typeof stdioServerSchema>
  | z.output<typeof httpServerSchema>
  | z.output<typeof sseServerSchema>
  | z.output<typeof restServerSchema>;

/** Picks the schema by `type` (or `command`), so errors name the field that is wrong, not a union. */
function schemaFor(raw: unknown): z.ZodType<AnyServer> | string {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return 'must be an object';
  const { type, command, url } = raw as { type?: unknown; command?: unknown; url?: unknown };
  if (type === undefined && command === undefined && url !== undefined) return httpServerSchema;
  if (type === undefined || type === 'stdio') {
    return command === undefined ? 'needs "command" (stdio), "url" (http) or "type": "http" | "sse" | "rest"' : stdioServerSchema;
  }
  if (type === 'http' || type === 'streamable-http' || type === 'streamableHttp') return httpServerSchema;
  if (type === 'sse') return sseServerSchema;
  if (type === 'rest') return restServerSchema;
  return `unknown type ${JSON.stringify(type)}: expected "stdio", "http", "sse" or "rest"`;
}

export const serverSchema = z.unknown().transform((raw, ctx): AnyServer => {
  const schema = schemaFor(raw);
  if (typeof schema === 'string') {
    ctx.addIssue({ code: 'custom', message: schema });
    return z.NEVER;
  }
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues) {
    if (issue.code === 'unrecognized_keys') {
      // A stdio-only field on another kind: named at its own path, with why.
      for (const key of issue.keys.filter((k) => STDIO_ONLY_FIELDS.has(k))) {
        ctx.addIssue({ code: 'custom', message: 'only stdio servers take this field (one child process per principal)', path: [...(issue.path as PropertyKey[]), key] });
      }
      const others = issue.keys.filter((k) => !STDIO_ONLY_FIELDS.has(k));
      if (others.length) ctx.addIssue({ code: 'custom', message: `unknown field(s): ${others.join(', ')}`, path: issue.path as PropertyKey[] });
      continue;
    }
    ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path as PropertyKey[] });
  }
  return z.NEVER;
});

const policyRuleSchema = z
  .object({
    /**
     * Globs over advertised tool names (`fs__write_*`, `*`). A glob that matches a server's whole
     * namespace, the name `<prefix>__` (`evil__*`, `*`), covers its prompts and resources too.
     */
    tools: z.array(z.string()).min(1).optional(),
    /** Globs over advertised prompt names (`evil__greet`): `prompts/get` and prompt completions. */
    prompts: z.array(z.string()).min(1).optional(),
    /** Globs over resource URIs and URI templates (`file:///etc/**`): reads, subscriptions, template completions. */
    resources: z.array(z.string()).min(1).optional(),
    /** Principals the rule applies to; absent = everyone. */
    principals: z.array(z.string()).optional(),
    action: z.enum(['allow', 'deny', 'ask']),
  })
  .strict()
  .refine((rule) => rule.tools || rule.prompts || rule.resources, { message: 'a rule needs at least one of "tools", "prompts", "resources"' });

export const policySchema = z
  .object({
    /** What happens to a call no rule matches. */
    default: z.enum(['allow', 'deny', 'ask']).default('allow'),
    /** Ordered; the first match wins. */
    rules: z.array(policyRuleSchema).default([]),
    /** `normal`; `read-only` (only read-only tools); `locked` (nothing runs). */
    mode: z.enum(['normal', 'read-only', 'locked']).default('normal'),
    /** Advertised-name globs treated as read-only beside `annotations.readOnlyHint: true`. */
    readOnly: z.array(z.string()).default([]),
    /** `ask`: the first call of each tool per principal needs approval. */
    firstUse: z.enum(['allow', 'ask']).default('allow'),
    /**
     * How long an elicitation approval prompt waits, in ms; for a 2026-07-28 caller also how long
     * its approval state stays valid, and how long a 2025-era upstream's sampling, elicitation or
     * roots request during its call is held for its retry (transports/held-calls.ts; past it the
     * upstream gets -32603 and the call is recorded `timeout`).
     */
    askTimeoutMs: ms().default(120_000),
    /**
     * What an `ask` does to a call that is not a task: `elicit` asks the client (else refuses
     * `approval_required`); `park` parks it in the approval inbox (a durable task row, status
     * `parked`) until an operator approves or rejects it (`mcp-broker approvals`). A call made as
     * a task always parks.
     */
    askMode: z.enum(['elicit', 'park']).default('elicit'),
    output: z
      .object({
        /** Results larger than this (serialised, in bytes) are `withheld`. */
        maxBytes: z.number().int().min(1).default(16 * 1024 * 1024),
        /** Regular expressions; a result whose text matches one is `withheld`. */
        deny: z.array(z.string()).default([]),
      })
      .strict()
      .default({ maxBytes: 16 * 1024 * 1024, deny: [] }),
  })
  .strict();

export const brokerSchema = z
  .object({
    /** Default deadline of a call, in ms ({@link DEFAULT_TIMEOUT_MS}). */
    timeoutMs: ms().default(DEFAULT_TIMEOUT_MS),
    /** Progress extends the deadline by `timeoutMs` from the last progress, up to `maxTotalTimeoutMs`. */
    extendOnProgress: z.boolean().default(false),
    /** Hard cap of a call including progress extensions, in ms. */
    maxTotalTimeoutMs: ms().default(10 * 60_000),
    /**
     * Invoked calls per unit (a stdio session is one unit), or `"unlimited"`; default
     * {@link DEFAULT_BUDGET_PER_UNIT}. `MCP_BROKER_CALL_BUDGET` overrides it.
     */
    budgetPerUnit: budgetSchema.default(DEFAULT_BUDGET_PER_UNIT),
    /**
     * Window of a sessionless unit's budget (the admin API's `api:<principal>`, a modern request's `modern:…`), in ms; default
     * {@link DEFAULT_BUDGET_WINDOW_MS}, at most a day. Such a unit may make `budgetPerUnit` invoked
     * calls per window; the window starts at its first call and the budget renews when it ends.
     * A session's unit has no window: its budget lasts as long as the session.
     */
    budgetWindowMs: ms().default(DEFAULT_BUDGET_WINDOW_MS),
    breaker: z
      .object({
        /** Consecutive upstream failures (`upstream_error`, `timeout`) that open a tool's breaker. */
        threshold: z.number().int().min(1).default(5),
        /** How long an open breaker refuses, in ms. */
        openMs: ms().default(60_000),
      })
      .strict()
      .default({ threshold: 5, openMs: 60_000 }),
    retry: z
      .object({
        /** Retries of a read-only tool after the first attempt, at most 2. */
        maxRetries: z.number().int().min(0).max(2).default(2),
        /** First backoff, in ms; doubles each retry, with full jitter. */
        baseDelayMs: z.number().int().min(0).default(200),
      })
      .strict()
      .default({ maxRetries: 2, baseDelayMs: 200 }),
    records: z
      .object({
        /** The ndjson records file, relative to `servers.json`. */
        path: z.string().default('./data/calls.ndjson'),
        /** Rotate when the file passes this size, in bytes. */
        maxBytes: z.number().int().min(1024).default(64 * 1024 * 1024),
        /** Rotated files kept (`calls.ndjson.1` … `.N`). */
        maxFiles: z.number().int().min(1).default(5),
        /**
         * `"never"`: a batch is answered once the kernel has its lines (they survive a broker
         * crash, not a power loss). `"batch"`: also `fdatasync` before the batch's calls are
         * answered (one disk flush per batch); a failed flush refuses the batch.
         */
        fsync: z.enum(['never', 'batch']).default('never'),
      })
      .strict()
      .default({ path: './data/calls.ndjson', maxBytes: 64 * 1024 * 1024, maxFiles: 5, fsync: 'never' }),
    /** Folder of the durable store (pins, approvals, proposals, tasks), relative to `servers.json`. */
    dataDir: z.string().default('./data'),
    /**
     * How long a task (a call run in the background, or parked) is kept after it was created, in
     * ms, when the client asks for no `ttl`; a client's `ttl` is capped at `maxTaskTtlMs`. Then
     * its row and result are deleted.
     */
    taskTtlMs: ms(30 * 24 * 3_600_000).default(3_600_000),
    /** The longest `ttl` a client may ask for a task, in ms (7 days). */
    maxTaskTtlMs: ms(30 * 24 * 3_600_000).default(7 * 24 * 3_600_000),
    /**
     * How often this broker instance writes its heartbeat to the store, in ms
     * ({@link DEFAULT_TASK_HEARTBEAT_MS}). Must be below `taskStaleMs`.
     */
    taskHeartbeatMs: ms(3_600_000).default(DEFAULT_TASK_HEARTBEAT_MS),
    /**
     * An instance whose last heartbeat is older than this is dead, in ms
     * ({@link DEFAULT_TASK_STALE_MS}): its `running` tasks become `killed` by `system`. Must be
     * above `taskHeartbeatMs`; every instance sharing a store should use the same values.
     */
    taskStaleMs: ms(24 * 3_600_000).default(DEFAULT_TASK_STALE_MS),
    /**
     * Period of the task tick (heartbeat check, reaping, TTL expiry, cancels and approvals made
     * elsewhere), in ms ({@link DEFAULT_TASK_POLL_MS}); also the `pollInterval` / `pollIntervalMs`
     * suggested to clients on every task.
     */
    taskPollMs: ms(600_000).default(DEFAULT_TASK_POLL_MS),
    /**
     * How long a remembered legacy era verdict of an upstream is used instead of probing it again,
     * in ms (a day): an upgraded server still answers `initialize`, so only age retires the verdict.
     * A modern verdict needs no age limit: a stale one fails at once and the upstream is probed again.
     */
    legacyEraMaxAgeMs: ms().default(24 * 60 * 60 * 1000),
    /** Upper bound of one stdio message, in bytes (64 MiB). */
    maxMessageBytes: z.number().int().min(1024).default(64 * 1024 * 1024),
    /**
     * After stdin EOF, how long the requests already received may take to be answered, in ms
     * ({@link DEFAULT_DRAIN_TIMEOUT_MS}); calls still running then are cancelled and recorded so.
     * An EOF while the broker still starts gives the start this long to finish (held-stdin.ts).
     */
    drainTimeoutMs: ms().default(DEFAULT_DRAIN_TIMEOUT_MS),
    /**
     * How long after the start the broker waits for upstreams still in their first dial before it
     * serves what is ready, in ms ({@link DEFAULT_START_GRACE_MS}; an upstream's own dial is bounded
     * by its `connectTimeoutMs`). Lists, and calls of the broker's own tools, wait until every first
     * dial has settled or this has passed; a call to a ready upstream's tool waits for nothing, one
     * to an upstream still dialling waits for that dial within the same bound. An upstream ready
     * later is served from then on, with `list_changed`; a call to it before then is
     * `upstream_error` (it is starting). Over HTTP the socket listens at the same moment.
     */
    startGraceMs: ms().default(DEFAULT_START_GRACE_MS),
    /**
     * Bytes written to stdout and not yet taken by the client past which the broker stops reading
     * requests from stdin and answers from stdio upstreams, until stdout drains ({@link DEFAULT_MAX_PENDING_OUTPUT_BYTES}).
     */
    maxPendingOutputBytes: z.number().int().min(64 * 1024).default(DEFAULT_MAX_PENDING_OUTPUT_BYTES),
    restart: z
      .object({
        /** First restart delay after a crash, in ms; doubles up to `maxDelayMs`. */
        initialDelayMs: z.number().int().min(0).default(500),
        maxDelayMs: z.number().int().min(1).default(30_000),
      })
      .strict()
      .default({ initialDelayMs: 500, maxDelayMs: 30_000 }),
    env: z
      .object({
        /** Names of our environment every stdio child inherits (case F19). */
        inherit: z.array(z.string()).default([...DEFAULT_INHERITED_ENV]),
      })
      .strict()
      .default({ inherit: [...DEFAULT_INHERITED_ENV] }),
  })
  .strict()
  .superRefine((broker, ctx) => {
    if (broker.taskStaleMs <= broker.taskHeartbeatMs) {
      ctx.addIssue({ code: 'custom', path: ['taskStaleMs'], message: `must be above broker.taskHeartbeatMs (${broker.taskHeartbeatMs} ms)` });
    }
  });

export const principalSchema = z
  .object({
    /** The bearer token; use `${env:NAME}`. Compared in constant time; never logged. */
    token: z.string().min(16, 'must be at least 16 characters'),
    /** `operator` may act on other principals' sessions. */
    role: z.enum(['user', 'operator']).default('user'),
    /** Overrides `broker.budgetPerUnit` for this principal's units (a number, or `"unlimited"`). */
    budgetPerUnit: budgetSchema.optional(),
  })
  .strict();

/** Default of `http.maxSessions`: live HTTP sessions in all. */
export const DEFAULT_MAX_SESSIONS = 1000;
/** Default of `http.maxSessionsPerPrincipal`. */
export const DEFAULT_MAX_SESSIONS_PER_PRINCIPAL = 100;
/** Default of `http.maxStreams`: open event streams in all. */
export const DEFAULT_MAX_STREAMS = 1000;
/** Default of `http.maxStreamsPerPrincipal`. */
export const DEFAULT_MAX_STREAMS_PER_PRINCIPAL = 100;

/** Any JSON value (capabilities are JSON objects in SDK v2's types); one instance, so servers.schema.json defines it once. */
const jsonValue = z.json();

export const httpSchema = z
  .object({
    /** Idle sessions are closed after this long, in ms. */
    sessionIdleMs: ms().default(30 * 60_000),
    /** Keep-alive comment interval on open SSE streams, in ms. */
    keepAliveMs: ms().default(15_000),
    /** Largest request body, in bytes (4 MiB); larger gets 413. */
    maxBodyBytes: z.number().int().min(1024).default(4 * 1024 * 1024),
    /** Accepted Host header names; default loopback only. */
    allowedHosts: z.array(z.string()).default(['127.0.0.1', 'localhost', '[::1]']),
    /** Accepted Origin values; default loopback origins only. Requests without Origin pass. */
    allowedOrigins: z.array(z.string()).default([]),
    /**
     * Client capabilities offered to upstreams when serving HTTP (many sessions share one
     * upstream connection, so no one session's `initialize` can decide them). Only `sampling`,
     * `elicitation` and `roots` are used; default none. An upstream request during a call is
     * re-issued to the calling session only when that session declared the capability too.
     */
    clientCapabilities: z
      .object({
        sampling: z.record(z.string(), jsonValue).optional(),
        elicitation: z.record(z.string(), jsonValue).optional(),
        roots: z.object({ listChanged: z.boolean().optional() }).optional(),
      })
      .strict()
      .default({}),
    /** Events kept per Streamable HTTP session for `Last-Event-ID` resumption (oldest dropped first). */
    resumeEvents: z.number().int().min(0).default(1000),
    /** `POST /v1/sessions/:id/mcp/reconnect` calls allowed per principal per minute; more get 429. */
    reconnectsPerMinute: z.number().int().min(1).default(6),
    /**
     * Most live sessions (Streamable HTTP and legacy SSE) in all. A new one past it ends the
     * oldest idle session (no request in progress, no open stream), or gets 503 when none is idle.
     */
    maxSessions: z.number().int().min(1).default(DEFAULT_MAX_SESSIONS),
    /** Most live sessions of one principal; past it the principal's oldest idle one ends, or 429. */
    maxSessionsPerPrincipal: z.number().int().min(1).default(DEFAULT_MAX_SESSIONS_PER_PRINCIPAL),
    /** Most open event streams (`GET /sse`, `GET /mcp`, `GET /api/v1/events`) in all; past it 503. */
    maxStreams: z.number().int().min(1).default(DEFAULT_MAX_STREAMS),
    /** Most open event streams of one principal; past it 429. */
    maxStreamsPerPrincipal: z.number().int().min(1).default(DEFAULT_MAX_STREAMS_PER_PRINCIPAL),
    /** Time a client has to send a request's headers, in ms (Node `server.headersTimeout`); then 408. At most `requestTimeoutMs`. */
    headersTimeoutMs: ms().default(20_000),
    /** Time a client has to send a whole request, headers and body, in ms (Node `server.requestTimeout`); then 408. */
    requestTimeoutMs: ms().default(60_000),
    /** An idle keep-alive connection is closed after this long, in ms (Node `server.keepAliveTimeout`). */
    keepAliveTimeoutMs: ms().default(5_000),
  })
  .strict()
  .superRefine((http, ctx) => {
    // Node refuses a headers timeout longer than the request timeout.
    if (http.headersTimeoutMs > http.requestTimeoutMs) {
      ctx.addIssue({ code: 'custom', path: ['headersTimeoutMs'], message: `must be at most http.requestTimeoutMs (${http.requestTimeoutMs} ms)` });
    }
  });

export const estateSchema = z
  .object({
    /**
     * Whether the `estate__*` tools are served (they are not either when `root` is not a folder at
     * start). True when the `estate` section is present; a config without one serves no estate.
     */
    enabled: z.boolean().default(true),
    /** The folder the estate relay serves, relative to `servers.json`. */
    root: z.string().default('./workspace'),
    /** Largest read, in bytes. */
    maxBytes: z.number().int().min(1).default(256 * 1024),
    /** Largest number of search hits. */
    maxResults: z.number().int().min(1).default(100),
  })
  .strict();

/**
 * An input of VS Code's `.vscode/mcp.json`: `${input:<id>}` in any string is its value, read
 * from `MCP_BROKER_INPUT_<ID>` (`config/interpolate.ts`, `inputEnvName`) or asked on a terminal.
 */
export const inputSchema = z
  .object({
    type: z.literal('promptString'),
    id: z.string().min(1),
    /** Shown when asking on a terminal. */
    description: z.string().optional(),
    /** Asked without echo. */
    password: z.boolean().optional(),
    /** The value when `MCP_BROKER_INPUT_<ID>` is unset and nothing is asked, or the answer is empty. */
    default: z.string().optional(),
  })
  .strict();

/** Default of `observability.otlp.samplingRatio`: every call is traced. */
export const DEFAULT_SAMPLING_RATIO = 1;
/** Default of `observability.otlp.exportDelayMs`: the OpenTelemetry SDK's batch delay. */
export const DEFAULT_EXPORT_DELAY_MS = 5000;

/**
 * Traces, metrics and the status page (issue 20; README "Observability"). Traces are off unless
 * `otlp.endpoint` is set; the status page `/` is served over HTTP behind the same bearer auth as
 * `/mcp`, and `/metrics` to an operator's token (to anyone with `metricsPublic`).
 */
export const observabilitySchema = z
  .object({
    /** OpenTelemetry traces over OTLP/HTTP (JSON); absent: no tracing, no span objects. */
    otlp: z
      .object({
        /** The collector's traces URL, e.g. `http://127.0.0.1:4318/v1/traces`. */
        endpoint: z.url({ protocol: /^https?$/ }),
        /** Sent with every export (e.g. an API key); their values are scrubbed from logs. */
        headers: stringMap.default({}),
        /** Share of calls traced when the caller sent no sampled trace context, 0–1 (parent-based otherwise). */
        samplingRatio: z.number().min(0).max(1).default(DEFAULT_SAMPLING_RATIO),
        /** Time between batch exports, in ms; what is left is exported at shutdown. */
        exportDelayMs: ms(600_000).default(DEFAULT_EXPORT_DELAY_MS),
        /** `service.name` of the spans. */
        serviceName: z.string().min(1).default('mcp-broker'),
      })
      .strict()
      .optional(),
    /** Serve `GET /metrics` without authentication (for a scraper without a token); default false: an operator's token only. */
    metricsPublic: z.boolean().default(false),
  })
  .strict();

/** The upstreams, keyed by server key. */
const serversSchema = z.record(z.string(), serverSchema);

export const configSchema = z
  .object({
    /** The JSON Schema of this file (`./servers.schema.json`), for editors; not used. */
    $schema: z.string().optional(),
    mcpServers: serversSchema.default({}),
    /** VS Code's name for `mcpServers`; one of the two may be given. The loaded config has `mcpServers`. */
    servers: serversSchema.optional(),
    /** VS Code's inputs, for `${input:id}`. */
    inputs: z.array(inputSchema).default([]),
    broker: brokerSchema.default(brokerSchema.parse({})),
    policy: policySchema.default(policySchema.parse({})),
    principals: z.record(z.string(), principalSchema).default({}),
    http: httpSchema.default(httpSchema.parse({})),
    /** The estate relay: served only when this section is present (issue 18 §7); `enabled` then defaults to true. */
    estate: estateSchema.default(estateSchema.parse({ enabled: false })),
    /** ES modules exporting function tools, relative to `servers.json`. */
    functions: z.array(z.string()).default([]),
    observability: observabilitySchema.default(observabilitySchema.parse({})),
  })
  .strict();

export type Config = z.output<typeof configSchema>;
export type ServerConfig = z.output<typeof serverSchema>;
export type StdioServerConfig = z.output<typeof stdioServerSchema>;
export type HttpServerConfig = z.output<typeof httpServerSchema>;
export type SseServerConfig = z.output<typeof sseServerSchema>;
export type RestServerConfig = z.output<typeof restServerSchema>;
export type PolicyConfig = z.output<typeof policySchema>;
export type BrokerConfig = z.output<typeof brokerSchema>;
export type PrincipalConfig = z.output<typeof principalSchema>;
export type InputConfig = z.output<typeof inputSchema>;
export type ObservabilityConfig = z.output<typeof observabilitySchema>;

/** The kind of a server entry. */
export function serverKind(server: ServerConfig): 'stdio' | 'http' | 'sse' | 'rest' {
  if ('command' in server) return 'stdio';
  if (server.type === 'sse') return 'sse';
  if (server.type === 'rest') return 'rest';
  return 'http';
}
