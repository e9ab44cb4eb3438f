import { pino, type DestinationStream, type Logger } from 'pino';
import type { Scrubber } from './scrub.js';
import { jsonLineEscaped } from './printable.js';

export type { Logger } from 'pino';

export { LOG_LEVELS } from './log-levels.js';

/**
 * The process logger: pino writing to fd 2 (stdout belongs to the protocol), every string of
 * every line passed through the scrubber so no secret reaches a log, and every character that
 * acts on a terminal or hides in a line written as a JSON escape (`jsonLineEscaped`: a caller's
 * tool name or an upstream's error line is shown raw by `tail -f` of a JSON log otherwise).
 * `stream` replaces fd 2 (the CLI passes a pino-pretty stream on a terminal); it receives lines
 * already scrubbed and escaped.
 */
export function createLogger(options: { level?: string; scrubber?: Scrubber; destination?: number; stream?: DestinationStream } = {}): Logger {
  const scrubber = options.scrubber;
  return pino(
    {
      name: 'mcp-broker',
      level: options.level ?? process.env.MCP_BROKER_LOG_LEVEL ?? 'info',
      base: undefined,
      ...(scrubber
        ? {
            formatters: { log: (obj: Record<string, unknown>) => scrubber.value(obj) },
          }
        : {}),
      hooks: {
        // Only keys with a value: pino reads `hooks.logMethod` from whatever `hooks` it is given.
        ...(scrubber && {
          logMethod(args, method) {
            const scrubbed = args.map((a) => (typeof a === 'string' ? scrubber.text(a) : a));
            return method.apply(this, scrubbed as Parameters<typeof method>);
          },
        }),
        streamWrite: jsonLineEscaped,
      },
    },
    options.stream ?? pino.destination({ dest: options.destination ?? 2, sync: false }),
  );
}

/** A logger that drops everything; for tests. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
