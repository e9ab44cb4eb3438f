export { ToolFacts } from './tool-facts.js';
export { Broker, type BrokerAnswer } from './broker.js';
export { compose, type Stage, type Next } from './runner.js';
export { orderStages, type CallPathStages } from './path.js';
export { OUTCOMES, OUTCOME_STATUS, OUTCOME_META_KEY, CALL_ID_META_KEY, carriesResult, isUpstreamFailure, type Outcome } from './outcomes.js';
export { refuse, type BrokerCall, type CallerSession, type CallRecord, type CallRequest, type FlowRef, type ToolTarget, type WireError } from './types.js';
export { deadlineStage, DeadlineExceeded, ShuttingDown, type DeadlineDeps } from './deadline.js';
export { invokeStage, type InvokeDeps } from './invoke.js';
export { MAX_ARGUMENT_DEPTH, argumentsProblem } from './arguments.js';
export { classifyFailure, MAX_REASON_CHARS, URL_ELICITATION_REQUIRED, type AttemptFailure } from './failure.js';
export { recordStage, buildRecord, approximateJsonBytes, type RecordDeps } from './record.js';
export { judgeStage, type JudgeDeps } from './judge.js';
export { handlerFailure, type VerdictOptions } from './handler-failure.js';
export {
  compilePolicy,
  decide,
  decidePrimitive,
  isPrivilegedPrincipal,
  namespaceName,
  type CompiledPolicy,
  type PolicyAction,
  type PolicyFacts,
  type PrimitiveSubject,
  type Verdict,
  type AskGround,
} from './policy.js';
export { PrimitiveGuard, POLICY_REFUSED_CODE, type PrimitiveGuardDeps, type PrimitiveKind, type PrimitiveRequest } from './primitive-judge.js';
export { listAsPinned, pinRoster, type ListAsPinnedDeps } from './pins.js';
export { budgetStage, budgetFromEnv, BudgetLedger, BUDGET_ENV, type BudgetDeps } from './budget.js';
export { breakerStage, Breakers, type BreakerState, type BreakerOptions } from './breaker.js';
export { retryStage, mayRetry, type RetryDeps } from './retry.js';
export { scrubStage, scrubResult, OutputSchemas, type ScrubDeps, type ScrubbedResult } from './scrub.js';
export { evaluateStage, compileDenyPatterns, type EvaluateDeps } from './evaluate.js';
export { publishStage, type PublishDeps } from './publish.js';
