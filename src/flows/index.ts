/**
 * Flows (seed 000_13a5a3abd08ace07.txt; DESIGN.md "Folders": flows/): several tool calls as one
 * plan through the broker path, with rollback of what landed, served as the built-in tool
 * `broker__flow_run`.
 */
export { flowTool, FLOW_TOOL, type FlowToolDeps } from './flow-tool.js';
export { runFlow, bubbledMeta, type FlowCall, type FlowCallAnswer, type FlowDeps, type FlowRun } from './flow.js';
export { FlowArgsSchema, FlowAnswerSchema, FlowStepSchema, MAX_FLOW_STEPS, type FlowAnswer, type FlowArgs, type FlowStep } from './schema.js';
export { ROLLBACK_META_KEY, rollbackDescriptors, unappliedRollbackCall, asDescriptor, type RollbackDescriptor, type HarvestedInverse } from './rollback.js';
export { resolveReferences, resultValue, FlowReferenceError } from './references.js';
export { takeSnapshot, type EstateSnapshot, type OwnFiles } from './snapshot.js';
