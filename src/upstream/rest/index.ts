export { RestUpstream, MAX_REDIRECTS, ATTEMPT_TIMEOUT_HEADROOM_MS, type RestUpstreamOptions } from './rest-upstream.js';
export {
  definitionFromConfig,
  definitionProblems,
  restServerProblems,
  toMcpTool,
  FORBIDDEN_ARG_HEADERS,
  type RestArg,
  type RestToolDefinition,
  type HttpMethod,
} from '../../config/rest-definition.js';
export { importOpenApi, type ImportedApi, type ImportOptions } from './openapi.js';
export { buildRequest, partitionArgs, pinBase, withinBase, type PinnedBase, type RestRequest } from './request.js';
export { retryAfterMs, secretMask } from './response.js';
