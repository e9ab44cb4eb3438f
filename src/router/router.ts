/**
 * The tool router: the one dispatch point of every call (DESIGN.md "The data path"; seed
 * 003_208e7d69e85a85fd.txt). The broker's invoke stage calls {@link ToolRouter.dispatch}; the
 * session lists through {@link ToolRouter.list} and resolves through {@link ToolRouter.resolve}.
 *
 * Three tables, looked up in this order:
 *  1. **primary handlers**, attached explicitly with {@link ToolRouter.attach}: they run first and
 *     win over a function tool of the same name (consumer-explicit beats helper-defined);
 *  2. **function tools**, the fallback table, filled by {@link ToolRouter.register} with
 *     {@link defineFunctionTool} results (the broker's own `broker__*` / `estate__*` tools and the
 *     user modules of `servers.json` `functions`);
 *  3. **upstream tools** of the roster, dispatched to their upstream by table.
 *
 * Dispatch policy ({@link ToolRouter.dispatchBatch}): a batch is claimed only when every name in
 * it is known; a batch with ANY unknown name is denied as a whole, deterministically and at once
 * (outcome `denied`, code `unknown_tool`), never left waiting for someone to claim it. A claimed
 * batch runs every call in parallel and in isolation (one call's throw never touches another),
 * and answers positionally, one {@link RouterOutcome} per call: `ok`, `error` or `denied`.
 *
 * Function tools: arguments go through `parameters.safeParse` (the handler gets the output:
 * defaults applied, transforms run; a failure is `error`/`invalid_arguments` with the formatted
 * zod issues). A `requireApproval` tool asks through the broker's ask path (`askApproval`,
 * elicitation); after an approval the router checks that the caller is still there
 * (`session.isLive()`, then a `ping` round trip: {@link stillLive}) and, when the caller's
 * connection has gone, does NOT run the handler (`error`/`connection_lost`): no side effect
 * that could not be acknowledged.
 */
import { ProtocolError, ProtocolErrorCode, type CallToolResult, type Tool } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { askApproval, stillLive } from './ask.js';
import type { RoutedCall, ToolTarget } from './call.js';
import { BrokerError, joinLines, messageOf } from '../shared/errors.js';
import { toAbortSignal, type CancelSignal } from '../shared/cancel.js';
import type { Clock } from '../shared/clock.js';
import type { Registry } from '../upstream/registry.js';
import type { CallOptions } from '../upstream/types.js';
import { toolHash } from '../upstream/roster.js';
import { isFunctionTool, toCallToolResult, type FunctionTool, type FunctionToolContext } from './function-tool.js';
import { withUpstreamTrace } from '../shared/trace-context.js';

/** Default wait of a `requireApproval` prompt, in ms; the gateway passes `policy.askTimeoutMs`. */
export const DEFAULT_ASK_TIMEOUT_MS = 120_000;

/**
 * A primary handler: explicit code that serves some tools ahead of the function-tool table.
 * Arguments reach it unparsed (like an upstream); it answers a `CallToolResult` or throws
 * (`ToolDeniedError` → `denied`; `BrokerError` passes to the invoke stage as is).
 */
export interface PrimaryHandler {
  /** Server key shown in records (`subject` is `<server>/<tool>`). */
  readonly server: string;
  /** The tools it serves, advertised under their `name`. */
  readonly tools: readonly Tool[];
  call(name: string, args: Record<string, unknown>, context: FunctionToolContext): Promise<CallToolResult>;
}

/**
 * One call's outcome in a batch (seed 003): `ok` with its result; `error` (the tool failed, the
 * arguments did not parse, the connection went away after approval, or the upstream failed:
 * `error` keeps the thrown value); `denied` (a `ToolDeniedError`, an approval not given, or a
 * batch holding an unknown name).
 */
export type RouterOutcome =
  | { readonly outcome: 'ok'; readonly result: CallToolResult }
  | {
      readonly outcome: 'error';
      readonly code: 'invalid_arguments' | 'handler_error' | 'connection_lost' | 'upstream_error' | 'aborted';
      readonly message: string;
      readonly error?: unknown;
    }
  | { readonly outcome: 'denied'; readonly code: 'unknown_tool' | 'denied' | 'approval_required'; readonly message: string };

