/**
 * The era decision, in one place (DESIGN.md "Two protocol eras"; the spec's
 * `basic/versioning.mdx`): a request carrying `_meta["io.modelcontextprotocol/protocolVersion"]`
 * (the 2026-07-28 per-request envelope claim) is modern; one without it is legacy (2025-11-25 and
 * older: `initialize`, sessions). The SDK entries own the decision on the wire (`serveStdio` per
 * connection, `isLegacyRequest` per HTTP request); these helpers make the same reading for the
 * broker's own needs.
 *
 * - stdio: the first request with a claim dials the upstreams with its envelope's
 *   `clientCapabilities` ({@link envelopeCapabilities}), as `initialize` does for a legacy client.
 * - HTTP: {@link isModernPost} routes `POST /mcp` (a request with `Mcp-Session-Id` is always
 *   legacy; a modern one has no session; a malformed claim is modern, so the modern path answers
 *   it with -32602 / -32020 / -32022); {@link isModernSessionOperation} picks out the `GET` and
 *   `DELETE` of a modern client (405).
 */
import { CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY, UnsupportedProtocolVersionError, classifyInboundRequest } from '@modelcontextprotocol/server';
import type { ClientCapabilities, JSONRPCMessage } from '@modelcontextprotocol/server';

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The `_meta` envelope claim of a message's params (`protocolVersion` present), or undefined. */
function claimOf(message: unknown): Record<string, unknown> | undefined {
  if (!isObject(message) || !isObject(message.params)) return undefined;
  const meta = message.params._meta;
  return isObject(meta) && PROTOCOL_VERSION_META_KEY in meta ? meta : undefined;
}

/** Whether a JSON-RPC message carries the 2026-07-28 envelope claim. */
export function hasModernClaim(message: unknown): boolean {
  return claimOf(message) !== undefined;
}

/**
 * The client capabilities a modern request declares (`_meta["io.modelcontextprotocol/clientCapabilities"]`),
 * or undefined when it is not a request with the envelope claim or declares none that is an object.
 */
export function envelopeCapabilities(message: unknown): ClientCapabilities | undefined {
  const claim = claimOf(message);
  if (!claim || (message as { id?: unknown }).id === undefined) return undefined;
  const caps = claim[CLIENT_CAPABILITIES_META_KEY];
  return isObject(caps) ? (caps as ClientCapabilities) : undefined;
}

/** Whether an `MCP-Protocol-Version` header names a modern revision (2026-07-28 or later). */
export function isModernVersionHeader(value: string | string[] | undefined): boolean {
  return typeof value === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(value) && value >= MODERN_REVISION;
}

/** The first modern revision. */
export const MODERN_REVISION = '2026-07-28';

/** The modern revisions served: what a -32022 answer lists as `supported` (the SDK's entries list the same). */
export const MODERN_REVISIONS: readonly string[] = [MODERN_REVISION];

/**
 * The answer to a request whose envelope claim names a revision not served as modern: -32022
 * `Unsupported protocol version` with `data: {supported, requested}` (the SDK's
 * `UnsupportedProtocolVersionError`, as its entries answer). Undefined for a notification or a
 * response, a message without the claim, a claim that is not a string (the envelope check answers
 * that, -32602), or a served revision. The spec (`basic/versioning.mdx`) has the server accept or
 * refuse each request on its own; over stdio the SDK's `serveStdio` checks the requests that open
 * the connection, until one picks the era, and none after, so the stdio face asks this of every
 * request after the first (`transports/stdio.ts`). It asks before the envelope is checked: a
 * request naming a revision not served and missing a field is -32022 there, -32602 as the first.
 */
export function unsupportedRevisionAnswer(message: unknown): JSONRPCMessage | undefined {
  const claim = claimOf(message);
  const { id, method } = message as { id?: unknown; method?: unknown };
  if (!claim || typeof method !== 'string' || (typeof id !== 'string' && typeof id !== 'number')) return undefined;
  const requested = claim[PROTOCOL_VERSION_META_KEY];
  if (typeof requested !== 'string' || MODERN_REVISIONS.includes(requested)) return undefined;
  const refusal = new UnsupportedProtocolVersionError({ supported: [...MODERN_REVISIONS], requested });
  return { jsonrpc: '2.0', id, error: { code: refusal.code, message: refusal.message, data: refusal.data } } as JSONRPCMessage;
}

/** A header as the web `Headers` the SDK reads would give it: repeated values joined with `, `. */
function headerOf(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' ? value : Array.isArray(value) ? value.join(', ') : undefined;
}

/**
 * Whether a `POST /mcp` goes to the modern handler. `headers` as Node gives them (lower-case
 * names); `body` the parsed JSON body. A request with `Mcp-Session-Id` is legacy; otherwise the
 * SDK's classification decides (`classifyInboundRequest`, the step its `isLegacyRequest` runs on a
 * parsed body: the body's claim, and an `MCP-Protocol-Version` header naming a modern revision
 * without one), given the three headers it reads, without building a web `Request`.
 */
export async function isModernPost(headers: Record<string, string | string[] | undefined>, body: unknown): Promise<boolean> {
  if (typeof headers['mcp-session-id'] === 'string' && headers['mcp-session-id'] !== '') return false;
  // The common legacy case without classifying.
  if (!Array.isArray(body) && !hasModernClaim(body) && !isModernVersionHeader(headers['mcp-protocol-version'])) return false;
  if (body === undefined) return false;
  const route = classifyInboundRequest({
    httpMethod: 'POST',
    protocolVersionHeader: headerOf(headers['mcp-protocol-version']),
    mcpMethodHeader: headerOf(headers['mcp-method']),
    mcpNameHeader: headerOf(headers['mcp-name']),
    body,
  });
  return route.kind !== 'legacy';
}

/**
 * Whether a `GET` or `DELETE /mcp` comes from a modern client: no `Mcp-Session-Id`, and an
 * `MCP-Protocol-Version` header naming a modern revision. It is answered 405: the 2026-07-28
 * era has no standalone stream and no session to delete.
 */
export function isModernSessionOperation(headers: Record<string, string | string[] | undefined>): boolean {
  const session = headers['mcp-session-id'];
  return (typeof session !== 'string' || session === '') && isModernVersionHeader(headers['mcp-protocol-version']);
}
