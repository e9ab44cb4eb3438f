/**
 * The environment a stdio upstream is started with (case F19).
 *
 * A child gets the variables named in `broker.env.inherit` (default
 * {@link DEFAULT_INHERITED_ENV}: the login basics, locale, proxy and CA settings) plus the
 * server's own `inheritEnv` names, then its configured `env`, which wins. Nothing else of our
 * environment leaks: a child never sees `process.env` whole. The default list lives with the
 * config's defaults (`config/constants.ts`).
 */
import type { StdioServerConfig } from '../config/schema.js';
import { envValue } from '../shared/env.js';
import type { ChildSpawnSpec } from './child-transport.js';

export { DEFAULT_INHERITED_ENV } from '../config/constants.js';

/** Builds a child's environment: inherited names present in `source`, then `env` on top. */
export function childEnv(
  inherit: readonly string[],
  env: Readonly<Record<string, string>>,
  source: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of inherit) {
    const value = envValue(source, name);
    if (value !== undefined && !value.startsWith('()')) out[name] = value;
  }
  return Object.assign(out, env);
}

/**
 * How a stdio server is started: `node` is this very Node (`nodePath`, default
 * `process.execPath`); the environment as {@link childEnv} builds it.
 */
export function stdioSpawnSpec(
  config: Pick<StdioServerConfig, 'command' | 'args' | 'cwd' | 'env' | 'inheritEnv'>,
  inheritEnv: readonly string[],
  nodePath = process.execPath,
): ChildSpawnSpec {
  return {
    command: config.command === 'node' ? nodePath : config.command,
    args: config.args,
    cwd: config.cwd,
    env: childEnv([...inheritEnv, ...config.inheritEnv], config.env),
  };
}
