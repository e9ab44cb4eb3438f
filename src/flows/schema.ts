/**
 * The arguments and the answer of `broker__flow_run` (seed 000_13a5a3abd08ace07.txt; issue 16).
 */
import { z } from 'zod';
import { OUTCOMES } from '../broker/outcomes.js';

/** Most steps one flow may hold (a nested flow's steps count in its own flow). */
export const MAX_FLOW_STEPS = 100;

const args = z.record(z.string(), z.unknown()).default({}).describe('Arguments of the call; strings may hold ${steps.<id>.result…} references');
const call = z.strictObject({ tool: z.string().min(1).describe('Advertised tool name'), args });

/** One step: a tool call (a nested flow is a step whose `tool` is `broker__flow_run`). */
export const FlowStepSchema = z.strictObject({
  id: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, 'a step id is 1-64 of A-Z a-z 0-9 _ -')
    .describe('Unique within the flow; names the step in references, records and the answer'),
  tool: z.string().min(1).describe('Advertised tool name'),
  args,
  inverse: call.optional().describe("Undoes this step once it succeeded; overrides the result's own rollback descriptor"),
});

export const FlowArgsSchema = z
  .strictObject({
    steps: z.array(FlowStepSchema).min(1).max(MAX_FLOW_STEPS),
    rollback_on_failure: z.boolean().default(false).describe('On a failed step, run the inverses harvested so far, newest first'),
    on_failure: call.optional().describe('One call made after a failed flow (after any rollback)'),
    snapshot: z.literal('estate').optional().describe("Restore the estate root's files when the flow fails"),
  })
  .superRefine((flow, ctx) => {
    const seen = new Set<string>();
    flow.steps.forEach((s, i) => {
      if (seen.has(s.id)) ctx.addIssue({ code: 'custom', path: ['steps', i, 'id'], message: `step id "${s.id}" is used twice` });
      seen.add(s.id);
    });
  });

export type FlowArgs = z.output<typeof FlowArgsSchema>;
export type FlowStep = z.output<typeof FlowStepSchema>;

const outcome = z.enum(OUTCOMES);
const inverse = z.object({
  step: z.string(),
  tool: z.string(),
  args: z.record(z.string(), z.unknown()),
  fromFailedStep: z.literal(true).optional(),
  /** Its arguments hold a reference that cannot be read: never sent (a rollback of it ends `invalid_arguments`). */
  unreadable: z.string().optional(),
});

/** The answer (`structuredContent` of the flow's result, and the same JSON as its second text block). */
export const FlowAnswerSchema = z.object({
  success: z.boolean(),
  /** The flow's call id: every step's record carries it as `flow.id`. */
  flowId: z.string(),
  failedStep: z.string().optional(),
  /** One line: why the flow failed, what was rolled back, and the calls left for the caller to run. */
  error: z.string().optional(),
  /** `error` without the calls left to run (they are in `unapplied`); a parent flow quotes this for a nested flow's step. */
  cause: z.string().optional(),
  steps: z.array(z.object({ id: z.string(), tool: z.string(), callId: z.string().optional(), outcome, reason: z.string().optional(), data: z.unknown() })),
  rolledBack: z.array(inverse.extend({ callId: z.string(), outcome, applied: z.boolean(), reason: z.string().optional(), data: z.unknown() })),
  /** Without rollback: every harvested inverse, in the order to run them. With it: each inverse that failed. */
  unapplied: z.array(inverse.extend({ call: z.string() })),
  onFailure: z.object({ tool: z.string(), callId: z.string().optional(), outcome, reason: z.string().optional(), data: z.unknown() }).optional(),
  snapshot: z.object({ kind: z.enum(['git', 'copy']), restored: z.boolean(), error: z.string().optional() }).optional(),
});

export type FlowAnswer = z.infer<typeof FlowAnswerSchema>;
