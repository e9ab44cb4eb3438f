/**
 * Runs one flow: steps in order, each a full brokered call; on a failed step, rollback, snapshot
 * restore and `on_failure` (seed 000_13a5a3abd08ace07.txt; issue 16).
 *
 * A step fails on any outcome but `ok`: a refusal (`denied`, `approval_required`, `timeout`, …)
 * and a handler's own reported failure (`tool_error`) alike. That is the flow route of seed 000's
 * two routes: a direct `tools/call` keeps a `tool_error` body as its result, but inside a flow the
 * same answer fails the step, so the rest of the plan never runs as though the change had landed.
 *
 * Harvest: after each step, its inverses are kept in the order the steps ran: the step's
 * declared `inverse` when it succeeded (it overrides the result's descriptor), else the rollback
 * descriptors its result carries (`_meta["mcp-broker/rollback"]`, rollback.ts), from a failed
 * step as well (its partial write, marked `fromFailedStep`). A nested flow's result carries the
 * inverses it left unapplied as its own descriptors, so the parent harvests them like any step's.
 *
 * On failure, with `rollback_on_failure`: every harvested inverse runs, newest first (so the
 * failing step's own, harvested last, runs first), each a brokered call; one that does not end
 * `ok` is reported `applied: false` and the rest still run. Without it nothing is replayed: each
 * inverse is returned in `unapplied` and written into `error` as a call the caller can run
 * ({@link unappliedRollbackCall}), in the order to run them. Then the estate snapshot is restored
 * (`snapshot: "estate"`), then `on_failure` runs. Rollback, restore and `on_failure` run even when
 * the flow's own call was cancelled or timed out (their calls do not follow the flow's signal;
 * each has its own deadline, and a broker shutdown still ends them).
 */
import type { CallToolResult } from '@modelcontextprotocol/server';
import type { FlowRef, Outcome } from '../broker/index.js';
import { messageOf } from '../shared/errors.js';
import { FlowReferenceError, resolveReferences, resultValue } from './references.js';
import { rollbackDescriptors, unappliedRollbackCall, type HarvestedInverse, ROLLBACK_META_KEY } from './rollback.js';
import type { FlowAnswer, FlowArgs } from './schema.js';
import { takeSnapshot, type EstateSnapshot } from './snapshot.js';

/** One brokered call a flow makes. */
export interface FlowCall {
  readonly name: string;
  readonly args: Record<string, unknown>;
  /** Recorded as the call's `flow`. */
  readonly flow: FlowRef;
  readonly signal: AbortSignal;
}

/** What the broker answered for it (a subset of `BrokerAnswer`). */
export interface FlowCallAnswer {
  readonly callId: string;
  readonly outcome: Outcome;
  readonly reason?: string;
  readonly result: CallToolResult;
}

export interface FlowDeps {
  /** Runs one call through the broker path as the flow's caller; never rejects. */
  call(call: FlowCall): Promise<FlowCallAnswer>;
  /** The advertised name of the flow tool itself: a step to it is a nested flow. */
  readonly flowTool: string;
  /** The estate root (`estate.root`), for `snapshot: "estate"`. */
  readonly estateRoot: string;
  /** Told before each step (progress toward the client). */
  onStep?(index: number, total: number, id: string): void;
}

/** A flow's answer, and the inverses it leaves for a parent flow (its result's rollback descriptors). */
export interface FlowRun {
  readonly answer: FlowAnswer;
  /**
   * In the order they landed: every harvested inverse of a flow that succeeded, the unapplied
   * ones of a flow that failed without rollback, none after a rollback.
   */
  readonly bubbled: readonly HarvestedInverse[];
}

