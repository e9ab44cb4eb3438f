/**
 * The first step of serving HTTP, split from `serveHttp` (../http.ts) so that it runs before the
 * HTTP face's modules load (issue 19: cold start): the stdio upstreams, started by the bin,
 * boot while those load, and their handshakes begin as soon as the gateway can dial.
 */
import type { Gateway } from '../../gateway.js';
import { checkServeOptions } from './guards.js';

/**
 * Checks `--host` (a non-loopback address without `principals` throws `ConfigError` naming
 * `--host`: exit 2) and registers the same check for every later config reload, then starts the
 * gateway's upstreams, offering them `http.clientCapabilities`.
 * Returns the start: it settles once the first dial has (rejects as `Gateway.start` does, e.g.
 * on a roster collision); hand it to `serveHttp` as `started`.
 */
export function startHttpUpstreams(gateway: Gateway, options: { host: string }): Promise<void> {
  const config = gateway.config;
  checkServeOptions({ host: options.host, principalsConfigured: Object.keys(config.principals).length > 0 });
  // From now on, a reload too (the config is watched while the upstreams dial): it may not open a
  // non-loopback face by removing every principal.
  gateway.reloadChecks.push((next) => checkServeOptions({ host: options.host, principalsConfigured: Object.keys(next.principals).length > 0 }));
  return gateway.start({ clientCapabilities: config.http.clientCapabilities });
}
