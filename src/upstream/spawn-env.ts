/**
 * The environment a stdio upstream is started with (case F19).
 *
 * A child gets the variables named in `broker.env.inherit` (default
 * {@link DEFAULT_INHERITED_ENV}: the login basics, locale, proxy and CA settings) plus the
 * server's own `inheritEnv` names, then its configured `env`, which wins. Nothing else of our
 * environment leaks: a child never sees `process.env` whole. The default list lives with the
 * other defaults, in the config schema.
 */
export { DEFAULT_INHERITED_ENV } from '../config/schema.js';

/** Builds a child's environment: inherited names present in `source`, then `env` on top. */
export function childEnv(
  inherit: readonly string[],
  env: Readonly<Record<string, string>>,
  source: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of inherit) {
    const value = source[name];
    if (value !== undefined && !value.startsWith('()')) out[name] = value;
  }
  return Object.assign(out, env);
}
