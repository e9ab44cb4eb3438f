/**
 * `defineFunctionTool`: a tool served by the broker itself, defined by a zod schema and a handler
 * (seed 003_208e7d69e85a85fd.txt). The broker's own tools (`broker__*`, `estate__*`) and the user
 * modules named in `servers.json` `functions` are all function tools; the router dispatches them.
 *
 * The advertised `inputSchema` is generated from `parameters` (`z.toJSONSchema`, input side, so
 * fields with defaults are optional); the handler receives the parsed OUTPUT (defaults applied,
 * transforms run). A parse failure never reaches the handler: it is `invalid_arguments` with the
 * formatted zod issues.
 */
import { z } from 'zod';
import type { CallToolResult, Tool, ToolAnnotations } from '@modelcontextprotocol/server';
import type { CallerSession, RouteNotes, RoutedRequest } from './call.js';
import type { ProgressUpdate } from '../upstream/types.js';

/** Every advertised name matches this (DESIGN.md "Roster names"). */
export const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Brand of a {@link defineFunctionTool} result; a global symbol, so two copies of the package agree. */
const FUNCTION_TOOL = Symbol.for('mcp-broker/function-tool');

/** What a handler knows about the call it serves. */
export interface FunctionToolContext {
  /** The call id (also in the record and the result's `_meta`). */
  readonly callId: string;
  /** Aborted at the call's deadline or when the client cancels; long handlers should honour it. */
  readonly signal: AbortSignal;
  /** Who is calling: `sessionId`, `principal`, `unit`. */
  readonly session: CallerSession;
  /** Sends progress to the client (a no-op when it sent no progress token). */
  progress(update: ProgressUpdate): void;
  /** Extra fields for the call's record (for example the estate relay's `proposal`). */
  readonly notes: RouteNotes;
  /** The call's request to the broker (its `meta`, its relay of upstream→client requests, the `flow` that made it, the task it runs as). */
  readonly request: Pick<RoutedRequest, 'meta' | 'onServerRequest' | 'flow' | 'taskId'>;
}

/**
 * What a handler may return: a full `CallToolResult` (anything with a `content` array) passes as
 * is; a string becomes one text block; `undefined`/`null` an empty result; any other JSON value
 * one text block of its JSON, and a plain object is also the `structuredContent`.
 */
export type FunctionToolReturn = CallToolResult | string | number | boolean | null | undefined | object;

export interface FunctionToolSpec<S extends z.ZodType = z.ZodType> {
  /** The advertised name, used as is: must match `^[A-Za-z0-9_-]{1,64}$`. */
  name: string;
  title?: string;
  description: string;
  /** Arguments; must describe an object. */
  parameters: S;
  /** Runs the call. Throw {@link ToolDeniedError} to refuse it (`denied`); any other throw is the tool's own failure. */
  handler(args: z.output<S>, context: FunctionToolContext): FunctionToolReturn | Promise<FunctionToolReturn>;
  /** MCP tool annotations (`readOnlyHint` makes it retryable and allowed in `read-only` mode). */
  annotations?: ToolAnnotations;
  /** Schema of `structuredContent`; advertised as the tool's `outputSchema`. */
  output?: z.ZodType;
  /**
   * Ask the human (elicitation) before every call; after an approval the handler runs only if
   * the caller's connection is still live. Default `false`.
   */
  requireApproval?: boolean;
  /**
   * The policy action when no `policy.rules` entry names this tool, instead of `policy.default`.
   * `ask` for destructive built-ins (`estate__apply_proposal`). Default: none (`policy.default`).
   */
  policyDefault?: 'ask' | 'deny';
  /**
   * The tool acts on what every session shares (`broker__reconnect` re-dials an upstream every
   * session uses): the judge denies it to a principal that is neither `local` nor an `operator`,
   * unless a `policy.rules` entry allows it by its literal name. Default `false`.
   */
  requiresPrivilege?: boolean;
  /**
   * What makes a {@link requiresPrivilege} tool need privilege, as the denial says it after the
   * tool's name (`"broker__reconnect" acts on upstream connections every session shares: …`).
   * Default "acts on what every session shares".
   */
  privilegeReason?: string;
  /**
   * Lines the approval prompt shows about what this call would do (after the tool, the reason
   * and before the arguments), when the call is asked about; each scrubbed whole, then cut at
   * `ASK_SUMMARY_MAX_CHARS` (broker/judge.ts) before it is shown. Not to be cut here: a cut
   * through a secret would leave its first characters unrecognised by the scrub.
   * `args` are the call's raw arguments (not yet validated). A throw fails the call closed
   * (`guard_error`). Default: none (the prompt shows the arguments only).
   */
  approvalDetail?(args: unknown, session: CallerSession): readonly string[] | Promise<readonly string[]>;
  /**
   * The handler ends on its own soon after `signal` aborts (the calls it makes follow it) and may
   * still have work to finish (a flow's rollback): the router awaits it instead of answering at
   * the abort. When it returns a failure (`isError`) after the abort, the call still ends
   * `cancelled` / `timeout`, and the result's first text line is added to the reason (so the
   * record says what it left behind). Default `false`: the call is answered at the abort and the
   * handler is left to finish on its own.
   */
  settlesOnAbort?: boolean;
}

