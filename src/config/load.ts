/**
 * Loads `servers.json`: read, parse (JSON with comments and trailing commas), placeholders
 * (`config/interpolate.ts`), schema, cross-field checks, `envFile`s, and relative paths resolved
 * against the file's folder. Every problem is collected and thrown at once as one
 * {@link ConfigError} whose `problems` each name the JSON path (`mcpServers.fs.command`) and what
 * was wrong, never a secret value.
 */
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse as parseJsonc, printParseErrorCode, visit as visitJsonc, type ParseError, type ParseOptions as JsoncOptions } from 'jsonc-parser';
import type { z } from 'zod';
import { ConfigError, type ConfigProblem } from '../shared/errors.js';
import { globProblem, isToolKeyGlob } from '../shared/glob.js';
import { credentialValues } from '../shared/scrub.js';
import { readEnvFile, withEnvFile } from './env-file.js';
import { crossFieldProblems, declaredInputs, fillConfig, isObject } from './fill.js';
import { formatPath, inputEnvName, inputsUsed, type ConfigInput } from './interpolate.js';
import { configSchema, serverKind, type Config } from './schema.js';

/** A loaded config plus where it came from. */
export interface LoadedConfig extends Config {
  /** Absolute path of the file, or undefined when built in code. */
  readonly file?: string;
  /** Folder relative paths are resolved against. */
  readonly baseDir: string;
  /**
   * The exact secrets to scrub: every environment and `${input:}` value filled in, principal
   * tokens, and credential-named `env`/`headers` values ({@link credentialValues}).
   */
  readonly secrets: readonly string[];
  /** The `${input:id}` values asked for on a terminal at start, by id: a reload fills the same inputs with them. */
  readonly answers?: Readonly<Record<string, string>>;
}

/** How a config is read besides its text. */
export interface ParseOptions {
  /** Absolute path of the file, kept on the result. */
  file?: string;
  /** Folder relative paths and `${configDir}` resolve against; default the working directory. */
  baseDir?: string;
  /** The environment placeholders read; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Values of `${input:id}` already asked for, by id; they win over `MCP_BROKER_INPUT_<ID>`. */
  answers?: Readonly<Record<string, string>>;
  /** `${userHome}`; default the user's home folder. */
  userHome?: string;
}

/** Asks for the value of one input (on a terminal: `config/ask.ts`). */
export type AskInput = (input: ConfigInput) => Promise<string>;

/** Reads and validates a config file. Throws {@link ConfigError}. */
export function loadConfigFile(file: string, env: NodeJS.ProcessEnv = process.env, options: Omit<ParseOptions, 'file' | 'baseDir' | 'env'> = {}): LoadedConfig {
  const { abs, raw } = readConfigFile(file);
  return parseConfig(raw, { ...options, file: abs, baseDir: dirname(abs), env });
}

/**
 * Reads and validates a config file, first asking `ask` (in the order they are used) for every
 * declared `${input:id}` whose `MCP_BROKER_INPUT_<ID>` is not set. Rejects with {@link ConfigError}.
 */
export async function loadConfigFileAsking(file: string, ask: AskInput, env: NodeJS.ProcessEnv = process.env): Promise<LoadedConfig> {
  const { abs, raw } = readConfigFile(file);
  const declared = declaredInputs(raw);
  const answers: Record<string, string> = {};
  for (const id of inputsUsed(raw)) {
    const input = declared.get(id);
    if (input && env[inputEnvName(id)] === undefined) answers[id] = await ask(input);
  }
  return parseConfig(raw, { file: abs, baseDir: dirname(abs), env, answers });
}

/**
 * The parsed text of a config file: JSON with comments and trailing commas. Every syntax error
 * is a problem `<file>:<line>:<column>: <what>`, with the file named as given.
 */
