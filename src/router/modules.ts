/**
 * User function tools: the ES modules named in `servers.json` `functions` (paths resolved against
 * the folder of `servers.json` by config/load.ts). Each module exports {@link defineFunctionTool}
 * results, as its default export (one tool or an array of tools) and/or as named exports.
 *
 * Names are advertised bare, exactly as the module defines them (`^[A-Za-z0-9_-]{1,64}$`), and
 * recorded as `functions/<name>`. Every failure is a `ConfigError` naming the module (the CLI
 * exits 2): a module that fails to load, one that exports no function tool, a name under a
 * reserved prefix (`broker__`, `estate__`), a name two modules define, and (at start, once the
 * roster is known) a name an upstream tool is also advertised under.
 */
import { pathToFileURL } from 'node:url';
import { RESERVED_SERVER_NAMES } from '../config/schema.js';
import { cut } from '../shared/cut.js';
import { ConfigError, messageOf } from '../shared/errors.js';
import { Scrubber } from '../shared/scrub.js';
import { isFunctionTool, TOOL_NAME, type FunctionTool } from './function-tool.js';

/** Imports an ES module by its URL (`import()`), resolving to its namespace. */
export type ModuleImporter = (url: string) => Promise<Record<string, unknown>>;

/** The native `import()`, which code run from the CLI bundle (a `vm.Script`) does not have: the bin hands its own. */
const nativeImport: ModuleImporter = (url) => import(url) as Promise<Record<string, unknown>>;

/** Longest part of a module's own load error a {@link ConfigError} quotes, in characters (`…` ending a longer one). */
export const MODULE_ERROR_MAX_CHARS = 300;

/** The scrub of a caller that passes none: the scrubber's patterns, no exact secrets. */
const patternsOnly = new Scrubber();

/**
 * Imports every module in order; returns their function tools. Throws {@link ConfigError}.
 * @param importModule how a module is imported; default the native `import()` (see {@link ModuleImporter}).
 * @param scrub applied to a module's own load error, whole, before it is cut at
 *   {@link MODULE_ERROR_MAX_CHARS} (a cut through a secret leaves its first characters, which
 *   the scrub no longer recognises); the gateway's scrubber, default one that knows no exact
 *   secrets. The error is printed on stderr as it is (`bad config: …`).
 */
export async function loadFunctionModules(
  paths: readonly string[],
  importModule: ModuleImporter = nativeImport,
  scrub: (text: string) => string = (text) => patternsOnly.text(text),
): Promise<FunctionTool[]> {
  const tools: FunctionTool[] = [];
  const owner = new Map<string, string>();
  for (const [index, path] of paths.entries()) {
    const at = `functions[${index}]`;
    let module: Record<string, unknown>;
    try {
      module = await importModule(pathToFileURL(path).href);
    } catch (err) {
      throw new ConfigError(at, `cannot load function module ${path}: ${cut(scrub(messageOf(err)), MODULE_ERROR_MAX_CHARS)}`);
    }
    const found = toolsOf(module);
    if (found.length === 0) {
      throw new ConfigError(at, `function module ${path} exports no function tool (export defineFunctionTool(...) results, as the default export or named exports)`);
    }
    for (const tool of found) {
      const name = tool.definition.name;
      if (!TOOL_NAME.test(name)) throw new ConfigError(at, `function module ${path}: tool name ${JSON.stringify(name)} must match ^[A-Za-z0-9_-]{1,64}$`);
      const reserved = RESERVED_SERVER_NAMES.find((r) => name.toLowerCase().startsWith(`${r}__`));
      if (reserved) throw new ConfigError(at, `function module ${path}: tool name "${name}" uses the reserved prefix "${reserved}__"`);
      const other = owner.get(name);
      if (other !== undefined && other !== path) throw new ConfigError(at, `function module ${path}: tool "${name}" is also defined by ${other}`);
      if (other === undefined) tools.push(tool);
      owner.set(name, path);
    }
  }
  return tools;
}

/**
 * Throws {@link ConfigError} when a local tool name is also an upstream tool's advertised name
 * (checked at start, once every upstream has listed its tools).
 */
export function assertNoRosterCollision(localNames: readonly string[], rosterNames: Iterable<string>): void {
  const roster = new Set(rosterNames);
  const clash = localNames.find((n) => roster.has(n));
  if (clash) throw new ConfigError('functions', `tool "${clash}" is defined by a function module and also advertised by an upstream; rename one, or give the server a "prefix"`);
}

/** Default export (a tool or an array of tools) first, then named exports; each tool once. */
function toolsOf(module: Record<string, unknown>): FunctionTool[] {
  const out: FunctionTool[] = [];
  const add = (value: unknown) => {
    if (isFunctionTool(value) && !out.includes(value)) out.push(value);
  };
  const fallback = module.default;
  if (Array.isArray(fallback)) fallback.forEach(add);
  else add(fallback);
  for (const [key, value] of Object.entries(module)) {
    if (key === 'default') continue;
    if (Array.isArray(value)) value.forEach(add);
    else add(value);
  }
  return out;
}
