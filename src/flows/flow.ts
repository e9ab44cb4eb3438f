/**
 * Runs one flow: steps in order, each a full brokered call; on a failed step, rollback, snapshot
 * restore and `on_failure` (seed 000_13a5a3abd08ace07.txt; issue 16).
 *
 * A step fails on any outcome but `ok`: a refusal (`denied`, `approval_required`, `timeout`, …)
 * and a handler's own reported failure (`tool_error`) alike. That is the flow route of seed 000's
 * two routes: a direct `tools/call` keeps a `tool_error` body as its result, but inside a flow the
 * same answer fails the step, so the rest of the plan never runs as though the change had landed.
 *
 * Harvest: after each step, its inverses are kept in the order the steps ran ({@link inversesOf}):
 * the step's declared `inverse` when it succeeded (it overrides the result's descriptor), else the
 * rollback descriptors its result carries (`_meta["mcp-broker/rollback"]`, rollback.ts), from a
 * failed step as well (its partial write, marked `fromFailedStep`), and from a step whose call
 * reached the upstream and may have landed (`withheld`, `timeout`, …). A nested flow's result
 * carries the inverses it left unapplied as its own descriptors, so the parent harvests them like
 * any step's.
 *
 * A reference that cannot be read (references.ts) never goes out as literal text: the call (a
 * step, an inverse, `on_failure`) is made with `invalidArguments`, so the broker judges and
 * records it and refuses it `invalid_arguments` with nothing sent.
 *
 * On failure, with `rollback_on_failure`: every harvested inverse runs, newest first (so the
 * failing step's own, harvested last, runs first), each a brokered call (charged to the unit's
 * budget, never refused by it: broker/budget.ts); one that does not end
 * `ok` is reported `applied: false` (and listed in `unapplied`) and the rest still run. Without it nothing is replayed: each
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
import { descriptorsOf, rollbackDescriptors, unappliedRollbackCall, type HarvestedInverse, ROLLBACK_META_KEY } from './rollback.js';
import type { FlowAnswer, FlowArgs, FlowStep } from './schema.js';
import { takeSnapshot, type EstateSnapshot, type OwnFiles } from './snapshot.js';

/** One brokered call a flow makes. */
export interface FlowCall {
  readonly name: string;
  readonly args: Record<string, unknown>;
  /** Recorded as the call's `flow`. */
  readonly flow: FlowRef;
  readonly signal: AbortSignal;
  /** Set when its arguments hold a reference that cannot be read: the broker refuses it `invalid_arguments`, nothing sent. */
  readonly invalidArguments?: string;
}

/** What the broker answered for it (a subset of `BrokerAnswer`). */
export interface FlowCallAnswer {
  readonly callId: string;
  readonly outcome: Outcome;
  readonly reason?: string;
  readonly result: CallToolResult;
  /** Upstream invocations sent (0: nothing can have landed). */
  readonly attempts?: number;
  /** A withheld result's rollback descriptor(s) (`BrokerAnswer.rollback`). */
  readonly rollback?: unknown;
}

