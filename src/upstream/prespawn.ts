/**
 * Cold start (issue 6): the stdio upstreams' processes are started before the broker has loaded
 * the rest of itself, so they boot on the other core meanwhile; their first dial adopts them
 * (`prespawnChild` in `child-transport.ts`). `early-spawn.ts` starts them from the raw `servers.json` before the
 * CLI's own modules load; {@link prespawnUpstreams} then settles them against the validated
 * config. Nothing is said to them before their dial, so they still get `initialize` with the
 * capabilities the downstream client declared.
 */
import type { LoadedConfig } from '../config/load.js';
import { serverKind, type StdioServerConfig } from '../config/schema.js';
import { settleParked, type ChildSpawnSpec } from './child-transport.js';
import { stdioSpawnSpec } from './spawn-env.js';

/**
 * Has every enabled stdio upstream of `config` started now (their first dials adopt them): keeps
 * the children the early start began with the same spawn spec, starts the rest, and ends any
 * early child this config does not start.
 */
export function prespawnUpstreams(config: LoadedConfig): void {
  const specs: ChildSpawnSpec[] = [];
  for (const server of Object.values(config.mcpServers)) {
    if (serverKind(server) !== 'stdio' || server.disabled) continue;
    specs.push(stdioSpawnSpec(server as StdioServerConfig, config.broker.env.inherit));
  }
  settleParked(specs);
}
