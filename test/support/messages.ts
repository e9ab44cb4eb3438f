/**
 * Reading JSON-RPC messages in tests without casting past the type checker: each helper checks
 * at run time what it claims, so a test that reads the wrong kind of message fails there.
 */
import type { JSONRPCMessage } from '@modelcontextprotocol/server';

/**
 * The `result` of a JSON-RPC result response, typed as the test expects it (default: a record).
 * Throws when `message` is missing or is not a result response (a request, an error).
 */
export function resultOf<T = Record<string, unknown>>(message: JSONRPCMessage | undefined): T {
  if (!message || !('result' in message) || typeof message.result !== 'object' || message.result === null) {
    throw new Error(`not a result response: ${JSON.stringify(message)?.slice(0, 200)}`);
  }
  return message.result as T;
}