/** A defined function tool: the spec plus its advertised definition. */
export interface FunctionTool<S extends z.ZodType = z.ZodType> extends Readonly<FunctionToolSpec<S>> {
  /** The MCP `Tool` as advertised (`inputSchema` generated from `parameters`). */
  readonly definition: Tool;
  readonly [FUNCTION_TOOL]: true;
}

/** A handler's refusal: the call's outcome is `denied` (seed 003: `ToolDeniedError` → `denied`). */
export class ToolDeniedError extends Error {
  readonly code = 'denied';
  constructor(message = 'the tool refused this call') {
    super(message);
    this.name = 'ToolDeniedError';
  }
}

/**
 * Defines a function tool. Throws `TypeError` for a bad name, a missing handler, or parameters
 * that are not an object schema.
 */
export function defineFunctionTool<S extends z.ZodType>(spec: FunctionToolSpec<S>): FunctionTool<S> {
  if (typeof spec?.name !== 'string' || !TOOL_NAME.test(spec.name)) {
    throw new TypeError(`function tool name ${JSON.stringify(spec?.name)} must match ^[A-Za-z0-9_-]{1,64}$`);
  }
  if (typeof spec.handler !== 'function') throw new TypeError(`function tool "${spec.name}" needs a handler`);
  if (!spec.parameters || typeof (spec.parameters as { safeParse?: unknown }).safeParse !== 'function') {
    throw new TypeError(`function tool "${spec.name}": parameters must be a zod schema`);
  }
  const inputSchema = jsonSchemaOf(spec.parameters, 'input');
  if (inputSchema.type !== 'object') throw new TypeError(`function tool "${spec.name}": parameters must be a z.object(...)`);
  const definition: Tool = {
    name: spec.name,
    ...(spec.title ? { title: spec.title } : {}),
    description: spec.description ?? '',
    inputSchema: inputSchema as Tool['inputSchema'],
    ...(spec.output ? { outputSchema: jsonSchemaOf(spec.output, 'output') as Tool['outputSchema'] } : {}),
    ...(spec.annotations ? { annotations: spec.annotations } : {}),
  };
  return Object.freeze({ ...spec, definition, [FUNCTION_TOOL]: true as const });
}

/** Whether `value` came from {@link defineFunctionTool} (any copy of this package). */
export function isFunctionTool(value: unknown): value is FunctionTool {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[FUNCTION_TOOL] === true;
}

/** A handler's return value as a `CallToolResult` (see {@link FunctionToolReturn}). */
export function toCallToolResult(value: FunctionToolReturn): CallToolResult {
  if (value === undefined || value === null) return { content: [] };
  if (typeof value === 'string') return { content: [{ type: 'text', text: value }] };
  if (typeof value === 'object' && Array.isArray((value as { content?: unknown }).content)) return value as CallToolResult;
  const text = JSON.stringify(value) ?? String(value);
  const result: CallToolResult = { content: [{ type: 'text', text }] };
  if (typeof value === 'object' && !Array.isArray(value)) result.structuredContent = value as Record<string, unknown>;
  return result;
}

function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  void _drop;
  return rest;
}
