/**
 * `mcp-broker approve <tool>` and `mcp-broker revoke <tool>`: an operator's standing decision
 * about one tool (advertised name), written to the store in `broker.dataDir` (a running broker
 * reads it on the tool's next call; issue 3 §1, §11).
 *
 * - approve: satisfies `ask` (policy rules, `policy.default`, `policy.firstUse`) for the
 *   principal (`--principal`, default every principal), and re-pins an upstream tool whose
 *   definition changed to the definition the broker last saw, for that principal only (without
 *   `--principal`: the default pin, and every principal's own pin is dropped), so for them it
 *   is listed as it is now and no longer `unregistered`. Built-in and function tools are never
 *   pinned; the note says so.
 * - revoke: the tool needs approval again before it runs for the principal (an `ask`), and its
 *   remembered first uses are forgotten. A `deny` still denies.
 * `approve` of a tool the broker has never seen (not in the store's pins or seen definitions,
 * not a built-in, not a function tool of the config) is exit 2 unless `force`, and creates no
 * store when there is none yet; approving a tool a `deny` rule covers works but says that the
 * rule still denies it.
 * Returns the exit code: 0, or 2 for a bad tool name.
 */
import { compilePolicy } from '../broker/policy.js';
import { ESTATE_TOOL_NAMES } from '../builtins/estate/index.js';
import { RECONNECT_TOOL } from '../builtins/reconnect.js';
import { APPROVALS_DECIDE_TOOL, APPROVALS_LIST_TOOL } from '../builtins/approvals.js';
import type { LoadedConfig } from '../config/load.js';
import type { ModuleImporter } from '../router/modules.js';
import { RESERVED_SERVER_NAMES } from '../config/schema.js';
import { EVERY_PRINCIPAL, SqliteStore, type Store } from '../store/index.js';
import { NAME_PATTERN } from '../upstream/naming.js';
import { EXIT_OK, EXIT_USAGE, type CommandIo } from './io.js';

export interface DecisionOptions {
  /** A principal name; default every principal. */
  principal?: string;
  /** The store to write; default the SQLite store in `broker.dataDir`. */
  store?: Store;
  now?: number;
  /** `approve` a tool the broker has not seen (yet). */
  force?: boolean;
  /** How function modules are imported to look for the tool; default the native `import()` (router/modules.ts). */
  importModule?: ModuleImporter;
}

export async function approveCommand(config: LoadedConfig, tool: string, options: DecisionOptions, io: CommandIo): Promise<number> {
  // Whether the tool is known is read first, from the store only when it exists: a refusal creates nothing.
  const known = async (store: Store | undefined) => {
    if (options.force || (await isKnownTool(config, store, tool, options.importModule))) return undefined;
    io.stderr.write(
      `mcp-broker: no tool ${JSON.stringify(tool)} is known to this broker (never listed by an upstream, not a built-in or function tool); check the name (an advertised name such as fs__write_file), or pass --force to approve it ahead of time\n`,
    );
    return EXIT_USAGE;
  };
  return withStore(config, tool, options, io, known, async (store, at, principal) => {
    const pin = await store.repin(tool, principal, at);
    await store.setApproval({ tool, principal, decision: 'approved', at, by: 'cli' });
    io.stdout.write(`approved ${tool} for ${who(principal)}\n`);
    if (pin) io.stdout.write(`re-pinned ${tool} for ${who(principal)} to its changed definition (sha256 ${pin.hash.slice(0, 12)}…); it runs again\n`);
    else if (!(await store.getPin(tool, principal))) io.stdout.write(`note: ${noPinNote(tool)}\n`);
    const denied = denyingRule(config, tool, principal);
    if (denied) io.stdout.write(`note: ${denied} still denies ${tool}${principal === EVERY_PRINCIPAL ? '' : ` for ${principal}`}: an approval does not override a deny; change the rule to let it run\n`);
  });
}