export interface RouterOptions {
  /** How long a `requireApproval` prompt waits, in ms; default {@link DEFAULT_ASK_TIMEOUT_MS}. */
  askTimeoutMs?: number;
}

type Route =
  | { kind: 'primary'; handler: PrimaryHandler }
  | { kind: 'function'; tool: LocalFunctionTool }
  | { kind: 'upstream'; server: string; toolName: string };

interface LocalFunctionTool {
  readonly tool: FunctionTool;
  readonly server: string;
  readonly toolName: string;
  readonly hash: string;
}

/**
 * Runs one attempt of a call: what the broker's invoke stage needs of the router (broker/invoke.ts).
 * `C` is the call it is handed (the invoke stage's: `BrokerCall`); {@link ToolRouter} takes any {@link RoutedCall}.
 */
export interface Dispatcher<C extends RoutedCall = RoutedCall> {
  dispatch(call: C): Promise<CallToolResult>;
}

/** The per-gateway router (see the module comment); the gateway owns the one instance. */
export class ToolRouter implements Dispatcher {
  private readonly primaries: PrimaryHandler[] = [];
  private readonly functions = new Map<string, LocalFunctionTool>();

  constructor(
    private readonly registry: Registry,
    private readonly clock: Clock,
    /** Read at each prompt (the gateway's `askTimeoutMs` follows a config reload). */
    private readonly options: RouterOptions = {},
  ) {}

  /**
   * Adds function tools to the fallback table, under `server` in records (default `functions`;
   * a name `<server>__x` is recorded as tool `x`). Entries that are not {@link defineFunctionTool}
   * results are skipped; a name registered again is replaced in place. Returns how many names
   * were new.
   */
  register(tools: readonly unknown[] | null | undefined, options: { server?: string } = {}): number {
    if (!tools?.length) return 0;
    const server = options.server ?? 'functions';
    let added = 0;
    for (const tool of tools) {
      if (!isFunctionToolLike(tool)) continue;
      const name = tool.definition.name;
      if (!this.functions.has(name)) added++;
      const toolName = name.startsWith(`${server}__`) ? name.slice(server.length + 2) : name;
      this.functions.set(name, { tool, server, toolName, hash: toolHash(tool.definition) });
    }
    return added;
  }

  /** Attaches a primary handler (runs before the function tools); returns the function that detaches it. */
  attach(handler: PrimaryHandler): () => void {
    if (!this.primaries.includes(handler)) this.primaries.push(handler);
    return () => this.detach(handler);
  }

  /** Detaches a primary handler; its names fall back to function tools, then upstreams. Returns whether it was attached. */
  detach(handler: PrimaryHandler): boolean {
    const at = this.primaries.indexOf(handler);
    if (at < 0) return false;
    this.primaries.splice(at, 1);
    return true;
  }

  /** The function tool registered under `name`, if any. */
  functionTool(name: string): FunctionTool | undefined {
    return this.functions.get(name)?.tool;
  }

  /** Names served locally (primary handlers and function tools), for collision checks. */
  localNames(): string[] {
    const names = new Set<string>();
    for (const p of this.primaries) for (const t of p.tools) names.add(t.name);
    for (const name of this.functions.keys()) names.add(name);
    return [...names];
  }

  /** Every tool advertised: primary handlers, then function tools, then the roster; the first claimant of a name wins. */
  list(): Tool[] {
    const out: Tool[] = [];
    const seen = new Set<string>();
    const add = (t: Tool) => {
      if (seen.has(t.name)) return;
      seen.add(t.name);
      out.push(t);
    };
    for (const p of this.primaries) for (const t of p.tools) add(t);
    for (const f of this.functions.values()) add(f.tool.definition);
    for (const t of this.registry.roster.tools.values()) add(t.definition);
    return out;
  }