export function readConfigFile(file: string): { abs: string; raw: unknown } {
  const abs = resolve(file);
  let text: string;
  try {
    text = readFileSync(abs, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError('', `cannot read ${file}${code ? ` (${code})` : ''}`);
  }
  text = text.replace(/^\uFEFF/, '');
  // The parser recurses once per level: thousands of nested arrays or objects overflow the stack.
  const reading = <T>(read: () => T): T => {
    try {
      return read();
    } catch (err) {
      if (err instanceof RangeError) throw new ConfigError('', `${file}: nested too deeply to read (${err.message})`);
      throw err;
    }
  };
  const errors: ParseError[] = [];
  const raw: unknown = reading(() => parseJsonc(text, errors, JSONC));
  if (errors.length > 0) {
    throw ConfigError.of(errors.map((e) => ({ path: '', message: `${file}:${lineColumn(text, e.offset)}: ${parseErrorText(e)} (not valid JSON)` })));
  }
  // Every later step (placeholders, the schema, copies) walks the value recursively.
  if (deeperThan(raw, MAX_CONFIG_DEPTH)) throw new ConfigError('', `${file}: nested deeper than ${MAX_CONFIG_DEPTH} levels`);
  // A "__proto__" nesting deep arrays is no member of the value: the depth check does not see it.
  const held = reading(() => protoKeyPaths(text));
  if (held.length > 0) throw ConfigError.of(held.map((path) => ({ path, message: `${path === '' ? `${file}: ` : ''}has a key "__proto__", which no config may use` })));
  return { abs, raw };
}

/** How servers.json is read: JSON with comments and trailing commas. */
const JSONC: JsoncOptions = { allowTrailingComma: true, disallowComments: false };

/** Deepest nesting of arrays and objects a config may have; no real config comes near it. */
const MAX_CONFIG_DEPTH = 256;

/** Whether `value` nests arrays and objects deeper than `max` levels, walked without recursion. */
function deeperThan(value: unknown, max: number): boolean {
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  while (stack.length > 0) {
    const { value: v, depth } = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= max) return true;
    for (const child of Object.values(v)) stack.push({ value: child, depth: depth + 1 });
  }
  return false;
}

/**
 * The JSON path of every object in `text` (JSONC, parsed without errors) with a key
 * `__proto__`, however it is escaped, whatever its value.
 * The parser never makes it a member: an object or null value becomes the object's prototype,
 * any other is dropped, so such a server or field would be silently skipped.
 */
function protoKeyPaths(text: string): string[] {
  const paths: string[] = [];
  visitJsonc(
    text,
    {
      onObjectProperty: (property, _offset, _length, _line, _column, pathSupplier) => {
        if (property === '__proto__') paths.push(formatPath(pathSupplier()));
      },
    },
    JSONC,
  );
  return paths;
}

/** `line:column`, both from 1, of an offset into `text`. */
function lineColumn(text: string, offset: number): string {
  const before = text.slice(0, offset).split('\n');
  return `${before.length}:${before[before.length - 1]!.length + 1}`;
}

/** `PropertyNameExpected` → `property name expected`. */
function parseErrorText(error: ParseError): string {
  return printParseErrorCode(error.error).replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase();
}

