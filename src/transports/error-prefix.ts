/**
 * JSON-RPC error messages as they should travel (issue 17 §11): SDK v1's `McpError` puts
 * `MCP error <code>: ` before its message and its `Protocol` sends that message as it is, so a
 * v1 client's own `McpError` added it again (`MCP error -32602: MCP error -32602: Unknown tool`).
 * SDK v2's `ProtocolError` adds no prefix, so our own errors carry none; an upstream on SDK v1
 * (the npm reference servers) still sends one in the message we relay. Every error message a
 * session sends has its leading prefixes for its own code taken off, so a client says it once
 * (a v1 client) or not at all (a v2 client). Only error responses are looked at.
 */
import type { Transport } from '@modelcontextprotocol/server';

/** `message` without leading `MCP error <code>: ` prefixes for `code`. */
export function withoutErrorPrefix(message: string, code: unknown): string {
  if (!message.startsWith('MCP error ') || typeof code !== 'number') return message;
  const prefix = `MCP error ${code}: `;
  let out = message;
  while (out.startsWith(prefix)) out = out.slice(prefix.length);
  return out;
}

/** Wraps `transport.send` so error responses carry their message without the SDK prefix. */
export function unprefixErrors(transport: Transport): void {
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    const error = (message as { error?: { code?: unknown; message?: unknown } }).error;
    if (error && typeof error.message === 'string') {
      const stripped = withoutErrorPrefix(error.message, error.code);
      if (stripped !== error.message) message = { ...message, error: { ...error, message: stripped } } as typeof message;
    }
    return send(message, options);
  };
}