  /** The target of an advertised name; undefined when no tool by that name was ever known. */
  resolve(name: string): ToolTarget | undefined {
    const primary = this.primaryFor(name);
    if (primary) {
      const definition = primary.tools.find((t) => t.name === name)!;
      return { name, server: primary.server, toolName: name, state: 'active', source: 'local', definition, hash: toolHash(definition) };
    }
    const local = this.functions.get(name);
    if (local) {
      return {
        name,
        server: local.server,
        toolName: local.toolName,
        state: 'active',
        source: 'local',
        definition: local.tool.definition,
        hash: local.hash,
        ...(local.tool.policyDefault ? { policyDefault: local.tool.policyDefault } : {}),
        ...(local.tool.requireApproval ? { requireApproval: true } : {}),
        ...(local.tool.requiresPrivilege ? { requiresPrivilege: true } : {}),
        ...(local.tool.privilegeReason ? { privilegeReason: local.tool.privilegeReason } : {}),
        ...(local.tool.approvalDetail ? { approvalDetail: local.tool.approvalDetail } : {}),
      };
    }
    const found = this.registry.resolveTool(name);
    if (!found) return undefined;
    return {
      name,
      server: found.server,
      toolName: found.toolName,
      state: found.state,
      source: 'upstream',
      definition: found.tool?.definition,
      hash: found.tool?.hash,
      ...(found.reason ? { reason: found.reason } : {}),
    };
  }

  /**
   * The broker's invoke (one attempt of one call): a batch of one, its outcome mapped to what the
   * invoke stage classifies. `ok` → the result (the invoke stage reads `tool_error` off it);
   * a function tool's own throw → a result with `isError: true` (`tool_error`);
   * `invalid_arguments`, `denied`, `approval_required` → a `BrokerError` of that code;
   * `connection_lost` → `BrokerError('cancelled')`; an upstream's or primary handler's throw, or
   * the abort reason of a call aborted by its deadline or the client → rethrown as is (an
   * upstream's `ToolDeniedError` → `denied`, unless the call was aborted). Every failure is a
   * rejection, never a throw.
   */
  dispatch(call: RoutedCall): Promise<CallToolResult> {
    let route: Route | undefined;
    try {
      route = this.route(call);
    } catch (err) {
      return Promise.reject(err);
    }
    if (!route) return Promise.reject(new BrokerError('denied', `no tool named "${call.request.name}"; the batch of 1 call(s) is refused`));
    if (route.kind !== 'upstream') return this.runOne(call, route).then(answerOf);
    // A tool of an upstream, the broker path's common case (issue 19: every tools/call passes
    // here): its answer as it comes and its failure as runOne and answerOf would make of it,
    // without the batch's outcome in between.
    let answer: Promise<CallToolResult>;
    try {
      // As `await` would take it: a bare value or a thenable is adopted.
      answer = Promise.resolve(this.callUpstream(call, route.server, route.toolName));
    } catch (err) {
      answer = Promise.reject(err); // no such upstream, or an upstream that threw at once
    }
    return answer.catch((err: unknown) => Promise.reject(upstreamFailure(call, err)));
  }

  /**
   * Dispatches a batch (seed 003 "Dispatch policy"): every name known → all run in parallel,
   * positional outcomes; any name unknown → every position `denied` (`unknown_tool`), at once.
   * Never throws and never waits on anything but the calls themselves.
   */
  async dispatchBatch(calls: readonly RoutedCall[]): Promise<RouterOutcome[]> {
    const routes = calls.map((c) => this.route(c));
    const missing = routes.findIndex((r) => r === undefined);
    if (missing >= 0) {
      const message = `no tool named "${calls[missing]!.request.name}"; the batch of ${calls.length} call(s) is refused`;
      return calls.map(() => ({ outcome: 'denied', code: 'unknown_tool', message }));
    }
    return Promise.all(calls.map((c, i) => this.runOne(c, routes[i]!)));
  }

  private primaryFor(name: string): PrimaryHandler | undefined {
    return this.primaries.find((p) => p.tools.some((t) => t.name === name));
  }

