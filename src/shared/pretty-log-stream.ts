/**
 * The log stream for a person at a terminal: pino-pretty's readable lines, written to fd 2, with
 * every string of every log line escaped before it is formatted.
 */
import { pino, type DestinationStream } from 'pino';
import { printable } from './printable.js';

/**
 * A pino destination that writes each log line as pino-pretty formats it (time, level, message,
 * then a field a line; colours when `colorize`) to fd 2, synchronously. Log fields carry text an
 * upstream or a caller chose (a stray stdout line, an error, a refused Host), and pino-pretty
 * writes a field as JSON, which escapes C0 controls only: so every string of the line, field
 * names too, is first escaped with {@link printable} ({@link printableLogLine}). Loads pino-pretty.
 */
export async function prettyLogStream(options: { colorize: boolean }): Promise<DestinationStream> {
  const { prettyFactory } = await import('pino-pretty');
  const format = prettyFactory({ colorize: options.colorize, translateTime: 'SYS:HH:MM:ss.l', ignore: 'name' });
  const out = pino.destination({ dest: 2, sync: true });
  return { write: (line: string) => void out.write(format(printableLogLine(line))) };
}

/**
 * One JSON log line, parsed, with every string in it (keys and values, at any depth) escaped with
 * {@link printable}; a line that is not JSON, as a string escaped whole (pino-pretty passes a
 * string on as it is).
 */
export function printableLogLine(line: string): unknown {
  let log: unknown;
  try {
    log = JSON.parse(line);
  } catch {
    return printable(line.replace(/\n$/, ''));
  }
  return escaped(log);
}

/**
 * `value` with every string escaped with {@link printable}; objects rebuilt as own data properties
 * (a `__proto__` key stays a key). A `stack` string keeps its line breaks, each line escaped on
 * its own: pino-pretty shows an error's stack a frame a line, every line indented (a line cannot
 * pass for a log line of its own), and a field of another kind as JSON, which escapes `\n`.
 */
function escaped(value: unknown, key?: string): unknown {
  if (typeof value === 'string') return key === 'stack' ? value.split('\n').map(printable).join('\n') : printable(value);
  if (Array.isArray(value)) return value.map((v) => escaped(v));
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [printable(k), escaped(v, k)]));
  return value;
}
