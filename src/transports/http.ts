/**
 * Streamable HTTP and legacy SSE serving (issue 5). Not built yet: `--transport http` exits 2
 * saying so, so nobody mistakes it for a working face.
 */
import type { Gateway } from '../gateway.js';
import { ConfigError } from '../shared/errors.js';

export async function serveHttp(_gateway: Gateway, _options: { host: string; port: number }): Promise<void> {
  throw new ConfigError('--transport', 'http is not available in this build yet');
}
