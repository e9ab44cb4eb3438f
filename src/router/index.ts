export { LIVENESS_PING_TIMEOUT_MS } from './ask.js';
export type { CallerSession, FlowRef, RouteNotes, RoutedCall, RoutedRequest, ToolTarget } from './call.js';
export { ToolRouter, DEFAULT_ASK_TIMEOUT_MS, type Dispatcher, type PrimaryHandler, type RouterOutcome, type RouterOptions } from './router.js';
export {
  defineFunctionTool,
  isFunctionTool,
  toCallToolResult,
  ToolDeniedError,
  TOOL_NAME,
  type FunctionTool,
  type FunctionToolSpec,
  type FunctionToolContext,
  type FunctionToolReturn,
} from './function-tool.js';
export { loadFunctionModules, assertNoRosterCollision, type ModuleImporter } from './modules.js';
