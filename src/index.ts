/**
 * The package's public API (`import { defineFunctionTool } from 'mcp-broker'`): what a user
 * function module (servers.json `functions`, see README "Function tools") needs.
 */
export {
  defineFunctionTool,
  isFunctionTool,
  ToolDeniedError,
  TOOL_NAME,
  type FunctionTool,
  type FunctionToolSpec,
  type FunctionToolContext,
  type FunctionToolReturn,
} from './router/function-tool.js';