export interface FlowDeps {
  /** Runs one call through the broker path as the flow's caller; never rejects. */
  call(call: FlowCall): Promise<FlowCallAnswer>;
  /** The advertised name of the flow tool itself: a step to it is a nested flow. */
  readonly flowTool: string;
  /** The estate root (`estate.root`), for `snapshot: "estate"`. */
  readonly estateRoot: string;
  /** The broker's own files by identity, which a snapshot never saves or puts back ({@link OwnFiles}). */
  readonly estateOwnFiles: OwnFiles;
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
      snapshot = await takeSnapshot(deps.estateRoot, deps.estateOwnFiles);
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
    // A nested flow resolves its own references, against its own steps.
    const { value: args, unreadable } = step.tool === deps.flowTool ? { value: step.args, unreadable: undefined } : resolveOrSay(step.args, results);
    const got = await deps.call({ name: step.tool, args, flow: { id: flowId, step: step.id }, signal, ...(unreadable ? { invalidArguments: unreadable } : {}) });
    answer.steps.push({ id: step.id, tool: step.tool, callId: got.callId, outcome: got.outcome, ...(got.reason ? { reason: got.reason } : {}), data: got.result });
    const ok = got.outcome === 'ok';
    if (ok) results.set(step.id, resultValue(got.result));
    harvest.push(...inversesOf(step, got, results, deps.flowTool));
    if (!ok) {
      answer.failedStep = step.id;
      const childCause = step.tool === deps.flowTool ? (got.result.structuredContent as { cause?: unknown } | undefined)?.cause : undefined;
      const why = typeof childCause === 'string' ? childCause : got.reason;
      failure = `step "${step.id}" (${step.tool}) ended ${got.outcome}${why ? `: ${why}` : ''}`;
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
  // `cause` leaves out the calls to run (a parent flow harvests those itself).
  const causeParts = [...parts];
  if (flow.rollback_on_failure) {
    for (const inv of [...harvest].reverse()) {
      const got = await deps.call({
        name: inv.tool,
        args: inv.args,
        flow: { id: flowId, step: inv.step, phase: 'rollback' },
        signal: own,
        ...(inv.unreadable ? { invalidArguments: inv.unreadable } : {}),
      });
      const applied = got.outcome === 'ok';
      answer.rolledBack.push({ ...inv, callId: got.callId, outcome: got.outcome, applied, ...(got.reason ? { reason: got.reason } : {}), data: got.result });
    }
    const failed = answer.rolledBack.filter((r) => !r.applied);
    // What stayed: each failed inverse, as a call to run (in the order they were tried).
    answer.unapplied = failed.map(({ step, tool, args, fromFailedStep, unreadable }) => {
      const inv = { step, tool, args, ...(fromFailedStep ? { fromFailedStep } : {}), ...(unreadable ? { unreadable } : {}) };
      return { ...inv, call: unappliedRollbackCall(inv) };
    });
    let line: string;
    if (!harvest.length) line = 'rollback: nothing to undo';
    else if (!failed.length) line = `rolled back ${harvest.length} inverse(s), newest first`;
    else {
      line =
        `rollback INCOMPLETE: ${failed.length} of ${harvest.length} inverse(s) failed: ` +
        failed.map((f) => `${unappliedRollbackCall(f)} (step "${f.step}", ${f.outcome}${f.reason ? `: ${f.reason}` : ''})`).join('; ');
    }
    parts.push(line);
    causeParts.push(line);
  } else if (harvest.length) {
    answer.unapplied = [...harvest].reverse().map((h) => ({ ...h, call: unappliedRollbackCall(h) }));
    parts.push(
      `not rolled back (rollback_on_failure is off); to undo what landed, run in this order: ` +
        answer.unapplied.map((u, i) => `${i + 1}. ${u.call}${u.unreadable ? ` (its arguments as written: ${u.unreadable})` : ''}`).join(' '),
    );
  }
  const both = (line: string) => {
    parts.push(line);
    causeParts.push(line);
  };
  if (snapshot) {
    try {
      await snapshot.restore();
      answer.snapshot = { kind: snapshot.kind, restored: true };
      both(`estate restored from its ${snapshot.kind} snapshot`);
    } catch (err) {
      answer.snapshot = { kind: snapshot.kind, restored: false, error: messageOf(err) };
      both(`the estate snapshot could NOT be restored (${messageOf(err)})`);
    } finally {
      await snapshot.discard();
    }
  }
  if (flow.on_failure) {
    // An unreadable reference: refused `invalid_arguments` by the broker (recorded), nothing sent.
    const { value: args, unreadable } = resolveOrSay(flow.on_failure.args, results);
    const got = await deps.call({
      name: flow.on_failure.tool,
      args,
      flow: { id: flowId, step: 'on_failure', phase: 'on_failure' },
      signal: own,
      ...(unreadable ? { invalidArguments: unreadable } : {}),
    });
    answer.onFailure = { tool: flow.on_failure.tool, callId: got.callId, outcome: got.outcome, ...(got.reason ? { reason: got.reason } : {}), data: got.result };
    both(`on_failure ${flow.on_failure.tool} ended ${got.outcome}${got.outcome !== 'ok' && got.reason ? `: ${got.reason}` : ''}`);
  }
  answer.error = parts.join('; ');
  answer.cause = causeParts.join('; ');
  return { answer, bubbled: flow.rollback_on_failure ? [] : harvest };
}

/** `value` with its references resolved, or as written with why it cannot be (one line, for `invalidArguments`). */
function resolveOrSay(value: Record<string, unknown>, results: ReadonlyMap<string, unknown>): { value: Record<string, unknown>; unreadable?: string } {
  try {
    return { value: resolveReferences(value, results) as Record<string, unknown> };
  } catch (err) {
    if (!(err instanceof FlowReferenceError)) throw err;
    return { value, unreadable: `hold a reference that cannot be read (${err.message})` };
  }
}

/**
 * The inverses a step leaves, in the order they landed. `ok`: its declared `inverse` (its
 * references resolved; one that cannot be is kept `unreadable`, never sent), else its result's
 * descriptors. `tool_error`: the result's descriptors (the handler's own account of what landed).
 * `withheld` (the result came back and was refused): the descriptors it carried, else the declared
 * `inverse`. Any other outcome after the call was sent (`timeout`, `cancelled`, `upstream_error`,
 * `guard_error` with an attempt): the declared `inverse`, as the write may have landed. A refusal
 * before anything was sent leaves none. Each from a step that did not end `ok` is `fromFailedStep`.
 */
function inversesOf(step: FlowStep, got: FlowCallAnswer, results: ReadonlyMap<string, unknown>, flowTool: string): HarvestedInverse[] {
  const ok = got.outcome === 'ok';
  const failed = ok ? {} : { fromFailedStep: true as const };
  const declared = (): HarvestedInverse[] => {
    if (!step.inverse) return [];
    const { value, unreadable } = resolveOrSay(step.inverse.args, results);
    return [{ step: step.id, tool: step.inverse.tool, args: value, ...failed, ...(unreadable ? { unreadable } : {}) }];
  };
  const described = (list: ReturnType<typeof descriptorsOf>): HarvestedInverse[] =>
    list.map((d) => {
      const child = (d as { step?: string }).step;
      const unreadable = (d as { unreadable?: string }).unreadable;
      return { step: step.tool === flowTool && child ? `${step.id}/${child}` : step.id, tool: d.tool, args: d.args, ...failed, ...(unreadable ? { unreadable } : {}) };
    });
  if (ok) return step.inverse ? declared() : described(rollbackDescriptors(got.result));
  if (got.outcome === 'tool_error') return described(rollbackDescriptors(got.result));
  if (got.outcome === 'withheld') {
    const kept = described(descriptorsOf(got.rollback));
    return kept.length ? kept : declared();
  }
  return (got.attempts ?? 0) > 0 ? declared() : [];
}

/** `bubbled` as a result's `_meta[ROLLBACK_META_KEY]` (each descriptor names its step); undefined when there is none. */
export function bubbledMeta(bubbled: readonly HarvestedInverse[]): Record<string, unknown> | undefined {
  if (!bubbled.length) return undefined;
  return { [ROLLBACK_META_KEY]: bubbled.map(({ step, tool, args, unreadable }) => ({ tool, args, step, ...(unreadable ? { unreadable } : {}) })) };
}
