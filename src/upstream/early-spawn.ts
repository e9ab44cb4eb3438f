/**
 * Cold start (issue 6): `mcp-broker serve` starts its stdio upstreams before the CLI loads its
 * own modules (commander, zod, pino and the config schema: ~70 ms of one core on a 2-core
 * machine), so the upstreams boot on the other core meanwhile. Three upstreams to the first
 * `tools/list`: median 490 → 457 ms in six alternating runs (bench/README.md).
 *
 * The spawn specs come from the raw `servers.json`, read the way the config loader reads it:
 * `${configDir}` and `${env:NAME}` filled in, the schema's defaults for `args`, `env`,
 * `inheritEnv`, `cwd` and `broker.env.inherit`. This is a guess made before validation, so it
 * is cautious: nothing is started unless the command line is plainly `serve` with known options
 * (a typo, `--help`, another command: nothing), and a server whose fields are not plainly valid
 * (or names a variable that is not set) is left out. The validated config then settles the
 * children (`prespawnUpstreams` → `settleParked`): one whose spec it starts is kept and adopted
 * by its first dial, any other is ended. A bad config exits 2 and ends them with the process.
 *
 * Imports nothing that loads zod: that is the point.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DEFAULT_INHERITED_ENV } from '../config/defaults.js';
import { prespawnChild, type ChildSpawnSpec } from './child-transport.js';
import { stdioSpawnSpec } from './spawn-env.js';

/** The CLI's default config file (`serve --config`). */
const DEFAULT_CONFIG = 'servers.json';
/** `serve` options that take a value, as the CLI declares them. */
const VALUE_OPTIONS = new Set(['-c', '--config', '-t', '--transport', '--host', '-p', '--port', '--log-level']);

/**
 * The config file `argv` (without `node` and the script) asks `serve` to use, or undefined when
 * it is not plainly a `serve` command line.
 */
export function serveConfigPath(argv: readonly string[]): string | undefined {
  let config = DEFAULT_CONFIG;
  let positional = 0;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg.startsWith('--') && arg.includes('=')) {
      const name = arg.slice(0, arg.indexOf('='));
      if (!VALUE_OPTIONS.has(name)) return undefined;
      if (name === '--config') config = arg.slice(name.length + 1);
    } else if (VALUE_OPTIONS.has(arg)) {
      const value = argv[++i];
      if (value === undefined) return undefined;
      if (arg === '-c' || arg === '--config') config = value;
    } else if (arg.startsWith('-')) {
      return undefined; // --help, --version, a combined or unknown flag
    } else if (arg === 'serve' && positional++ === 0) {
      continue;
    } else {
      return undefined; // another command, or a stray argument
    }
  }
  return config === '' ? undefined : config;
}

/**
 * The spawn specs of the enabled stdio upstreams of a raw config (the parsed JSON of
 * `servers.json` in `baseDir`), as the validated config would give them; servers this cannot
 * tell for sure are left out.
 */
export function rawStdioSpecs(raw: unknown, baseDir: string, env: NodeJS.ProcessEnv = process.env, nodePath = process.execPath): ChildSpawnSpec[] {
  if (!isObject(raw) || !isObject(raw.mcpServers)) return [];
  const fill = (value: string): string | undefined => {
    let missing = false;
    const out = value
      .split('${configDir}')
      .join(baseDir)
      .replace(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => {
        const v = env[name];
        if (v === undefined) missing = true;
        return v ?? '';
      });
    return missing ? undefined : out;
  };
  const strings = (value: unknown): string[] | undefined => {
    if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) return undefined;
    const out = value.map(fill);
    return out.every((v) => v !== undefined) ? (out as string[]) : undefined;
  };
  const broker = isObject(raw.broker) ? raw.broker : {};
  const brokerEnv = isObject(broker.env) ? broker.env : {};
  const inherit = brokerEnv.inherit === undefined ? [...DEFAULT_INHERITED_ENV] : strings(brokerEnv.inherit);
  if (!inherit) return [];
  const specs: ChildSpawnSpec[] = [];
  for (const server of Object.values(raw.mcpServers)) {
    if (!isObject(server) || typeof server.command !== 'string' || server.command === '') continue;
    if (server.disabled === true || (server.type !== undefined && server.type !== 'stdio')) continue;
    const command = fill(server.command);
    const args = server.args === undefined ? [] : strings(server.args);
    const inheritEnv = server.inheritEnv === undefined ? [] : strings(server.inheritEnv);
    const cwd = server.cwd === undefined ? '.' : typeof server.cwd === 'string' ? fill(server.cwd) : undefined;
    let childVars: Record<string, string> | undefined = {};
    if (server.env !== undefined) {
      if (!isObject(server.env)) childVars = undefined;
      else {
        for (const [name, value] of Object.entries(server.env)) {
          const filled = typeof value === 'string' ? fill(value) : undefined;
          if (filled === undefined) {
            childVars = undefined;
            break;
          }
          childVars[name] = filled;
        }
      }
    }
    if (!command || !args || !inheritEnv || cwd === undefined || !childVars) continue;
    specs.push(stdioSpawnSpec({ command, args, inheritEnv, env: childVars, cwd: resolve(baseDir, cwd) }, inherit, nodePath));
  }
  return specs;
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
    const raw: unknown = JSON.parse(readFileSync(abs, 'utf8'));
    for (const spec of rawStdioSpecs(raw, dirname(abs))) prespawnChild(spec);
  } catch {
    // The CLI reads the config again and reports what is wrong with it.
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
