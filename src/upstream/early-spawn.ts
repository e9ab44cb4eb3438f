/**
 * Cold start (issue 6): `mcp-broker serve` starts its stdio upstreams before the CLI loads its
 * own modules (commander, zod, pino and the config schema: ~70 ms of one core on a 2-core
 * machine), so the upstreams boot on the other core meanwhile. Three upstreams to the first
 * `tools/list`: median 475 → 446 ms in ten alternating runs (bench/README.md).
 *
 * The spawn specs come from the raw `servers.json`, read the way the config loader reads it:
 * `${configDir}` and `${env:NAME}` filled in, the schema's defaults for `args`, `env`,
 * `inheritEnv`, `cwd` and `broker.env.inherit`. It is a guess made before validation, so it
 * starts nothing unless all of this holds: the command line is plainly `serve` with known
 * options and valid values (a typo, `--help`, another command: nothing); the config is a
 * regular file (a pipe can be read once only, and the loader reads it again); it is strict JSON
 * (no comments or trailing commas) of the `mcpServers` shape, without VS Code's `servers`,
 * `inputs` or `envFile`; its only placeholders are `${configDir}` and `${env:NAME}`, each one
 * set; every server key is one the loader accepts; and every stdio server has only the schema's
 * fields, with the types they need. The validated config then settles the
 * children (`prespawnUpstreams` → `settleParked`): one whose spec it starts is kept and adopted
 * by its first dial, any other is ended. A config refused for another reason exits 2 and ends
 * them with the process; a signal before the CLI's own handlers does too (`prespawnChild`).
 *
 * Imports nothing that loads zod: that is the point.
 */
import { readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DEFAULT_INHERITED_ENV, RESERVED_SERVER_NAMES, SERVER_KEY, STDIO_SERVER_FIELDS } from '../config/constants.js';
import { LOG_LEVELS } from '../shared/log-levels.js';
import { prespawnChild, type ChildSpawnSpec } from './child-transport.js';
import { stdioSpawnSpec } from './spawn-env.js';

/** The CLI's default config file (`serve --config`). */
const DEFAULT_CONFIG = 'servers.json';
/** `serve` options that take a value, as the CLI declares them. */
const VALUE_OPTIONS = new Set(['-c', '--config', '-t', '--transport', '--host', '-p', '--port', '--log-level']);

/** Whether a `serve` option's value is one the CLI accepts (`--transport`, `--port`, `--log-level`). */
function validValue(option: string, value: string): boolean {
  if (option === '-t' || option === '--transport') return value === 'stdio' || value === 'http';
  if (option === '-p' || option === '--port') return /^\d+$/.test(value) && Number(value) <= 65535;
  if (option === '--log-level') return (LOG_LEVELS as readonly string[]).includes(value);
  return value !== '';
}

/**
 * The config file `argv` (without `node` and the script) asks `serve` to use, or undefined when
 * it is not plainly a `serve` command line with values the CLI accepts.
 *
 * @param logLevelEnv `MCP_BROKER_LOG_LEVEL`, checked as `--log-level` is when that is not given
 */
export function serveConfigPath(argv: readonly string[], logLevelEnv = process.env.MCP_BROKER_LOG_LEVEL): string | undefined {
  let config = DEFAULT_CONFIG;
  let logLevel = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    let option: string;
    let value: string | undefined;
    if (i === 0 && arg === 'serve') continue;
    if (arg.startsWith('--') && arg.includes('=')) {
      option = arg.slice(0, arg.indexOf('='));
      value = arg.slice(option.length + 1);
    } else {
      option = arg;
      value = argv[++i];
    }
    // --help, --version, another command, a stray argument, a combined or unknown flag: nothing.
    if (!VALUE_OPTIONS.has(option) || value === undefined || !validValue(option, value)) return undefined;
    if (option === '-c' || option === '--config') config = value;
    if (option === '--log-level') logLevel = true;
  }
  if (!logLevel && logLevelEnv !== undefined && !validValue('--log-level', logLevelEnv)) return undefined;
  return config;
}

/**
 * The spawn specs of the enabled stdio upstreams of a raw config (the parsed JSON of
 * `servers.json` in `baseDir`), as the validated config would give them; servers this cannot
 * tell for sure are left out.
 */
export function rawStdioSpecs(raw: unknown, baseDir: string, env: NodeJS.ProcessEnv = process.env, nodePath = process.execPath): ChildSpawnSpec[] {
  if (!isObject(raw) || (raw.mcpServers !== undefined && !isObject(raw.mcpServers))) return [];
  // VS Code's shape, and placeholders other than these two, are the loader's alone.
  if (raw.servers !== undefined || raw.inputs !== undefined || otherPlaceholder(raw)) return [];
  // The loader refuses a file with any unset variable, wherever it is.
  if (unsetVariable(raw, env)) return [];
  const fill = (value: string) =>
    value
      .split('${configDir}')
      .join(baseDir)
      .replace(ENV_REF, (_m, name: string) => env[name]!);
  const strings = (value: unknown): string[] | undefined =>
    Array.isArray(value) && value.every((v) => typeof v === 'string') ? value.map(fill) : undefined;
  const broker = raw.broker === undefined ? {} : raw.broker;
  if (!isObject(broker)) return [];
  const brokerEnv = broker.env === undefined ? {} : broker.env;
  if (!isObject(brokerEnv)) return [];
  const inherit = brokerEnv.inherit === undefined ? [...DEFAULT_INHERITED_ENV] : strings(brokerEnv.inherit);
  if (!inherit) return [];
  const specs: ChildSpawnSpec[] = [];
  for (const [key, server] of Object.entries(raw.mcpServers ?? {})) {
    // A key the loader refuses refuses the whole file: start nothing.
    if (!SERVER_KEY.test(key) || key.includes('__') || (RESERVED_SERVER_NAMES as readonly string[]).includes(key.toLowerCase())) return [];
    if (!isObject(server)) return [];
    if (server.command === undefined) continue; // not stdio: the loader checks it
    const spec = stdioSpec(server, fill, strings, baseDir, inherit, nodePath);
    if (spec === 'invalid') return [];
    if (spec) specs.push(spec);
  }
  return specs;
}

