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
