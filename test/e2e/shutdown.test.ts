/**
 * Shutdown with calls in flight: every judged call still gets its answer and its one record
 * (DESIGN.md "Contract"), whether the broker is stopped by SIGTERM, SIGINT or stdin EOF.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { callsOf, fixtureEvents } from './broker-support.js';
import { fixture, nodeServer, readNdjson, spawnRawBroker, startBroker, waitFor, type RawBroker, type StartedBroker } from './helpers.js';

const tmp = mkdtempSync(join(tmpdir(), 'mcp-broker-shutdown-e2e-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

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

describe('issue 17 §2: stdin closed with requests pending', () => {
  let b: RawBroker | undefined;
  afterEach(async () => b?.close());

  const lines = (call: object) =>
    [
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'pipe', version: '1' } } },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      { jsonrpc: '2.0', id: 3, method: 'tools/call', params: call },
    ]
      .map((l) => JSON.stringify(l))
      .join('\n') + '\n';

  /** A one-shot pipe: everything written at once, stdin ended right after. */
  function oneShot(extra: Record<string, unknown>, call: object) {
    b = spawnRawBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) }, extra });
    b.child.stdin!.end(lines(call));
    return b;
  }

  it('a one-shot pipe got only initialize answered; now every request is answered, the call recorded ok, then exit 0', async () => {
    const broker = oneShot({}, { name: 'echo__echo', arguments: { text: 'piped', delayMs: 500 } });
    expect(await broker.exited).toBe(0);
    const answered = (id: number) => broker.messages.find((m) => m.id === id && ('result' in m || 'error' in m)) as Record<string, any> | undefined;
    expect(answered(1)?.result?.serverInfo?.name).toBe('mcp-broker');
    expect(answered(2)?.result?.tools?.map((t: { name: string }) => t.name)).toContain('echo__echo');
    expect(answered(3)?.result?.content?.[0]?.text).toBe('piped');
    expect(answered(3)?.result?._meta?.['mcp-broker/outcome']).toBe('ok');
    const records = readNdjson(broker.recordsPath).filter((r) => r.name === 'echo__echo');
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ outcome: 'ok', status: 200 });
  }, 40_000);

  it('an answer to a message the drain never counted ({"id": 3} with no method, an oversize line under id 3) no longer frees call 3: it is answered and recorded ok at EOF', async () => {
    for (const stray of ['{"jsonrpc":"2.0","id":3}', `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo__echo","arguments":{"text":"${'x'.repeat(5000)}"}}}`]) {
      const log = join(tmp, `stray-${stray.length}.log`);
      const broker = (b = spawnRawBroker({
        servers: { echo: nodeServer(fixture('echo.mjs'), { inheritEnv: ['FIXTURE_LOG'] }) },
        extra: { broker: { drainTimeoutMs: 30_000, maxMessageBytes: 4096 } },
        env: { FIXTURE_LOG: log },
      }));
      broker.child.stdin!.write(lines({ name: 'echo__slow', arguments: { ms: 1000 } }));
      await waitFor(() => callsOf(log, 'slow') === 1, 'the slow call running upstream');
      broker.child.stdin!.end(stray + '\n');
      expect(await broker.exited).toBe(0);
      const answers = broker.messages.filter((m) => m.id === 3) as Array<Record<string, any>>;
      // The stray line's own -32600, and the call's answer.
      expect(answers.map((a) => a.error?.code ?? a.result?._meta?.['mcp-broker/outcome'])).toEqual([-32600, 'ok']);
      const records = readNdjson(broker.recordsPath).filter((r) => r.name === 'echo__slow');
      expect(records.map((r) => r.outcome)).toEqual(['ok']);
      await b.close();
      b = undefined;
    }
  }, 60_000);

  it('a call still running at broker.drainTimeoutMs is cancelled, answered and recorded with the drain as its reason, then exit 0', async () => {
    // The same pipe, ended once the call runs upstream: the drain window starts at the end of
    // input, and on a slow machine the upstream may still be starting 1.5 s after the spawn.
    const log = join(tmp, 'drain.log');
    const broker = (b = spawnRawBroker({
      servers: { echo: nodeServer(fixture('echo.mjs'), { inheritEnv: ['FIXTURE_LOG'] }) },
      extra: { broker: { drainTimeoutMs: 1500 } },
      env: { FIXTURE_LOG: log },
    }));
    broker.child.stdin!.write(lines({ name: 'echo__slow', arguments: { ms: 60_000 } }));
    await waitFor(() => callsOf(log, 'slow') === 1, 'the slow call running upstream');
    broker.child.stdin!.end();
    expect(await broker.exited).toBe(0);
    const answer = broker.messages.find((m) => m.id === 3) as Record<string, any> | undefined;
    expect(answer?.result?._meta?.['mcp-broker/outcome']).toBe('cancelled');
    expect(JSON.stringify(answer?.result?.content)).toContain('drainTimeoutMs');
    const records = readNdjson(broker.recordsPath).filter((r) => r.name === 'echo__slow');
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ outcome: 'cancelled', status: 499 });
    expect(records[0]!.reason).toContain('drainTimeoutMs (1500 ms)');
  }, 40_000);

  it('a resources/read still waiting on its upstream at broker.drainTimeoutMs is cancelled and recorded so, with the drain as its reason, not answered -32603 and recorded "cancelled by the client"', async () => {
    const log = join(tmp, 'drain-read.log');
    const broker = (b = spawnRawBroker({
      servers: { slow: nodeServer(fixture('slow-read.mjs'), { inheritEnv: ['FIXTURE_LOG'] }) },
      extra: { broker: { drainTimeoutMs: 1500 } },
      env: { FIXTURE_LOG: log },
    }));
    broker.child.stdin!.write(lines({ uri: 'slow://doc' }).replace('"tools/call"', '"resources/read"'));
    await waitFor(() => fixtureEvents(log).some((e) => e.event === 'read'), 'the read waiting on the upstream');
    broker.child.stdin!.end();
    expect(await broker.exited).toBe(0);
    const answers = broker.messages.filter((m) => m.id === 3) as Array<Record<string, any>>;
    expect(answers).toHaveLength(1);
    expect(answers[0]!.error?.data?.['mcp-broker/outcome']).toBe('cancelled');
    expect(answers[0]!.error?.message).toContain('drainTimeoutMs (1500 ms)');
    const records = readNdjson(broker.recordsPath).filter((r) => r.kind === 'resource');
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ outcome: 'cancelled', status: 499, attempts: 1, callId: answers[0]!.error.data['mcp-broker/callId'] });
    expect(records[0]!.reason).toContain('drainTimeoutMs (1500 ms)');
  }, 40_000);
});
