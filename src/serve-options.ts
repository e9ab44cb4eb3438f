/**
 * The options of `mcp-broker serve`, declared once. The CLI builds its commander options from
 * {@link SERVE_OPTIONS} (`cli-main.ts`); the early start of the stdio upstreams reads a command line
 * with the same table through `node:util` `parseArgs` ({@link serveConfigPath}), before
 * commander loads. Imports nothing heavy (cold start, issue 6).
 */
import { parseArgs } from 'node:util';
import { LOG_LEVELS } from './shared/log-levels.js';

/** One `serve` option: its commander flags and what values it takes. */
export interface ServeOption {
  /** Commander flags: `-c, --config <file>` (takes a value), `--no-watch` (a switch). */
  readonly flags: string;
  readonly description: string;
  readonly default?: string | number;
  /** The only values accepted. */
  readonly choices?: readonly string[];
  /** An environment variable read when the option is not given. */
  readonly env?: string;
  /** Turns the value into the option's value; throws an `Error` saying what is wrong. */
  readonly parse?: (value: string) => number;
}

/** A port, 0 to 65535 (0: any free port). Throws `must be an integer from 0 to 65535`. */
export function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error('must be an integer from 0 to 65535');
  return port;
}

/** The `serve` options, in help order. */
export const SERVE_OPTIONS = {
  config: { flags: '-c, --config <file>', description: 'servers.json to serve', default: 'servers.json' },
  transport: { flags: '-t, --transport <kind>', description: 'downstream transport', choices: ['stdio', 'http'], default: 'stdio' },
  host: { flags: '--host <host>', description: 'address to bind (http)', default: '127.0.0.1' },
  port: { flags: '-p, --port <port>', description: 'port to listen on (http)', parse: parsePort, default: 8080 },
  logLevel: { flags: '--log-level <level>', description: 'log level (stderr)', choices: LOG_LEVELS, env: 'MCP_BROKER_LOG_LEVEL', default: 'info' },
  watch: { flags: '--no-watch', description: 'do not reload when the config file changes (SIGHUP still reloads)' },
} as const satisfies Record<string, ServeOption>;

/** A flag string's parts: `-c, --config <file>` → `{ long: 'config', short: 'c', takesValue: true }`. */
function flagParts(flags: string): { long: string; short?: string; takesValue: boolean } {
  const m = /^(?:-(\w), )?--([\w-]+)( <\w+>)?$/.exec(flags);
  if (!m) throw new Error(`serve option flags not understood: ${flags}`);
  return { long: m[2]!, short: m[1], takesValue: m[3] !== undefined };
}

/**
 * The config file `argv` (the arguments after `node` and the script) asks `serve` to use, or
 * undefined when it is not plainly a `serve` command line of {@link SERVE_OPTIONS} with values
 * they accept: another command, `--help`, `--version`, an unknown option, a stray argument,
 * `--`, a value missing or refused (`--port 70000`, `--transport bogus`) all give undefined.
 * The value is as given (`--config=` gives `''`); default `servers.json`.
 *
 * @param env where an option's variable is read (`MCP_BROKER_LOG_LEVEL`), checked as its flag's value would be
 */
export function serveConfigPath(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): string | undefined {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {};
  const byName = new Map<string, ServeOption>();
  for (const option of Object.values(SERVE_OPTIONS) as ServeOption[]) {
    const { long, short, takesValue } = flagParts(option.flags);
    options[long] = short ? { type: takesValue ? 'string' : 'boolean', short } : { type: takesValue ? 'string' : 'boolean' };
    byName.set(long, option);
  }
  let parsed: ReturnType<typeof parseArgs<{ args: string[]; options: typeof options; strict: true; allowPositionals: true; tokens: true }>>;
  try {
    parsed = parseArgs({ args: [...argv], options, strict: true, allowPositionals: true, tokens: true });
  } catch {
    return undefined;
  }
  // `serve` may come first, nothing else positional; `--` is not a plain command line.
  const stray = parsed.tokens.filter((t, i) => t.kind === 'option-terminator' || (t.kind === 'positional' && !(i === 0 && t.value === 'serve')));
  if (stray.length > 0) return undefined;
  const values = parsed.values as Record<string, string | boolean | undefined>;
  for (const [long, option] of byName) {
    const given = values[long] ?? (option.env ? env[option.env] : undefined);
    if (typeof given !== 'string') continue;
    if (option.choices && !option.choices.includes(given)) return undefined;
    if (option.parse) {
      try {
        option.parse(given);
      } catch {
        return undefined;
      }
    }
  }
  return (values.config as string | undefined) ?? SERVE_OPTIONS.config.default;
}