  private route(call: RoutedCall): Route | undefined {
    const target = call.target;
    if (target?.source === 'upstream') return { kind: 'upstream', server: target.server, toolName: target.toolName };
    const name = target?.name ?? call.request.name;
    const primary = this.primaryFor(name);
    if (primary) return { kind: 'primary', handler: primary };
    const local = this.functions.get(name);
    if (local) return { kind: 'function', tool: local };
    if (target) return undefined;
    const found = this.registry.resolveTool(name);
    if (found?.state === 'active') return { kind: 'upstream', server: found.server, toolName: found.toolName };
    return undefined;
  }

  /** One call, isolated: every throw becomes this call's outcome. */
  private async runOne(call: RoutedCall, route: Route): Promise<RouterOutcome> {
    try {
      switch (route.kind) {
        case 'primary':
          return { outcome: 'ok', result: await untilAborted(route.handler.call(call.request.name, call.request.args, contextOf(call)), call.signal) };
        case 'function':
          return await this.runFunction(call, route.tool.tool);
        case 'upstream':
          return { outcome: 'ok', result: await this.callUpstream(call, route.server, route.toolName) };
      }
    } catch (err) {
      // Deadline or client cancel: the deadline stage names the outcome (`timeout` / `cancelled`).
      if (call.signal.aborted) return { outcome: 'error', code: 'aborted', message: messageOf(err), error: err };
      if (isDenial(err)) return { outcome: 'denied', code: 'denied', message: messageOf(err) };
      if (route.kind === 'upstream') return { outcome: 'error', code: 'upstream_error', message: messageOf(err), error: err };
      return { outcome: 'error', code: 'handler_error', message: messageOf(err) || 'the tool failed', error: err };
    }
  }

  private async runFunction(call: RoutedCall, tool: FunctionTool): Promise<RouterOutcome> {
    const parsed = tool.parameters.safeParse(call.request.args ?? {});
    if (!parsed.success) {
      return { outcome: 'error', code: 'invalid_arguments', message: `${tool.name}: ${joinLines(z.prettifyError(parsed.error))}` };
    }
    if (tool.requireApproval) {
      // On the broker path the judge has asked already (outside the deadline); asked here only
      // when the router runs without one.
      if (!call.approved) {
        const names = Object.keys(call.request.args ?? {});
        const verdict = await askApproval(call.session, {
          message: `Allow the tool "${tool.name}" to run${names.length ? ` (arguments: ${names.join(', ')})` : ''}?`,
          timeoutMs: this.options.askTimeoutMs ?? DEFAULT_ASK_TIMEOUT_MS,
          signal: toAbortSignal(call.signal),
        });
        if (!verdict.approved) return { outcome: 'denied', code: 'approval_required', message: verdict.reason };
      }
      // Seed 003: the wire may have died during the approval round trip; then nothing runs. The
      // judge already pinged the caller after its approval (outside the deadline); here the
      // connection only has to be still open.
      const live = call.approved ? call.session.isLive() : await stillLive(call.session, toAbortSignal(call.signal));
      if (!live) {
        return { outcome: 'error', code: 'connection_lost', message: `approved, but the caller's connection closed before "${tool.name}" ran; it did not run` };
      }
    }
    const work = Promise.resolve().then(() => tool.handler(parsed.data, contextOf(call)));
    const result = toCallToolResult(await (tool.settlesOnAbort ? work : untilAborted(work, call.signal)));
    if (call.signal.aborted && result.isError) {
      const first = result.content?.[0];
      if (first?.type === 'text') call.endedAs = first.text;
    }
    return { outcome: 'ok', result };
  }

