export { McpUpstream, type McpUpstreamOptions } from './connection.js';
export { ChildProcessTransport, type ChildTransportOptions } from './child-transport.js';
export { Registry, type ResolvedTool, type ToolState, type ListKind, type RegistryEntry } from './registry.js';
export { ResourceRouter, type ResourceRouterDeps } from './resources.js';
export { Roster, toolHash, type RosterTool, type RosterPrompt, type NameCollision, type RosterSource, type RosterTemplate, type ResourceClash } from './roster.js';
export { UriTemplate, MAX_MATCHED_URI_LENGTH, type UriValue, type UriVariables } from './uri-template.js';
export { advertisedName, NAME_PATTERN, MAX_NAME_LENGTH, NAME_DELIMITER } from './naming.js';
export { childEnv, DEFAULT_INHERITED_ENV } from './spawn-env.js';
export type * from './types.js';
