/**
 * Cold start (issue 6): `mcp-broker serve` starts its stdio upstreams before the CLI loads its
 * own modules (commander, zod, pino and the config schema: ~70 ms of one core on a 2-core
 * machine), so the upstreams boot on the other core meanwhile.
 *
 * There is one config validator, the zod schema (`config/schema.ts`); this reads the file with
 * the loader's own code and what is generated from that schema, loading no zod:
 * - the command line with the table the CLI builds its options from (`serve-options.ts`);
 * - placeholders filled, server keys and cross-field rules (prefixes, tokens) checked by the
 *   loader's own code (`config/fill.ts`);
 * - the whole filled file checked by the validator compiled from `servers.schema.json` (the
 *   JSON Schema generated from the zod schema) at build time
 *   (`config/validate-config.generated.js`, `scripts/config-validator.mjs`), which also gives
 *   the schema's defaults of a stdio server and of `broker`;
 * - the spawn spec made by `stdioSpawnSpec`, as the validated config's.
 *
 * Nothing starts unless all of that accepts the file, the config is a regular file (a pipe can
 * be read once only, and the loader reads it again) and plain JSON (the loader's JSONC reader is
 * not loaded this early). The JSON Schema cannot say everything the zod schema checks
 * (its refinements: a REST server's operations, `broker` and `http` limits): the validated config then settles the children
 * (`prespawnUpstreams` → `settleParked`): one whose spec it starts is kept and adopted by its
 * first dial, any other is ended; a config refused there exits 2 and ends them with the process;
 * a signal before the CLI's own handlers does too (`prespawnChild`).
 */
import { readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { withEnvFile } from '../config/env-file.js';
import { crossFieldProblems, fillConfig, isObject } from '../config/fill.js';
import type { Config } from '../config/schema.js';
import { brokerDefaults, stdioServerDefaults, validateConfig } from '../config/validate-config.generated.js';
import { serveConfigPath } from '../serve-options.js';
import { prespawnChild, type ChildSpawnSpec } from './child-transport.js';
import { stdioSpawnSpec } from './spawn-env.js';

/**
 * The spawn specs of the enabled stdio upstreams of a parsed config (the JSON of `servers.json`
 * in `baseDir`), as the validated config gives them; undefined when any check made here refuses
 * the file, or an `envFile` cannot be read.
 */
export function earlyStdioSpecs(raw: unknown, baseDir: string, env: NodeJS.ProcessEnv = process.env, nodePath = process.execPath): ChildSpawnSpec[] | undefined {
  const filled = fillConfig(raw, { baseDir, env });
  if (filled.problems.length > 0 || !validateConfig(filled.value)) return undefined;
  const config = filled.value as Record<string, unknown>;
  const servers = (config[filled.serversKey] ?? {}) as Config['mcpServers'];
  if (crossFieldProblems({ mcpServers: servers, principals: (config.principals ?? {}) as Config['principals'] }, filled.serversKey).length > 0) return undefined;
  const withBroker: { broker?: unknown } = { broker: structuredClone(config.broker) };
  if (!brokerDefaults(withBroker)) return undefined;
  const inherit = (withBroker.broker as { env: { inherit: string[] } }).env.inherit;
  const specs: ChildSpawnSpec[] = [];
  for (const [key, entry] of Object.entries(servers as Record<string, unknown>)) {
    // A stdio server is one with a `command` (`serverKind`).
    if (!isObject(entry) || !('command' in entry)) continue;
    const server = structuredClone(entry) as { command: string; args: string[]; env: Record<string, string>; inheritEnv: string[]; cwd?: string; envFile?: string; disabled: boolean };
    if (!stdioServerDefaults(server)) return undefined;
    if (server.disabled) continue;
    if (server.envFile !== undefined) {
      const merged = withEnvFile(server.env, server.envFile, baseDir, `${filled.serversKey}.${key}`);
      if ('problem' in merged) return undefined;
      server.env = merged.env;
    }
    const cwd = resolve(baseDir, server.cwd ?? '.');
    specs.push(stdioSpawnSpec({ ...server, cwd }, inherit, nodePath));
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
    if (!statSync(abs).isFile()) return;
    const raw: unknown = JSON.parse(readFileSync(abs, 'utf8').replace(/^\uFEFF/, ''));
    for (const spec of earlyStdioSpecs(raw, dirname(abs)) ?? []) prespawnChild(spec);
  } catch {
    // The CLI reads the config again and reports what is wrong with it.
  }
}
