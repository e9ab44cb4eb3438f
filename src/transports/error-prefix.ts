/**
 * JSON-RPC error messages as they should travel (issue 17 §11): the SDK's `McpError` puts
 * `MCP error <code>: ` before its message, and the SDK's `Protocol` sends that message as it is,
 * so every error thrown by a handler (ours, or an upstream's relayed) reached the client with
 * the prefix, and the client's own `McpError` added it again (`MCP error -32602: MCP error
 * -32602: Unknown tool`). Every error message a session sends has its leading prefixes for its
 * own code taken off, so a client says it once. Only error responses are looked at.
 */
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';

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
