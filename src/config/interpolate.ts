/**
 * Placeholders in `servers.json` strings, as the MCP clients write them:
 *
 * - `${env:NAME}` and `${NAME}`: the environment variable; unset is a problem at the string's path.
 * - `${env:NAME:-default}` and `${NAME:-default}`: the variable, or `default` when it is unset or empty.
 * - `${configDir}`: the folder of `servers.json`.
 * - `${workspaceFolder}`: the workspace of the config (its folder, or the parent of a `.vscode`
 *   or `.cursor` folder, as VS Code and Cursor mean it).
 * - `${userHome}`: the user's home folder.
 * - `${input:id}`: an entry of the top-level `inputs` (VS Code), read from `MCP_BROKER_INPUT_<ID>`
 *   ({@link inputEnvName}) or asked on a terminal beforehand; else its `default`; else a problem.
 *
 * Anything else inside `${…}` is a problem naming the JSON path: never literal text handed to a
 * child. Values read from the environment and inputs are secrets (scrubbed, redacted in errors).
 */
import { envValue } from '../shared/env.js';
import type { ConfigProblem } from '../shared/errors.js';

/** A `promptString` input of the top-level `inputs` (VS Code's `.vscode/mcp.json`). */
export interface ConfigInput {
  readonly type: 'promptString';
  readonly id: string;
  readonly description?: string;
  /** Asked without echo. */
  readonly password?: boolean;
  /** The value when the variable is unset and nothing is asked, or the answer is empty. */
  readonly default?: string;
}

/** What placeholders are filled from. */
export interface InterpolationContext {
  readonly env: NodeJS.ProcessEnv;
  readonly configDir: string;
  readonly workspaceFolder: string;
  readonly userHome: string;
  /** The declared inputs, by id. */
  readonly inputs: ReadonlyMap<string, ConfigInput>;
  /** Values of inputs already asked for, by id; they win over the environment. */
  readonly answers: Readonly<Record<string, string>>;
}

/** The environment variable a `${input:id}` is read from: `MCP_BROKER_INPUT_` + the id uppercased, other characters `_`. */
export function inputEnvName(id: string): string {
  return `MCP_BROKER_INPUT_${id.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

const PLACEHOLDER = /\$\{([^{}]*)\}/g;
const VARIABLE = /^(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^]*))?$/;
const INPUT = /^input:(.+)$/;
/** Longest placeholder text quoted back in a problem. */
const MAX_QUOTED = 60;

/** The result of filling one config: the value, secrets read, and every problem found. */
export interface Interpolated {
  readonly value: unknown;
  readonly secrets: string[];
  readonly problems: ConfigProblem[];
}

/**
 * Fills every placeholder in every string of `raw` (keys are left alone; the top-level
 * `$schema` and `inputs` too). A string with a problem is kept as written, and its problem is
 * reported at its path (`mcpServers.fs.env.TOKEN`).
 */
export function interpolate(raw: unknown, ctx: InterpolationContext): Interpolated {
  const secrets: string[] = [];
  const problems: ConfigProblem[] = [];
  const walk = (value: unknown, path: (string | number)[]): unknown => {
    if (typeof value === 'string') return fill(value, path, ctx, secrets, problems);
    if (Array.isArray(value)) return value.map((v, i) => walk(v, [...path, i]));
    if (value && typeof value === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) {
        out[k] = path.length === 0 && (k === '$schema' || k === 'inputs') ? v : walk(v, [...path, k]);
      }
      return out;
    }
    return value;
  };
  return { value: walk(raw, []), secrets, problems };
}

/** Every `${input:id}` id used in a string of `raw`, in order of first use. */
export function inputsUsed(raw: unknown): string[] {
  const ids = new Set<string>();
  const walk = (value: unknown, top: boolean): void => {
    if (typeof value === 'string') {
      for (const m of value.matchAll(PLACEHOLDER)) {
        const input = INPUT.exec(m[1]!);
        if (input) ids.add(input[1]!);
      }
    } else if (Array.isArray(value)) {
      for (const v of value) walk(v, false);
    } else if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) if (!(top && (k === '$schema' || k === 'inputs'))) walk(v, false);
    }
  };
  walk(raw, true);
  return [...ids];
}

function fill(text: string, path: (string | number)[], ctx: InterpolationContext, secrets: string[], problems: ConfigProblem[]): string {
  if (!text.includes('${')) return text;
  const before = problems.length;
  if (text.replace(PLACEHOLDER, '').includes('${')) {
    problems.push({ path: formatPath(path), message: 'has a "${" that no "}" closes (an unknown placeholder)' });
    return text;
  }
  const out = text.replace(PLACEHOLDER, (whole, inner: string) => {
    const value = resolve(inner, ctx, secrets);
    if (typeof value === 'string') return value;
    problems.push({ path: formatPath(path), message: value.problem });
    return whole;
  });
  return problems.length === before ? out : text;
}

function resolve(inner: string, ctx: InterpolationContext, secrets: string[]): string | { problem: string } {
  if (inner === 'configDir') return ctx.configDir;
  if (inner === 'workspaceFolder') return ctx.workspaceFolder;
  if (inner === 'userHome') return ctx.userHome;
  const variable = VARIABLE.exec(inner);
  if (variable) {
    const [, name, fallback] = variable;
    const value = envValue(ctx.env, name!);
    if (fallback !== undefined && (value === undefined || value === '')) return fallback;
    if (value === undefined) return { problem: `environment variable ${name} is not set` };
    secrets.push(value);
    return value;
  }
  const input = INPUT.exec(inner);
  if (input) {
    const id = input[1]!;
    const declared = ctx.inputs.get(id);
    if (!declared) return { problem: `\${input:${quote(id)}} names no entry of "inputs"` };
    const given = (Object.hasOwn(ctx.answers, id) ? ctx.answers[id] : undefined) ?? envValue(ctx.env, inputEnvName(id));
    // The declared default is text of the config, not a secret.
    if ((given === undefined || given === '') && typeof declared.default === 'string') return declared.default;
    if (given === undefined) {
      return { problem: `input "${quote(id)}" has no value: set ${inputEnvName(id)}, or start from a terminal to be asked` };
    }
    secrets.push(given);
    return given;
  }
  return {
    problem: `unknown placeholder "\${${quote(inner)}}" (known: \${env:NAME}, \${NAME}, \${NAME:-default}, \${workspaceFolder}, \${userHome}, \${configDir}, \${input:id})`,
  };
}

function quote(text: string): string {
  return text.length > MAX_QUOTED ? `${text.slice(0, MAX_QUOTED)}…` : text;
}

/** `mcpServers.fs.args[1]`. */
export function formatPath(path: readonly PropertyKey[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}
