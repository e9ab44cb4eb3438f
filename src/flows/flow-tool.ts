/**
 * `broker__flow_run`: several tool calls as one plan, with rollback of what landed (seed
 * 000_13a5a3abd08ace07.txt; issue 16). The run itself is flow.ts; this is the built-in tool.
 *
 * Every step, inverse and `on_failure` call is a full brokered call made as the flow's own
 * caller (same session, principal and budget unit): judged (a step to a tool the principal is
 * denied fails the flow `denied`; nothing is reachable through a flow that is not reachable
 * directly), counted against the unit's budget (an inverse too, though it is never refused
 * `budget_exhausted`: broker/budget.ts), breaker, deadline (each call its own), retried
 * when read-only, scrubbed, evaluated, and recorded with `flow: {id, step, phase?}` (the flow's
 * call id and the step's id). The flow call itself is judged and recorded too, and its answer is
 * scrubbed and evaluated like any result.
 *
 * The answer ({@link FlowAnswerSchema}) is the result's `structuredContent`, and the same JSON
 * as its second text block; the first text block is one line (`flow ok: …`, or the `error`
 * line). A failed flow has `success: false` and `isError: true`, so called directly it ends
 * `tool_error` with its body intact, and as a nested flow's step it fails the parent's step. The
 * inverses it leaves unapplied travel in the result's `_meta["mcp-broker/rollback"]`, so a parent
 * flow harvests them. Progress: one update per step (`progress` = steps begun before it,
 * `total` = steps).
 */
import { defineFunctionTool, type FunctionTool } from '../router/function-tool.js';
import type { CallerSession, CallRequest } from '../broker/types.js';
import type { Outcome } from '../broker/outcomes.js';
import type { CallToolResult } from '@modelcontextprotocol/server';
import type { EstateScope } from '../builtins/estate/index.js';
import { bubbledMeta, runFlow } from './flow.js';
import { FlowAnswerSchema, FlowArgsSchema, type FlowAnswer } from './schema.js';

/** The advertised name of the tool. */
export const FLOW_TOOL = 'broker__flow_run';

export interface FlowToolDeps {
  /** The broker's `call`: runs one request through the whole path as `session`. */
  call(request: CallRequest, session: CallerSession): Promise<{ callId: string; outcome: Outcome; reason?: string; result: CallToolResult; attempts?: number; rollback?: unknown }>;
  /**
   * The estate's scope (builtins/estate `EstateScope` over `estate.root`, given `brokerOwnPaths`),
   * for `snapshot: "estate"`: its root is what is saved, and the snapshot is refused while
   * {@link EstateScope.holdsReserved} (a restore would put back old records and a store under a
   * running broker); {@link EstateScope.reservedNow} names the broker's own files elsewhere in
   * the root (a hard link to the records file), which the snapshot leaves out.
   */
  readonly estate: Pick<EstateScope, 'root' | 'holdsReserved' | 'reservedNow'>;
  /**
   * Whether `principal` may ask for `snapshot: "estate"` (an operator, or `local`): its restore
   * puts back every file of the shared root, other principals' changes made meanwhile included,
   * and judges none of it.
   */
  mayRestoreEstate(principal: string): boolean;
}

/** The `broker__flow_run` function tool (registered under server `broker`). */
export function flowTool(deps: FlowToolDeps): FunctionTool {
  return defineFunctionTool({
    name: FLOW_TOOL,
    title: 'Run several tool calls as one plan, with rollback',
    description:
      'Runs "steps" in order, each a tool call {id, tool, args?, inverse?} (no other fields) through the broker like any call; a step fails on any outcome but ok, including a tool that reports its own failure, and the rest do not run. Arguments may use ${steps.<id>.result...} to read an earlier step\'s result (its structuredContent, else its JSON text). A step whose tool is broker__flow_run is a nested flow. Undo: a step\'s declared inverse, or the rollback descriptor its result carries in _meta["mcp-broker/rollback"] (a failing step may carry one for the part that landed). With rollback_on_failure the inverses run newest first (the failing step\'s own first); without it they are returned in "unapplied" and named in "error" as calls to run (with it, "unapplied" lists the inverses that failed). on_failure runs after. snapshot: "estate" restores the estate root\'s files on failure. Answer: {success, flowId, failedStep?, error?, steps: [{id, tool, outcome, data}], rolledBack, unapplied, onFailure?, snapshot?}.',
    parameters: FlowArgsSchema,
    output: FlowAnswerSchema,
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    // Its steps follow the signal and its rollback must finish: a cancelled flow's record names what it left.
    settlesOnAbort: true,
    async handler(flow, context) {
      // A flow run as a task runs its steps in that task: a step's `ask` parks the task (tasks/engine.ts).
      const { meta, onServerRequest, taskId } = context.request;
      const refusal =
        flow.snapshot !== 'estate'
          ? undefined
          : !deps.mayRestoreEstate(context.session.principal)
            ? `snapshot "estate" restores the whole estate root, other principals' changes included: only an operator may ask for it; no step ran`
            : (await deps.estate.holdsReserved())
              ? `snapshot "estate" would restore the broker's own data (broker.dataDir, broker.records.path), which the estate root holds: move them out of it to use a snapshot; no step ran`
              : undefined;
      if (refusal !== undefined) {
        const error = refusal;
        const refused: FlowAnswer = { success: false, flowId: context.callId, steps: [], rolledBack: [], unapplied: [], error };
        return { content: [{ type: 'text', text: error }, { type: 'text', text: JSON.stringify(refused) }], structuredContent: refused, isError: true } satisfies CallToolResult;
      }
      const { answer, bubbled } = await runFlow(flow, context.callId, context.signal, {
        call: (c) =>
          deps.call({ name: c.name, args: c.args, signal: c.signal, flow: c.flow, meta, onServerRequest, ...(taskId !== undefined ? { taskId } : {}), ...(c.invalidArguments ? { invalidArguments: c.invalidArguments } : {}) }, context.session),
        flowTool: FLOW_TOOL,
        estateRoot: deps.estate.root,
        estateOwnFiles: async () => (await deps.estate.reservedNow()).ids,
        onStep: (index, total, id) => context.progress({ progress: index, total, message: `step ${id}` }),
      });
      const line = answer.success ? `flow ok: ${answer.steps.length} step(s) ran` : answer.error!;
      const meta_ = bubbledMeta(bubbled);
      return {
        content: [
          { type: 'text', text: line },
          { type: 'text', text: JSON.stringify(answer) },
        ],
        structuredContent: answer,
        ...(answer.success ? {} : { isError: true }),
        ...(meta_ ? { _meta: meta_ } : {}),
      } satisfies CallToolResult;
    },
  });
}