/** Runs `flow` as call `flowId`; `signal` is the flow call's own (deadline, client cancel). Never rejects. */
export async function runFlow(flow: FlowArgs, flowId: string, signal: AbortSignal, deps: FlowDeps): Promise<FlowRun> {
  const answer: FlowAnswer = { success: true, flowId, steps: [], rolledBack: [], unapplied: [] };
  let snapshot: EstateSnapshot | undefined;
  if (flow.snapshot === 'estate') {
    try {
      snapshot = await takeSnapshot(deps.estateRoot);
    } catch (err) {
      answer.success = false;
      answer.error = `the estate snapshot could not be taken (${messageOf(err)}); no step ran`;
      return { answer, bubbled: [] };
    }
  }
  const results = new Map<string, unknown>();
  const harvest: HarvestedInverse[] = [];
  let failure: string | undefined;
  for (const [index, step] of flow.steps.entries()) {
    deps.onStep?.(index, flow.steps.length, step.id);
    let args: Record<string, unknown>;
    try {
      // A nested flow resolves its own references, against its own steps.
      args = step.tool === deps.flowTool ? step.args : (resolveReferences(step.args, results) as Record<string, unknown>);
    } catch (err) {
      if (!(err instanceof FlowReferenceError)) throw err;
      answer.steps.push({ id: step.id, tool: step.tool, outcome: 'invalid_arguments', reason: `${err.message}; the step was not sent`, data: null });
      failure = `step "${step.id}" (${step.tool}) was not sent: ${err.message}`;
      answer.failedStep = step.id;
      break;
    }
    const got = await deps.call({ name: step.tool, args, flow: { id: flowId, step: step.id }, signal });
    answer.steps.push({ id: step.id, tool: step.tool, callId: got.callId, outcome: got.outcome, ...(got.reason ? { reason: got.reason } : {}), data: got.result });
    const ok = got.outcome === 'ok';
    if (ok) results.set(step.id, resultValue(got.result));
    if (ok && step.inverse) {
      try {
        const inverseArgs = resolveReferences(step.inverse.args, results) as Record<string, unknown>;
        harvest.push({ step: step.id, tool: step.inverse.tool, args: inverseArgs });
      } catch (err) {
        // The step landed but its inverse cannot be written out: keep it as declared, say so.
        harvest.push({ step: step.id, tool: step.inverse.tool, args: step.inverse.args });
        answer.steps.at(-1)!.reason = `its inverse's references could not be read (${messageOf(err)}); kept as written`;
      }
    } else if (got.outcome === 'ok' || got.outcome === 'tool_error') {
      for (const d of rollbackDescriptors(got.result)) {
        const stepId = step.tool === deps.flowTool && (d as { step?: string }).step ? `${step.id}/${(d as { step?: string }).step}` : step.id;
        harvest.push({ step: stepId, tool: d.tool, args: d.args, ...(ok ? {} : { fromFailedStep: true as const }) });
      }
    }
    if (!ok) {
      answer.failedStep = step.id;
      failure = `step "${step.id}" (${step.tool}) ended ${got.outcome}${got.reason ? `: ${got.reason}` : ''}`;
      break;
    }
  }

  if (failure === undefined) {
    await snapshot?.discard();
    // Nothing was undone: a parent flow may still need every inverse.
    return { answer, bubbled: harvest };
  }

  answer.success = false;
  // Compensation does not follow the flow's own signal: a cancelled flow still undoes what landed.
  const own = new AbortController().signal;
  const parts = [`flow failed: ${failure}`];
  if (flow.rollback_on_failure) {
    for (const inv of [...harvest].reverse()) {
      const got = await deps.call({ name: inv.tool, args: inv.args, flow: { id: flowId, step: inv.step, phase: 'rollback' }, signal: own });
      const applied = got.outcome === 'ok';
      answer.rolledBack.push({ ...inv, callId: got.callId, outcome: got.outcome, applied, ...(got.reason ? { reason: got.reason } : {}), data: got.result });
    }
    const failed = answer.rolledBack.filter((r) => !r.applied);
    if (!harvest.length) parts.push('rollback: nothing to undo');
    else if (!failed.length) parts.push(`rolled back ${harvest.length} inverse(s), newest first`);
    else {
      parts.push(
        `rollback INCOMPLETE: ${failed.length} of ${harvest.length} inverse(s) failed: ` +
          failed.map((f) => `${unappliedRollbackCall(f)} (step "${f.step}", ${f.outcome}${f.reason ? `: ${f.reason}` : ''})`).join('; '),
      );
    }
  } else if (harvest.length) {
    answer.unapplied = [...harvest].reverse().map((h) => ({ ...h, call: unappliedRollbackCall(h) }));
    parts.push(
      `not rolled back (rollback_on_failure is off); to undo what landed, run in this order: ` +
        answer.unapplied.map((u, i) => `${i + 1}. ${u.call}`).join(' '),
    );
  }
  if (snapshot) {
    try {
      await snapshot.restore();
      answer.snapshot = { kind: snapshot.kind, restored: true };
      parts.push(`estate restored from its ${snapshot.kind} snapshot`);
    } catch (err) {
      answer.snapshot = { kind: snapshot.kind, restored: false, error: messageOf(err) };
      parts.push(`the estate snapshot could NOT be restored (${messageOf(err)})`);
    } finally {
      await snapshot.discard();
    }
  }
  if (flow.on_failure) {
    let args: Record<string, unknown> = flow.on_failure.args;
    try {
      args = resolveReferences(args, results) as Record<string, unknown>;
    } catch {
      // Sent as written; the tool sees the unresolved text.
    }
    const got = await deps.call({ name: flow.on_failure.tool, args, flow: { id: flowId, step: 'on_failure', phase: 'on_failure' }, signal: own });
    answer.onFailure = { tool: flow.on_failure.tool, callId: got.callId, outcome: got.outcome, ...(got.reason ? { reason: got.reason } : {}), data: got.result };
    parts.push(`on_failure ${flow.on_failure.tool} ended ${got.outcome}`);
  }
  answer.error = parts.join('; ');
  return { answer, bubbled: flow.rollback_on_failure ? [] : harvest };
}

/** `bubbled` as a result's `_meta[ROLLBACK_META_KEY]` (each descriptor names its step); undefined when there is none. */
export function bubbledMeta(bubbled: readonly HarvestedInverse[]): Record<string, unknown> | undefined {
  if (!bubbled.length) return undefined;
  return { [ROLLBACK_META_KEY]: bubbled.map(({ step, tool, args }) => ({ tool, args, step })) };
}
