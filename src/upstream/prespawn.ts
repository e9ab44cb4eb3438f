/**
 * Cold start (issue 6): the stdio upstreams' processes are started as soon as the config is
 * read, so they load while the broker loads the rest of itself; their first dial adopts them
 * ({@link prespawnChild}). Nothing is said to them before that dial, so they still get
 * `initialize` with the capabilities the downstream client declared.
 */
import type { LoadedConfig } from '../config/load.js';
import { serverKind, type StdioServerConfig } from '../config/schema.js';
import { prespawnChild, type ChildSpawnSpec } from './child-transport.js';
import { childEnv } from './spawn-env.js';

/** How a stdio server is started: `node` is this very Node (`nodePath`, default `process.execPath`). */
export function stdioSpawnSpec(config: StdioServerConfig, inheritEnv: readonly string[], nodePath = process.execPath): ChildSpawnSpec {
  return {
    command: config.command === 'node' ? nodePath : config.command,
    args: config.args,
    cwd: config.cwd,
    env: childEnv([...inheritEnv, ...config.inheritEnv], config.env),
  };
}

/** Starts every enabled stdio upstream of `config` now; their first dials adopt them. */
export function prespawnUpstreams(config: LoadedConfig): void {
  for (const server of Object.values(config.mcpServers)) {
    if (serverKind(server) !== 'stdio' || server.disabled) continue;
    prespawnChild(stdioSpawnSpec(server as StdioServerConfig, config.broker.env.inherit));
  }
}
