/**
 * The gateway's metrics in-process (issue 20): a record that cannot be written is counted
 * `refused` (and, unpublished, is no call in `mcp_broker_calls_total`); one that is written is
 * counted with its call, an unknown name under the one label `?` (callers choose names). The sink is a real one whose appends fail, not a mock of the metrics.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RecordSink } from '../../src/audit/records.js';
import type { CallerSession } from '../../src/broker/types.js';
import { parseConfig } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway.js';
import { silentLogger } from '../../src/shared/logger.js';

/** A sink that writes into memory until `failing` is set. */
class SwitchableSink implements RecordSink {
  failing = false;
  readonly written: object[] = [];
  async append(record: object): Promise<void> {
    if (this.failing) throw new Error('disk full');
    this.written.push(record);
  }
  async close(): Promise<void> {}
}

const caller: CallerSession = { sessionId: 's', principal: 'local', unit: 'u', isLive: () => true };

describe('gateway metrics', () => {
  let dir: string;
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('counts records written and refused, and calls only when their record was written', async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-metrics-'));
    const records = new SwitchableSink();
    const gateway = new Gateway(parseConfig({ estate: { enabled: false }, broker: { dataDir: join(dir, 'data') } }, { baseDir: dir }), { logger: silentLogger(), records });
    await gateway.start();
    const call = () => gateway.broker.call({ name: 'no_such_tool', args: {}, signal: new AbortController().signal }, caller);
    expect((await call()).outcome).toBe('unregistered');
    records.failing = true;
    expect((await call()).outcome).toBe('unregistered'); // a refusal keeps its outcome
    const text = (await gateway.metrics.scrape()).body;
    expect(text).toContain('mcp_broker_records_total{result="written"} 1');
    expect(text).toContain('mcp_broker_records_total{result="refused"} 1');
    expect(text).toContain('mcp_broker_calls_total{outcome="unregistered",tool="?",principal="local",kind="tool"} 1');
    await gateway.stop();
  });
});