/** Whether the broker has seen `tool`: an upstream listed it (the store; none when there is no store yet), or it is ours. */
async function isKnownTool(config: LoadedConfig, store: Store | undefined, tool: string, importModule?: ModuleImporter): Promise<boolean> {
  if (tool === RECONNECT_TOOL || tool === APPROVALS_LIST_TOOL || tool === APPROVALS_DECIDE_TOOL || ESTATE_TOOL_NAMES.includes(tool)) return true;
  if (store && (await store.getSeen(tool))) return true;
  if (store && (await store.listPins()).some((p) => p.tool === tool)) return true;
  if (!config.functions.length) return false;
  const [{ loadFunctionModules }, { Scrubber }] = await Promise.all([import('../router/modules.js'), import('../shared/scrub.js')]);
  // A module's load error is scrubbed whole before it is cut and printed (as serve prints it).
  const scrubber = new Scrubber(config.secrets);
  return (await loadFunctionModules(config.functions, importModule, (text) => scrubber.text(text))).some((t) => t.name === tool);
}

/** The first `policy.rules` entry that denies `tool` to `principal` (to someone, for every principal), named as in refusals. */
function denyingRule(config: LoadedConfig, tool: string, principal: string): string | undefined {
  const policy = compilePolicy(config.policy);
  const principals = principal === EVERY_PRINCIPAL ? ['local', ...Object.keys(config.principals)] : [principal];
  for (const p of principals) {
    const { action, source, ground } = policy.action(tool, p);
    if (action === 'deny' && ground === 'rule') return source;
  }
  return undefined;
}

export async function revokeCommand(config: LoadedConfig, tool: string, options: DecisionOptions, io: CommandIo): Promise<number> {
  return withStore(config, tool, options, io, undefined, async (store, at, principal) => {
    await store.setApproval({ tool, principal, decision: 'revoked', at, by: 'cli' });
    const forgotten = await store.clearUses(tool, principal);
    io.stdout.write(`revoked ${tool} for ${who(principal)}: it needs approval again before it runs\n`);
    if (forgotten) io.stdout.write(`forgot ${forgotten} first use${forgotten === 1 ? '' : 's'}\n`);
  });
}

/**
 * Checks `tool` and the principal, then runs `act` on the store (`options.store`, else the SQLite
 * store in `broker.dataDir`, created when missing). With `refuse`, that runs first on the store
 * as it is (undefined when there is no store file: none is created for it); an exit code it
 * returns ends the command there, before any store is created.
 */
async function withStore(
  config: LoadedConfig,
  tool: string,
  options: DecisionOptions,
  io: CommandIo,
  refuse: ((store: Store | undefined) => Promise<number | undefined>) | undefined,
  act: (store: Store, at: string, principal: string) => Promise<void | number>,
): Promise<number> {
  if (!NAME_PATTERN.test(tool)) {
    io.stderr.write(`mcp-broker: ${JSON.stringify(tool)} is not an advertised tool name (${NAME_PATTERN.source})\n`);
    return EXIT_USAGE;
  }
  const principal = options.principal ?? EVERY_PRINCIPAL;
  if (principal !== EVERY_PRINCIPAL && principal !== 'local' && !(principal in config.principals)) {
    io.stderr.write(`mcp-broker: unknown principal ${JSON.stringify(principal)}: expected "local" or one of principals in the config\n`);
    return EXIT_USAGE;
  }
  const { dataDir } = config.broker;
  let store = options.store ?? (refuse ? SqliteStore.openIfPresent(dataDir) : SqliteStore.open(dataDir));
  try {
    const refused = await refuse?.(store);
    if (refused !== undefined) return refused;
    store ??= SqliteStore.open(dataDir);
    return (await act(store, new Date(options.now ?? Date.now()).toISOString(), principal)) ?? EXIT_OK;
  } finally {
    if (!options.store) await store?.close();
  }
}

/**
 * Why `tool` has no pin. Only upstream tools are pinned: the broker's own tools (`broker__*`,
 * `estate__*`) and function tools (servers.json `functions`) ship with their definition and
 * never are, so the approval alone applies to them.
 */
function noPinNote(tool: string): string {
  const builtin = RESERVED_SERVER_NAMES.find((r) => tool.toLowerCase().startsWith(`${r}__`));
  if (builtin) return `${tool} is one of the broker's own tools (${builtin}__*); these are never pinned, so the approval is all it needs`;
  return `${tool} has no pin: the broker pins an upstream tool when it first lists it; a function tool (servers.json "functions") is never pinned, so for one the approval is all it needs`;
}

function who(principal: string): string {
  return principal === EVERY_PRINCIPAL ? 'every principal' : `principal "${principal}"`;
}