/** One stdio server's spec; undefined when disabled, `invalid` when the schema would refuse it. */
function stdioSpec(
  server: Record<string, unknown>,
  fill: (value: string) => string,
  strings: (value: unknown) => string[] | undefined,
  baseDir: string,
  inherit: readonly string[],
  nodePath: string,
): ChildSpawnSpec | undefined | 'invalid' {
  if (Object.keys(server).some((field) => !STDIO_SERVER_FIELDS.includes(field))) return 'invalid';
  if (server.envFile !== undefined) return 'invalid'; // read by the loader only
  if (typeof server.command !== 'string' || server.command === '') return 'invalid';
  if (server.type !== undefined && server.type !== 'stdio') return 'invalid';
  if (server.disabled !== undefined && typeof server.disabled !== 'boolean') return 'invalid';
  if (server.required !== undefined && typeof server.required !== 'boolean') return 'invalid';
  if (server.verdictFromText !== undefined && typeof server.verdictFromText !== 'boolean') return 'invalid';
  for (const field of ['timeoutMs', 'connectTimeoutMs']) {
    const v = server[field];
    if (v !== undefined && !(Number.isInteger(v) && (v as number) >= 1)) return 'invalid';
  }
  if (server.tools !== undefined && !isObject(server.tools)) return 'invalid';
  if (server.resourcePriority !== undefined && !Number.isInteger(server.resourcePriority)) return 'invalid';
  const prefix = server.prefix;
  if (prefix !== undefined && prefix !== false) {
    if (typeof prefix !== 'string' || !SERVER_KEY.test(prefix) || prefix.includes('__')) return 'invalid';
    if ((RESERVED_SERVER_NAMES as readonly string[]).includes(prefix.toLowerCase())) return 'invalid';
  }
  const args = server.args === undefined ? [] : strings(server.args);
  const inheritEnv = server.inheritEnv === undefined ? [] : strings(server.inheritEnv);
  if (!args || !inheritEnv) return 'invalid';
  if (server.cwd !== undefined && typeof server.cwd !== 'string') return 'invalid';
  const vars: Record<string, string> = {};
  if (server.env !== undefined) {
    if (!isObject(server.env)) return 'invalid';
    for (const [name, value] of Object.entries(server.env)) {
      if (typeof value !== 'string') return 'invalid';
      vars[name] = fill(value);
    }
  }
  if (server.disabled === true) return undefined;
  const cwd = resolve(baseDir, server.cwd === undefined ? '.' : fill(server.cwd));
  return stdioSpawnSpec({ command: fill(server.command), args, inheritEnv, env: vars, cwd }, inherit, nodePath);
}

const ENV_REF = /\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** Whether any string in `value` has a `${` that is not `${configDir}` or `${env:NAME}`. */
function otherPlaceholder(value: unknown): boolean {
  if (typeof value === 'string') return value.split('${configDir}').join('').replace(ENV_REF, '').includes('${');
  if (Array.isArray(value)) return value.some(otherPlaceholder);
  if (isObject(value)) return Object.values(value).some(otherPlaceholder);
  return false;
}

/** Whether any string in `value` names a `${env:}` variable that `env` does not set. */
function unsetVariable(value: unknown, env: NodeJS.ProcessEnv): boolean {
  if (typeof value === 'string') {
    for (const m of value.matchAll(ENV_REF)) if (env[m[1]!] === undefined) return true;
    return false;
  }
  if (Array.isArray(value)) return value.some((v) => unsetVariable(v, env));
  if (isObject(value)) return Object.values(value).some((v) => unsetVariable(v, env));
  return false;
}

/**
 * Starts the stdio upstreams a `serve` command line will need, now. Never throws; does nothing
 * for any other command line, or when the config cannot be read or parsed.
 *
 * @param argv the arguments after `node` and the script
 */
export function earlySpawn(argv: readonly string[]): void {
  try {
    const file = serveConfigPath(argv);
    if (file === undefined) return;
    const abs = resolve(file);
    if (!statSync(abs).isFile()) return;
    const raw: unknown = JSON.parse(readFileSync(abs, 'utf8'));
    for (const spec of rawStdioSpecs(raw, dirname(abs))) prespawnChild(spec);
  } catch {
    // The CLI reads the config again and reports what is wrong with it.
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
