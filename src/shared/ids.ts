import { randomUUID } from 'node:crypto';

/** A new call id: a UUID, unique per `tools/call`, carried in the record and the result's `_meta`. */
export function newCallId(): string {
  return randomUUID();
}

/** A new session id for a downstream session. */
export function newSessionId(): string {
  return randomUUID();
}

/**
 * The first 8 characters of a session id, for log lines and trace attributes: enough to
 * correlate, not enough to use (a session id is scrubbed from logs as a credential).
 */
export function sessionTag(id: string): string {
  return id.slice(0, 8);
}
