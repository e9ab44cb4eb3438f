/**
 * Rollback descriptors and the "unapplied rollback" call (seed 000_13a5a3abd08ace07.txt,
 * `unappliedRollbackCall`).
 *
 * A tool that changed something may say how to undo it in its result's
 * `_meta["mcp-broker/rollback"]`: one descriptor `{tool, args?}` (`tool` an advertised name,
 * `args` an object, default `{}`), or an array of them in the order their changes landed. A
 * result that reports its own failure (`tool_error`) may carry one too, for the part that did
 * land; it is kept. An entry that is not of that shape is skipped.
 */
import type { CallToolResult } from '@modelcontextprotocol/server';
import { ROLLBACK_META_KEY } from '../broker/outcomes.js';

export { ROLLBACK_META_KEY };

/** One call that undoes (part of) what a step did. */
export interface RollbackDescriptor {
  /** Advertised name of the tool to call. */
  readonly tool: string;
  readonly args: Record<string, unknown>;
}

/** An inverse harvested from a step, in the order the steps ran. */
export interface HarvestedInverse extends RollbackDescriptor {
  /** Id of the step it undoes (for a nested flow's inverse: `<step>/<child step>`). */
  readonly step: string;
  /** Set when it came off the step that failed (its partial write, or a write that may have landed). */
  readonly fromFailedStep?: true;
  /** Why its arguments cannot be written out (a reference that cannot be read): it is never sent, only reported. */
  readonly unreadable?: string;
}

/** The descriptors a result carries in `_meta["mcp-broker/rollback"]`, in the order given; `[]` when none. */
export function rollbackDescriptors(result: CallToolResult | undefined): RollbackDescriptor[] {
  return descriptorsOf((result?._meta as Record<string, unknown> | undefined)?.[ROLLBACK_META_KEY]);
}

/** The descriptors in a `_meta["mcp-broker/rollback"]` value (one or an array); `[]` when none. */
export function descriptorsOf(raw: unknown): RollbackDescriptor[] {
  if (raw === undefined) return [];
  const out: RollbackDescriptor[] = [];
  for (const item of Array.isArray(raw) ? raw : [raw]) {
    const d = asDescriptor(item);
    if (d) out.push(d);
  }
  return out;
}

/** `{tool, args?}` as a descriptor, or undefined when it is not of that shape. */
export function asDescriptor(value: unknown): (RollbackDescriptor & { step?: string; unreadable?: string }) | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const { tool, args, step, unreadable } = value as Record<string, unknown>;
  if (typeof tool !== 'string' || tool === '') return undefined;
  if (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args))) return undefined;
  return { tool, args: (args as Record<string, unknown> | undefined) ?? {}, ...(typeof step === 'string' ? { step } : {}), ...(typeof unreadable === 'string' ? { unreadable } : {}) };
}

/**
 * An inverse written as a call the caller can run: the advertised tool name, a space, and the
 * arguments as one line of JSON (`kv__delete {"key":"a"}`), which is also a `tools/call` `name`
 * and `arguments`. It goes into the error text as well as into a field, because text survives
 * every reader (a summary line, a record's reason, a terminal).
 */
export function unappliedRollbackCall(descriptor: RollbackDescriptor): string {
  let args: string;
  try {
    args = JSON.stringify(descriptor.args) ?? '{}';
  } catch {
    args = '{}';
  }
  return `${descriptor.tool} ${args}`;
}