  private callUpstream(call: RoutedCall, server: string, toolName: string): Promise<CallToolResult> {
    const upstream = this.registry.upstream(server);
    if (!upstream) throw new BrokerError('upstream_unavailable', `no upstream "${server}"`);
    const end = call.hardDeadline ?? call.deadline ?? this.clock.now() + 60_000;
    const remaining = Math.max(1, end - this.clock.now());
    const options: CallOptions = {
      signal: call.signal,
      timeoutMs: remaining,
      meta: call.request.meta,
      asTask: call.target?.definition?.execution?.taskSupport === 'required',
      caller: { clientCapabilities: call.session.clientCapabilities, logLevel: call.session.logLevel },
      onServerRequest: call.request.onServerRequest,
      onUpstreamTask: call.request.onUpstreamTask,
      onArgumentsStripped: (names) => (call.notes.stripped = names),
      onProgress: call.onProgress,
      principal: call.session.principal,
      ...(call.session.era === 'modern' && { inputRelay: call.inputRelay ?? {} }),
    };
    const trace = call.traceMeta;
    if (!trace) {
      const pending = upstream.callTool(toolName, call.request.args, options);
      return call.session.era === 'modern' ? withCapabilityError(call, pending) : pending;
    }
    // Tracing: the attempt's own context replaces the caller's, in `_meta` for every upstream and as headers for HTTP ones.
    options.meta = { ...call.request.meta, ...trace };
    return withCapabilityError(call, withUpstreamTrace(trace, () => upstream.callTool(toolName, call.request.args, options)));
  }
}

function contextOf(call: RoutedCall): FunctionToolContext {
  return {
    callId: call.callId,
    // A real AbortSignal for the handler (the call's own is a Cancellation; shared/cancel.ts).
    signal: toAbortSignal(call.signal),
    session: call.session,
    notes: call.notes,
    request: call.request,
    progress: (update) => call.onProgress?.(update),
  };
}

/** A `ToolDeniedError` from any copy of the package (matched by name and code, not identity). */
/** What {@link ToolRouter.dispatch} answers for a call's outcome: the result, or the error that stands for the outcome. */
function answerOf(answer: RouterOutcome): CallToolResult {
  switch (answer.outcome) {
    case 'ok':
      return answer.result;
    case 'denied':
      throw new BrokerError(answer.code === 'approval_required' ? 'approval_required' : 'denied', answer.message);
    case 'error':
      if (answer.code === 'handler_error' && !(answer.error instanceof BrokerError)) {
        return { content: [{ type: 'text', text: answer.message }], isError: true };
      }
      if (answer.code === 'invalid_arguments') throw new BrokerError('invalid_arguments', answer.message);
      if (answer.code === 'connection_lost') throw new BrokerError('cancelled', answer.message);
      throw answer.error ?? new BrokerError('upstream_error', answer.message);
  }
}

/**
 * What {@link ToolRouter.dispatch} rejects with when a call to an upstream's tool failed with
 * `err`: a denial (`ToolDeniedError`) as `denied`, unless the call was aborted; anything else as it is.
 */
function upstreamFailure(call: RoutedCall, err: unknown): unknown {
  if (!call.signal.aborted && isDenial(err)) return new BrokerError('denied', messageOf(err));
  // Read even when `err` is passed on, as runOne did: a message that cannot be read rejects with that error.
  const message = messageOf(err);
  return err ?? new BrokerError('upstream_error', message);
}

function isDenial(err: unknown): boolean {
  return err instanceof Error && err.name === 'ToolDeniedError' && (err as { code?: unknown }).code === 'denied';
}

function isFunctionToolLike(value: unknown): value is FunctionTool {
  return isFunctionTool(value) && typeof value.handler === 'function' && typeof value.definition?.name === 'string';
}

/** Settles with `work`, or rejects with the signal's reason as soon as it aborts (the work is left to finish on its own). */
function untilAborted<T>(work: Promise<T>, signal: CancelSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason ?? new Error('aborted'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason ?? new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/**
 * A modern upstream's -32021 (the call needs a client capability the request did not declare;
 * we passed on the caller's own) reaches a modern caller as that error (`call.requestError`), as
 * the spec's versioning page says; the call is still settled and recorded `upstream_error`.
 */
/** A modern caller's missing capability (-32021) is noted for the caller's error answer (`requestError`). */
async function withCapabilityError(call: RoutedCall, pending: Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await pending;
  } catch (err) {
    if (call.session.era === 'modern' && ProtocolError.isInstance(err) && err.code === ProtocolErrorCode.MissingRequiredClientCapability) {
      call.requestError = { code: err.code, message: err.message, ...(err.data !== undefined && { data: err.data }) };
    }
    throw err;
  }
}
