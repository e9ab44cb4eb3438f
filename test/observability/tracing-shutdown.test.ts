/**
 * A collector that accepts the connection and never answers must not hold up the broker's exit:
 * `Gateway.stop()` gives the last export `TRACE_SHUTDOWN_TIMEOUT_MS`, then drops what is left.
 * The collector is a real loopback HTTP server that reads the export and never responds.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { CallerSession } from '../../src/broker/types.js';
import { parseConfig } from '../../src/config/load.js';
import { Gateway, otlpTracer } from '../../src/gateway.js';
import { TRACE_SHUTDOWN_TIMEOUT_MS } from '../../src/observability/tracing.js';
import { silentLogger } from '../../src/shared/logger.js';

const caller: CallerSession = { sessionId: 's', principal: 'local', unit: 'u', isLive: () => true };

describe('trace export at shutdown', () => {
  let dir: string;
  let collector: Server;
  afterEach(async () => {
    collector?.closeAllConnections();
    await new Promise((resolve) => collector?.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  it('a collector that never answers delays stop() by at most the shutdown bound', async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-trace-stop-'));
    let exports = 0;
    let received!: () => void;
    const exported = new Promise<void>((resolve) => (received = resolve));
    collector = createServer((req) => {
      exports++;
      req.resume();
      req.on('end', received); // and never answer
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}/v1/traces`;
    const config = parseConfig({ estate: { enabled: false }, broker: { dataDir: join(dir, 'data'), records: { path: join(dir, 'calls.ndjson') } }, observability: { otlp: { endpoint, exportDelayMs: 600_000 } } }, { baseDir: dir });
    const gateway = new Gateway(config, { logger: silentLogger(), tracer: await otlpTracer(config) });
    await gateway.start();
    expect((await gateway.broker.call({ name: 'no_such_tool', args: {}, signal: new AbortController().signal }, caller)).outcome).toBe('unregistered');
    const started = performance.now();
    const stopping = gateway.stop();
    await exported; // the last batch went out at shutdown, to a collector that holds it
    await stopping;
    expect(exports).toBe(1);
    expect(performance.now() - started).toBeLessThan(TRACE_SHUTDOWN_TIMEOUT_MS + 3000);
  });
});
