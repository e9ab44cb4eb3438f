/**
 * Tool pinning on sight (issue 3 §1, rug-pull protection): each time the roster is rebuilt,
 * every upstream tool's definition hash is compared with its pin in the {@link Store}. A tool
 * seen for the first time is pinned; a changed one is remembered as pending (the judge then
 * refuses it `unregistered`, reason `changed`, until `mcp-broker approve` moves the pin).
 * Never throws: a store failure is logged, and the judge checks the pin again on every call.
 */
import type { Clock } from '../shared/clock.js';
import { messageOf } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import type { Store } from '../store/store.js';
import type { Roster } from '../upstream/roster.js';

export async function pinRoster(store: Store, roster: Roster, clock: Clock, logger: Logger): Promise<void> {
  const at = new Date(clock.now()).toISOString();
  for (const tool of roster.tools.values()) {
    try {
      const state = await store.observePin(tool.name, tool.hash, at);
      if (state === 'changed') logger.warn({ tool: tool.name, upstream: tool.server }, 'tool definition changed since it was pinned; refused until approved');
    } catch (err) {
      logger.error({ tool: tool.name, err: messageOf(err) }, 'tool pin could not be checked');
      return;
    }
  }
}
