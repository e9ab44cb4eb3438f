/**
 * Loads `servers.json`: read, parse, `${env:NAME}` interpolation, schema, cross-field checks,
 * and relative paths resolved against the file's folder. Every failure is a {@link ConfigError}
 * naming the JSON path (`mcpServers.fs.command`) and what was wrong, never a secret value.
 */
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import type { z } from 'zod';
import { ConfigError } from '../shared/errors.js';
import { credentialValues } from '../shared/scrub.js';
import { configSchema, RESERVED_SERVER_NAMES, SERVER_KEY, serverKind, type Config } from './schema.js';

/** A loaded config plus where it came from. */
export interface LoadedConfig extends Config {
  /** Absolute path of the file, or undefined when built in code. */
  readonly file?: string;
  /** Folder relative paths are resolved against. */
  readonly baseDir: string;
  /**
   * The exact secrets to scrub: every `${env:…}` value, principal tokens, and credential-named
   * `env`/`headers` values ({@link credentialValues}).
   */
  readonly secrets: readonly string[];
}

/** Reads and validates a config file. Throws {@link ConfigError}. */
export function loadConfigFile(file: string, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  const abs = resolve(file);
  let text: string;
  try {
    text = readFileSync(abs, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError('', `cannot read ${abs}${code ? ` (${code})` : ''}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ConfigError('', `${abs} is not valid JSON: ${(err as Error).message}`);
  }
  return parseConfig(raw, { file: abs, baseDir: dirname(abs), env });
}

/** Validates an already-parsed config object. Throws {@link ConfigError}. */
export function parseConfig(
  raw: unknown,
  options: { file?: string; baseDir?: string; env?: NodeJS.ProcessEnv } = {},
): LoadedConfig {
  const env = options.env ?? process.env;
  const secrets: string[] = [];
  const baseDir = options.baseDir ?? process.cwd();
  const interpolated = interpolate(raw, [], env, secrets, baseDir);
  const parsed = configSchema.safeParse(interpolated);
  if (!parsed.success) throw redact(fromZod(parsed.error, interpolated), secrets);
  // A copy: zod hands out its `.default(...)` objects by reference, and paths are resolved in place below.
  const config = structuredClone(parsed.data);
  try {
    checkServers(config);
  } catch (err) {
    throw err instanceof ConfigError ? redact(err, secrets) : err;
  }
  for (const server of Object.values(config.mcpServers)) {
    const kind = serverKind(server);
    // `${env:…}` values are already secrets; literal values count when their key names a credential (credentialValues).
    if ('env' in server) secrets.push(...credentialValues(server.env));
    if ('headers' in server) secrets.push(...credentialValues(server.headers));
    if (kind === 'stdio' && 'command' in server) {
      server.cwd = resolve(baseDir, server.cwd ?? '.');
    }
    if (kind === 'rest' && 'openapi' in server && server.openapi) {
      server.openapi = resolve(baseDir, server.openapi);
      if (!server.operations) throw new ConfigError(pathOf(config, server, 'operations'), 'is required with "openapi"');
    }
  }
  for (const principal of Object.values(config.principals)) secrets.push(principal.token);
  config.broker.records.path = resolvePath(baseDir, config.broker.records.path);
  config.broker.dataDir = resolvePath(baseDir, config.broker.dataDir);
  config.estate.root = resolvePath(baseDir, config.estate.root);
  config.functions = config.functions.map((f) => resolvePath(baseDir, f));
  return Object.assign(config, { file: options.file, baseDir, secrets: [...new Set(secrets)] });
}

function resolvePath(baseDir: string, p: string): string {
  return isAbsolute(p) ? p : resolve(baseDir, p);
}

function pathOf(config: Config, server: unknown, field: string): string {
  const key = Object.entries(config.mcpServers).find(([, s]) => s === server)?.[0] ?? '?';
  return `mcpServers.${key}.${field}`;
}

function checkServers(config: Config): void {
  const prefixes = new Map<string, string>();
  for (const [key, server] of Object.entries(config.mcpServers)) {
    const at = `mcpServers.${key}`;
    if (!SERVER_KEY.test(key)) throw new ConfigError(at, 'server key must match ^[A-Za-z0-9][A-Za-z0-9_-]*$');
    if (key.includes('__')) throw new ConfigError(at, 'server key may not contain "__" (the name delimiter)');
    if ((RESERVED_SERVER_NAMES as readonly string[]).includes(key.toLowerCase())) {
      throw new ConfigError(at, `"${key}" is reserved for the broker's own tools`);
    }
    if (server.disabled) continue;
    const prefix = server.prefix === false ? '' : (server.prefix ?? key);
    if (prefix.includes('__')) throw new ConfigError(`${at}.prefix`, 'may not contain "__" (the name delimiter)');
    if ((RESERVED_SERVER_NAMES as readonly string[]).includes(prefix.toLowerCase())) {
      throw new ConfigError(`${at}.prefix`, `"${prefix}" is reserved for the broker's own tools`);
    }
    if (prefix !== '') {
      const other = prefixes.get(prefix);
      if (other) throw new ConfigError(`${at}.prefix`, `prefix "${prefix}" is already used by mcpServers.${other}`);
      prefixes.set(prefix, key);
    }
  }
  for (const [name, principal] of Object.entries(config.principals)) {
    if (name === 'local') throw new ConfigError(`principals.${name}`, '"local" is reserved for the stdio client');
    void principal;
  }
  const tokens = new Map<string, string>();
  for (const [name, principal] of Object.entries(config.principals)) {
    const other = tokens.get(principal.token);
    if (other) throw new ConfigError(`principals.${name}.token`, `is the same as principals.${other}.token`);
    tokens.set(principal.token, name);
  }
}

const ENV_REF = /\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g;
const CONFIG_DIR_REF = '${configDir}';

/**
 * Replaces `${env:NAME}` in every string (a missing variable is a config error at its path;
 * the value is kept as a secret to scrub) and `${configDir}` with the folder of `servers.json`.
 */
function interpolate(value: unknown, path: (string | number)[], env: NodeJS.ProcessEnv, secrets: string[], configDir: string): unknown {
  if (typeof value === 'string') {
    if (value.includes(CONFIG_DIR_REF)) value = value.split(CONFIG_DIR_REF).join(configDir);
    if (!(value as string).includes('${env:')) return value;
    return (value as string).replace(ENV_REF, (_m, name: string) => {
      const v = env[name];
      if (v === undefined) throw new ConfigError(formatPath(path), `environment variable ${name} is not set`);
      secrets.push(v);
      return v;
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => interpolate(v, [...path, i], env, secrets, configDir));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = interpolate(v, [...path, k], env, secrets, configDir);
    return out;
  }
  return value;
}

function formatPath(path: readonly PropertyKey[]): string {
  return path
    .map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`))
    .join('');
}

/** Shortest `${env:}` value treated as a secret when redacting messages (shorter ones would garble them). */
const MIN_REDACTED_LENGTH = 4;

/**
 * The error with every `${env:}` value in its message replaced by `***`: a bad value can hold a
 * secret in any field (`"url": "https://…/${env:TOKEN}"`), not only in `env` or `headers`.
 */
function redact(err: ConfigError, secrets: readonly string[]): ConfigError {
  const path = err.data?.path ?? '';
  let text = path && err.message.startsWith(`${path}: `) ? err.message.slice(path.length + 2) : err.message;
  let changed = false;
  for (const secret of [...secrets].sort((a, b) => b.length - a.length)) {
    if (secret.length < MIN_REDACTED_LENGTH || !text.includes(secret)) continue;
    text = text.split(secret).join('***');
    changed = true;
  }
  return changed ? new ConfigError(path, text) : err;
}

/** `text` with the userinfo of every URL in it (`//user:pass@`) replaced by `//***@`. */
function hideUserinfo(text: string): string {
  return text.replace(/\/\/[^/?#\s]*@/g, '//***@');
}

/**
 * The first zod issue as a ConfigError; the bad value is named only when it cannot be a secret,
 * and never with the credentials of a URL in it.
 */
function fromZod(error: z.ZodError, input: unknown): ConfigError {
  const issue = error.issues[0]!;
  const path = formatPath(issue.path);
  const lastKey = String(issue.path[issue.path.length - 1] ?? '');
  let message = issue.message;
  const bad = valueAt(input, issue.path);
  const sensitive = /env|headers|token|secret|password|key/i.test(path) || /token|secret|password|key/i.test(lastKey);
  if (issue.code === 'unrecognized_keys') {
    message = `unknown field(s): ${(issue as { keys?: string[] }).keys?.join(', ')}`;
  } else if (!sensitive && bad !== undefined && (typeof bad !== 'object' || bad === null)) {
    message += ` (got ${JSON.stringify(typeof bad === 'string' ? hideUserinfo(bad) : bad)})`;
  }
  const more = error.issues.length > 1 ? ` (and ${error.issues.length - 1} more problem(s))` : '';
  return new ConfigError(path || '(root)', message + more);
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let cur: unknown = input;
  for (const p of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[p];
  }
  return cur;
}
