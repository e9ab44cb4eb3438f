/**
 * The log level upstreams are asked for: each downstream session's `logging/setLevel` is kept,
 * and upstreams (shared by every session) are sent the most verbose level any live session asked
 * for, so one session's `error` never silences what another asked to see; each session still
 * filters what it receives. Sent to ready upstreams that declare `logging`, with a 5000 ms
 * deadline; a failure is ignored.
 */
import type { LoggingLevel } from '@modelcontextprotocol/server';
import { LoggingLevelSchema } from '@modelcontextprotocol/core';
import type { Registry } from './registry.js';

/** MCP log levels, most verbose first. */
const LOG_SEVERITY = LoggingLevelSchema.options;

/** Deadline of an upstream `logging/setLevel`, in ms. */
export const SET_LEVEL_TIMEOUT_MS = 5000;

export class UpstreamLogLevel {
  private readonly bySession = new Map<string, LoggingLevel>();
  private sent: LoggingLevel | undefined;

  constructor(private readonly registry: Registry) {}

  /** Records `sessionId`'s level (undefined: the session ended) and sends upstreams the most verbose one wanted, when it changed. */
  set(sessionId: string, level: LoggingLevel | undefined): void {
    if (level) this.bySession.set(sessionId, level);
    else this.bySession.delete(sessionId);
    const wanted = [...this.bySession.values()].sort((a, b) => LOG_SEVERITY.indexOf(a) - LOG_SEVERITY.indexOf(b))[0];
    if (!wanted || wanted === this.sent) return;
    this.sent = wanted;
    for (const u of this.registry.upstreams) {
      if (u.status.state === 'ready' && u.capabilities?.logging) {
        void u.request('logging/setLevel', { level: wanted }, { timeoutMs: SET_LEVEL_TIMEOUT_MS }).catch(() => undefined);
      }
    }
  }
}
