export {
  A2A_TASK_STATES,
  fromA2ATaskState,
  isA2ATaskState,
  projectA2ATaskState,
  toA2ATaskState,
  type A2ATaskState,
  type A2ATaskStateReversal,
  type A2ATaskStateReversalFaithful,
  type A2ATaskStateReversalLossy,
} from './a2a.js';
export { A2A_META_KEY, TASK_HEARTBEAT_MS, TASK_LIST_LIMIT, TASK_POLL_MS, TASK_STALE_MS } from './constants.js';
export { decideParked, listParked, MAX_REJECTION_REASON_CHARS, rejectionReason, rejectionReasonProblem, type InboxDecision, type InboxPageOptions } from './inbox.js';
export { isTerminal, mcpTaskStatus, TaskCancelled, TaskError, type McpTask, type McpTaskStatus } from './status.js';
export { TaskEngine, type ParkDecision, type TaskEngineDeps, type TaskPageOptions, type TaskTiming } from './engine.js';
export { TaskInputs, type TaskInputRequest } from './inputs.js';
export { scrubbedTaskRow } from './scrubbed-row.js';
