/**
 * The era labels of traces and metrics (issue 20), apart from observability/tracing.ts so that
 * reading them loads no OpenTelemetry module.
 */

/** `_meta` key a 2026-07-28 request names its protocol version with (PROTOCOL-2026.md). */
export const PROTOCOL_VERSION_META_KEY = 'io.modelcontextprotocol/protocolVersion';
/** The era of a request without that key: the `initialize` era. */
export const LEGACY_ERA = '2025-11-25';
/** The era of a sessionless (2026-07-28) request. */
export const MODERN_ERA = '2026-07-28';
