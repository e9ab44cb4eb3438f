/**
 * Tool pinning (rug-pull protection). A pin is a digest of every model-visible field of an
 * upstream tool's definition (`toolHash`) and the definition itself, kept in the {@link Store}
 * per principal: the default pin (the first definition seen, or the last one approved for every
 * principal) applies to everyone without a pin of their own (`mcp-broker approve --principal`).
 *
 * - {@link pinRoster}: each time the roster is rebuilt, every upstream tool is compared with its
 *   default pin; a tool seen for the first time is pinned, and a changed one is remembered as the
 *   tool's latest definition (what `mcp-broker approve` pins).
 * - {@link listAsPinned}: `tools/list` for one principal shows each upstream tool as pinned for
 *   that principal: the live definition when it matches the pin, else the pinned definition, or
 *   nothing when no pinned definition is stored. A changed description never reaches a model
 *   before it is approved. The judge refuses the calls (`unregistered`, reason `changed`).
 */
import type { Tool } from '@modelcontextprotocol/server';
import type { Clock } from '../shared/clock.js';
import { messageOf } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import { EVERY_PRINCIPAL, type Store } from '../store/store.js';
import type { Roster, RosterTool } from '../upstream/roster.js';

/** Observes every roster tool against its default pin. Never throws: a store failure is logged, and the judge checks the pin again on every call. */
export async function pinRoster(store: Store, roster: Roster, clock: Clock, logger: Logger): Promise<void> {
  const at = new Date(clock.now()).toISOString();
  for (const tool of roster.tools.values()) {
    try {
      const state = await store.observePin(tool.name, EVERY_PRINCIPAL, observed(tool), at);
      if (state === 'changed') logger.warn({ tool: tool.name, upstream: tool.server }, 'tool definition differs from its default pin; listed as pinned and refused until approved');
    } catch (err) {
      logger.error({ tool: tool.name, err: messageOf(err) }, 'tool pin could not be checked');
      return;
    }
  }
}

/** What {@link listAsPinned} needs. */
export interface ListAsPinnedDeps {
  store: Store;
  clock: Clock;
  /** The upstream roster tool listed under an advertised name, if any. */
  rosterTool(name: string): RosterTool | undefined;
  /**
   * A stored definition scrubbed with today's secrets (`UpstreamScrub.tool`): it was scrubbed
   * with the secrets known when it was pinned, and one added since (a reload, a restart with a
   * new `env` value) would otherwise be listed as the upstream sent it.
   */
  scrubTool(tool: Tool): Tool;
  logger?: Logger;
}

/**
 * The tools to list to `principal`, in order: the broker's own and function tools as they are;
 * each upstream tool (one whose listed definition is its roster tool's) as pinned for the
 * principal (see the file comment), a stored definition scrubbed again. A tool whose pin cannot
 * be read is withheld (fail closed) and the failure logged. A tool never pinned is pinned now, as
 * listed.
 */
export async function listAsPinned(tools: readonly Tool[], principal: string, deps: ListAsPinnedDeps): Promise<Tool[]> {
  const at = new Date(deps.clock.now()).toISOString();
  const out: Tool[] = [];
  for (const tool of tools) {
    const upstream = deps.rosterTool(tool.name);
    if (!upstream || upstream.definition !== tool) {
      out.push(tool);
      continue;
    }
    try {
      const state = await deps.store.observePin(tool.name, principal, observed(upstream), at);
      if (state !== 'changed') {
        out.push(tool);
        continue;
      }
      const pin = await deps.store.getPin(tool.name, principal);
      // A pin from store schema 1 has no definition to show: the tool is withheld.
      if (pin?.definition) out.push({ ...deps.scrubTool(pin.definition as Tool), name: tool.name });
    } catch (err) {
      deps.logger?.error({ tool: tool.name, err: messageOf(err) }, 'tool pin could not be read; the tool is withheld from tools/list');
    }
  }
  return out;
}

function observed(tool: RosterTool) {
  return { hash: tool.hash, definition: tool.definition, legacyHash: tool.legacyHash };
}
