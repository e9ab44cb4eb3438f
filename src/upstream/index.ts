export { McpUpstream, type McpUpstreamOptions } from './connection.js';
export { ChildProcessTransport, type ChildTransportOptions } from './child-transport.js';
export { Registry, type ResolvedTool, type ToolState, type ListKind, type RegistryEntry } from './registry.js';
export { UpstreamLogLevel, SET_LEVEL_TIMEOUT_MS } from './log-level.js';
export { ResourceRouter, type MayHave, type ResourceRouterDeps } from './resources.js';
export { Roster, toolHash, type RosterTool, type RosterPrompt, type NameCollision, type RosterSource, type RosterTemplate, type ResourceClash } from './roster.js';
export { UriTemplate, MAX_MATCHED_URI_LENGTH, type UriValue, type UriVariables } from './uri-template.js';
export { advertisedName, advertisedNames, NAME_PATTERN, MAX_NAME_LENGTH, NAME_DELIMITER } from './naming.js';
export { childEnv, DEFAULT_INHERITED_ENV } from './spawn-env.js';
export { EraMemory, upstreamDefinitionHash, type EraVerdictStore, type ProtocolEraName } from './era-memory.js';
export { offeredCapabilities, MAX_INPUT_ROUNDS } from './modern-call.js';
export { acceptTaskResults, declaresTasksExtension, pollDelayMs, upstreamTaskOf, UPSTREAM_TASKS_EXTENSION_ID, UPSTREAM_TASK_KEY, UPSTREAM_POLL_MIN_MS, UPSTREAM_POLL_MAX_MS, UPSTREAM_POLL_DEFAULT_MS, type UpstreamTask } from './upstream-task.js';
export { scanMcpHeaders, mcpParamHeaders, type McpHeaderDeclaration, type McpHeaderScan } from './mcp-param-headers.js';
export type * from './types.js';
export {
  UrlElicitations,
  supportsUrlElicitation,
  supportsFormElicitation,
  elicitationIdsOf,
  MAX_PENDING_URL_ELICITATIONS,
  URL_ELICITATION_TTL_MS,
  type SessionNotify,
  type ElicitationCompleteNotification,
} from './url-elicitations.js';
