import { randomUUID } from 'node:crypto';

/** A new call id: a UUID, unique per `tools/call`, carried in the record and the result's `_meta`. */
export function newCallId(): string {
  return randomUUID();
}

/** A new session id for a downstream session. */
export function newSessionId(): string {
  return randomUUID();
}
