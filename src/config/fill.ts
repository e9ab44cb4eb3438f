/**
 * The first half of loading `servers.json`, before the schema: placeholders filled in
 * (`interpolate.ts`, with the config's `${configDir}`, `${workspaceFolder}`, `${userHome}` and
 * declared inputs), which of `mcpServers` and `servers` (VS Code) holds the servers, and the
 * problems of the server keys themselves; and the loader's cross-field checks
 * ({@link crossFieldProblems}). The loader (`load.ts`) validates the result with the
 * zod schema; the early start of the stdio upstreams (`upstream/early-spawn.ts`) with the
 * validator generated from the same schema. Loads no zod (cold start).
 */
import { homedir } from 'node:os';
import { basename, dirname } from 'node:path';
import type { ConfigProblem } from '../shared/errors.js';
import { RESERVED_SERVER_NAMES, SERVER_KEY } from './constants.js';
import { interpolate, type ConfigInput } from './interpolate.js';
import type { Config } from './schema.js';

/** What {@link fillConfig} fills placeholders from. */
export interface FillOptions {
  /** Folder of `servers.json`: `${configDir}`, and `${workspaceFolder}` from it. */
  readonly baseDir: string;
  /** The environment placeholders read. */
  readonly env: NodeJS.ProcessEnv;
  /** Values of `${input:id}` already asked for, by id; they win over `MCP_BROKER_INPUT_<ID>`. Default none. */
  readonly answers?: Readonly<Record<string, string>>;
  /** `${userHome}`; default the user's home folder. */
  readonly userHome?: string;
}

/** A config with its placeholders filled, ready for the schema. */
export interface FilledConfig {
  /** The raw config with every placeholder filled (a string with a problem is kept as written). */
  readonly value: unknown;
  /** Every environment and input value filled in. */
  readonly secrets: string[];
  /** Every problem found, each at its JSON path: the placeholders' first, then both server maps given, bad server keys. */
  readonly problems: ConfigProblem[];
  /** The placeholders' problems alone (a string with one is kept as written). */
  readonly placeholderProblems: readonly ConfigProblem[];
  /** Where the servers are: `servers` when only VS Code's key is given, else `mcpServers`. */
  readonly serversKey: 'mcpServers' | 'servers';
}

/** Fills the placeholders of a parsed config and checks its server keys; never throws. */
export function fillConfig(raw: unknown, options: FillOptions): FilledConfig {
  const filled = interpolate(raw, {
    env: options.env,
    configDir: options.baseDir,
    workspaceFolder: workspaceFolderOf(options.baseDir),
    userHome: options.userHome ?? homedir(),
    inputs: declaredInputs(raw),
    answers: options.answers ?? {},
  });
  const problems: ConfigProblem[] = [...filled.problems];
  const serversKey = isObject(raw) && raw.servers !== undefined && raw.mcpServers === undefined ? 'servers' : 'mcpServers';
  if (isObject(raw) && raw.servers !== undefined && raw.mcpServers !== undefined) {
    problems.push({ path: 'servers', message: 'give either "mcpServers" or "servers" (VS Code), not both' });
  }
  if (isObject(raw) && isObject(raw[serversKey])) problems.push(...keyProblems(Object.keys(raw[serversKey]), serversKey));
  return { value: filled.value, secrets: filled.secrets, problems, placeholderProblems: filled.problems, serversKey };
}

/** `${workspaceFolder}`: the config's folder, or the project folder above a `.vscode` or `.cursor` folder. */
function workspaceFolderOf(configDir: string): string {
  return ['.vscode', '.cursor'].includes(basename(configDir)) ? dirname(configDir) : configDir;
}

/** The well-formed entries of the top-level `inputs`, by id (the schema reports the others). */
export function declaredInputs(raw: unknown): Map<string, ConfigInput> {
  const inputs = new Map<string, ConfigInput>();
  if (!isObject(raw) || !Array.isArray(raw.inputs)) return inputs;
  for (const input of raw.inputs) {
    if (isObject(input) && typeof input.id === 'string') inputs.set(input.id, input as unknown as ConfigInput);
  }
  return inputs;
}

/** Problems of the server keys themselves (checked even when the schema refuses the file). */
function keyProblems(keys: readonly string[], serversKey: string): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const key of keys) {
    const at = `${serversKey}.${key}`;
    if (!SERVER_KEY.test(key)) problems.push({ path: at, message: 'server key must match ^[A-Za-z0-9][A-Za-z0-9_-]*$' });
    else if (key.includes('__')) problems.push({ path: at, message: 'server key may not contain "__" (the name delimiter)' });
    else if ((RESERVED_SERVER_NAMES as readonly string[]).includes(key.toLowerCase())) {
      problems.push({ path: at, message: `"${key}" is reserved for the broker's own tools` });
    }
  }
  return problems;
}

/** Prefixes that collide or are reserved, the reserved principal, and shared tokens. */
export function crossFieldProblems(config: Pick<Config, 'mcpServers' | 'principals'>, serversKey: string): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const prefixes = new Map<string, string>();
  for (const [key, server] of Object.entries(config.mcpServers)) {
    const at = `${serversKey}.${key}`;
    if (server.disabled) continue;
    const prefix = server.prefix === false ? '' : (server.prefix ?? key);
    if (prefix !== key && prefix.includes('__')) {
      problems.push({ path: `${at}.prefix`, message: 'may not contain "__" (the name delimiter)' });
    } else if (prefix !== key && (RESERVED_SERVER_NAMES as readonly string[]).includes(prefix.toLowerCase())) {
      problems.push({ path: `${at}.prefix`, message: `"${prefix}" is reserved for the broker's own tools` });
    } else if (prefix !== '') {
      const other = prefixes.get(prefix);
      if (other) problems.push({ path: `${at}.prefix`, message: `prefix "${prefix}" is already used by ${serversKey}.${other}` });
      else prefixes.set(prefix, key);
    }
  }
  if (Object.hasOwn(config.principals, 'local')) problems.push({ path: 'principals.local', message: '"local" is reserved for the stdio client' });
  const tokens = new Map<string, string>();
  for (const [name, principal] of Object.entries(config.principals)) {
    const other = tokens.get(principal.token);
    if (other) problems.push({ path: `principals.${name}.token`, message: `is the same as principals.${other}.token` });
    else tokens.set(principal.token, name);
  }
  return problems;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