/** Validates an already-parsed config object. Throws {@link ConfigError} with every problem. */
export function parseConfig(raw: unknown, options: ParseOptions = {}): LoadedConfig {
  const env = options.env ?? process.env;
  const baseDir = options.baseDir ?? process.cwd();
  const filled = fillConfig(raw, { env, baseDir, answers: options.answers, userHome: options.userHome });
  const { secrets, serversKey } = filled;
  const problems: ConfigProblem[] = [...filled.problems];
  const parsed = configSchema.safeParse(filled.value);
  if (!parsed.success) {
    // A string whose placeholder failed is kept as written: its schema issues would only repeat that.
    const failed = filled.placeholderProblems.map((p) => p.path);
    const covered = (path: string) => failed.some((f) => path === f || path.startsWith(`${f}.`) || path.startsWith(`${f}[`));
    for (const issue of parsed.error.issues) {
      const problem = fromZod(issue, filled.value);
      if (!covered(problem.path)) problems.push(problem);
    }
    // envFiles are read even so, so their problems are listed with the rest (issue 18 §2).
    const servers = isObject(filled.value) ? filled.value[serversKey] : undefined;
    if (isObject(servers)) {
      for (const [key, server] of Object.entries(servers)) {
        const envFile = isObject(server) ? server.envFile : undefined;
        if (typeof envFile !== 'string') continue;
        const read = readEnvFile(resolvePath(baseDir, envFile), envFile, `${serversKey}.${key}.envFile`);
        if ('problem' in read) problems.push(read.problem);
      }
    }
    throw redact(problems, secrets);
  }
  // A copy: zod hands out its `.default(...)` objects by reference, and paths are resolved in place below.
  const config = structuredClone(parsed.data);
  if (config.servers !== undefined) {
    if (serversKey === 'servers') config.mcpServers = config.servers;
    delete config.servers;
  }
  problems.push(...crossFieldProblems(config, serversKey));
  // Compiled by the evaluate stage; checked here so every loader (serve, check, a reload) names it with the rest.
  config.policy.output.deny.forEach((pattern, i) => {
    try {
      new RegExp(pattern);
    } catch (err) {
      problems.push({ path: `policy.output.deny[${i}]`, message: `is not a valid regular expression: ${(err as Error).message}` });
    }
  });
  // Compiled by the policy and the tool settings: picomatch matches a glob that does not compile against its own text only, so a deny of `fs__[z-a]*` would deny no tool.
  const checkGlob = (glob: string, path: string) => {
    const problem = globProblem(glob, false);
    if (problem) problems.push({ path, message: `is not a glob that compiles: ${problem}` });
  };
  config.policy.rules.forEach((rule, i) => {
    for (const field of ['tools', 'prompts', 'resources'] as const) rule[field]?.forEach((glob, j) => checkGlob(glob, `policy.rules[${i}].${field}[${j}]`));
  });
  config.policy.readOnly.forEach((glob, i) => checkGlob(glob, `policy.readOnly[${i}]`));
  for (const [key, server] of Object.entries(config.mcpServers)) {
    const at = `${serversKey}.${key}`;
    if ('tools' in server && server.tools) for (const name of Object.keys(server.tools)) if (isToolKeyGlob(name)) checkGlob(name, `${at}.tools.${name}`);
    const kind = serverKind(server);
    if (kind === 'stdio' && 'command' in server) {
      if (server.envFile !== undefined) {
        const merged = withEnvFile(server.env, server.envFile, baseDir, at);
        if ('problem' in merged) problems.push(merged.problem);
        else server.env = merged.env;
        delete server.envFile;
      }
      server.cwd = resolve(baseDir, server.cwd ?? '.');
    }
    // `${…}` values are already secrets; literal values count when their key names a credential.
    if ('env' in server) secrets.push(...credentialValues(server.env));
    // So do the values a stdio child inherits from our environment (`broker.env.inherit`, its
    // `inheritEnv`) under a credential's name: `"inheritEnv": ["GITHUB_TOKEN"]` hands it a secret.
    if (kind === 'stdio' && 'inheritEnv' in server) secrets.push(...credentialValues(inheritedValues([...config.broker.env.inherit, ...server.inheritEnv], env)));
    if ('headers' in server) secrets.push(...credentialValues(server.headers));
    if (kind === 'rest' && 'openapi' in server && server.openapi) {
      server.openapi = resolve(baseDir, server.openapi);
      if (!server.operations) problems.push({ path: `${at}.operations`, message: 'is required with "openapi"' });
    }
  }
  if (problems.length > 0) throw redact(problems, secrets);
  for (const principal of Object.values(config.principals)) secrets.push(principal.token);
  if (config.observability.otlp) secrets.push(...credentialValues(config.observability.otlp.headers));
  config.broker.records.path = resolvePath(baseDir, config.broker.records.path);
  config.broker.dataDir = resolvePath(baseDir, config.broker.dataDir);
  config.estate.root = resolvePath(baseDir, config.estate.root);
  config.functions = config.functions.map((f) => resolvePath(baseDir, f));
  return Object.assign(config, { file: options.file, baseDir, secrets: [...new Set(secrets)], ...(options.answers && { answers: options.answers }) });
}

/** The values of `names` in `env` (those it has), by name. */
function inheritedValues(names: readonly string[], env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = env[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

function resolvePath(baseDir: string, p: string): string {
  return isAbsolute(p) ? p : resolve(baseDir, p);
}

/** Shortest secret treated as one when redacting messages (shorter ones would garble them). */
const MIN_REDACTED_LENGTH = 4;

/**
 * One error of every problem, with every secret in a message replaced by `***`: a bad value can
 * hold a secret in any field (`"url": "https://…/${env:TOKEN}"`), not only in `env` or `headers`.
 */
function redact(problems: readonly ConfigProblem[], secrets: readonly string[]): ConfigError {
  const sorted = [...secrets].filter((s) => s.length >= MIN_REDACTED_LENGTH).sort((a, b) => b.length - a.length);
  return ConfigError.of(
    problems.map(({ path, message }) => {
      for (const secret of sorted) {
        // As written, and as a quoted value shows it (`"` and `\` escaped: `(got "pa\\ss")`).
        for (const spelling of new Set([secret, JSON.stringify(secret).slice(1, -1)])) {
          if (message.includes(spelling)) message = message.split(spelling).join('***');
        }
      }
      return { path, message };
    }),
  );
}

/** `text` with the userinfo of every URL in it (`//user:pass@`) replaced by `//***@`. */
function hideUserinfo(text: string): string {
  return text.replace(/\/\/[^/?#\s]*@/g, '//***@');
}

/**
 * A zod issue as a problem; the bad value is named only when it cannot be a secret, and never
 * with the credentials of a URL in it.
 */
function fromZod(issue: z.core.$ZodIssue, input: unknown): ConfigProblem {
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
  return { path: path || '(root)', message };
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let cur: unknown = input;
  for (const p of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[p];
  }
  return cur;
}
