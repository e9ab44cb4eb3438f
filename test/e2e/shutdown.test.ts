/**
 * Shutdown with calls in flight: every judged call still gets its answer and its one record
 * (DESIGN.md "Contract"), whether the broker is stopped by SIGTERM, SIGINT or stdin EOF.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { fixture, nodeServer, readNdjson, startBroker, waitFor, type StartedBroker } from './helpers.js';

describe('shutdown with a call in flight', () => {
  let broker: StartedBroker | undefined;
  afterEach(async () => broker?.close());

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal}: the call is answered "cancelled" and recorded before the broker exits`, async () => {
      broker = await startBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) } });
      const { recordsPath, pid } = broker;
      let progressed = false;
      const pending = broker.client.callTool({ name: 'echo__slow', arguments: { ms: 30_000, tickMs: 50 } }, {
        onprogress: () => void (progressed = true),
        timeout: 20_000,
      });
      await waitFor(() => progressed, 'the slow call to be in flight');
      process.kill(pid!, signal);
      const result = await pending;
      expect(result.isError).toBe(true);
      expect(result._meta?.['mcp-broker/outcome']).toBe('cancelled');
      expect(JSON.stringify(result.content)).toContain('shutting down');
      const records = await waitFor(() => {
        const found = readNdjson(recordsPath).filter((r) => r.name === 'echo__slow');
        return found.length ? found : undefined;
      }, 'the record of the cancelled call');
      expect(records).toHaveLength(1);
      expect(records[0]).toMatchObject({ outcome: 'cancelled', status: 499, attempts: 1 });
    });
  }
});
