/** The HTTP face's parts (`serveHttp` in ../http.ts composes them). */
export { buildApp, buildRequestListener } from './app.js';
export { answerRequestError, readBody, RequestBodyError } from './body.js';
export { mountAdminApi, requiredNotReady, resolveSubject, API_PREFIX } from './admin.js';
export { LOCAL_PRINCIPAL, PrincipalAuthenticator, type AuthFailure, type Principal } from './auth.js';
export { answerOverCap, capMessage, capRefusal, StreamCaps, type CapRefusal, type CapSetting, type StreamAdmission } from './caps.js';
export { DEFAULT_CALLS_LIMIT, MAX_CALLS_LIMIT, matchesCallsQuery, parseCallsQuery, queryCalls, type CallsQuery } from './calls-query.js';
export { jsonBody, whenClosed, type HttpContext } from './context.js';
export { BoundedEventStore } from './event-store.js';
export {
  acceptsBoth,
  authenticateRequest,
  authGuard,
  checkHostAndOrigin,
  checkServeOptions,
  hostOriginGuard,
  hostnameOf,
  isLoopback,
  jsonRpcError,
  pathOf,
  principalOf,
  refuseHostOrigin,
  sendJson,
  shownHeaderValue,
  SHOWN_HEADER_MAX_CHARS,
  shownPath,
  SHOWN_PATH_MAX_CHARS,
  type OriginPolicy,
} from './guards.js';
export { METRICS_PATH, mountMetrics, mountPublicMetrics } from './metrics-route.js';
export { SlidingWindowLimit } from './rate-limit.js';
export { mountReconnectRoute, RECONNECT_PATH } from './reconnect-route.js';
export { SessionTable, sessionTag, type EndReason, type HttpSession, type SessionLookup } from './session-table.js';
export { mountLegacySse, MESSAGES_PATH, SSE_PATH } from './sse.js';
export { mountStatusApi, mountStatusAssets, statusSnapshot, STATUS_CSP, STATUS_RECENT_CALLS, type StatusSnapshot } from './status-page.js';
export { isMcpPath, MCP_PATH, streamableHttpHandler } from './streamable.js';
export { withTraceHeaders } from './trace-headers.js';
