import { describe, expect, it } from 'vitest';
import { RecordPublisher } from '../../src/audit/publisher.js';
import { publishStage } from '../../src/broker/publish.js';
import { compose, type Stage } from '../../src/broker/runner.js';
import type { CallRecord } from '../../src/broker/types.js';
import { silentLogger } from '../../src/shared/logger.js';
import { call, fakeInvoke, session, target } from './support.js';

const writtenRecord: Stage = {
  name: 'record',
  async run(c, next) {
    await next();
    c.record = { callId: c.callId, outcome: c.outcome } as CallRecord;
  },
};

describe('publish stage', () => {
  it('hands every written record to subscribers and to the session at level debug', async () => {
    const publisher = new RecordPublisher<CallRecord>(silentLogger());
    const got: CallRecord[] = [];
    publisher.subscribe((r) => void got.push(r));
    const logged: Array<[string, unknown]> = [];
    const run = compose([publishStage({ publisher }), writtenRecord, fakeInvoke()]);
    const c = call({ target: target(), session: session({ log: (level, data) => void logged.push([level, data]) }) });
    await run(c);
    expect(got).toEqual([c.record]);
    expect(logged).toEqual([['debug', c.record]]);
  });

  it("a subscriber's error, sync or async, and a failing notification never reach the call", async () => {
    const publisher = new RecordPublisher<CallRecord>(silentLogger());
    publisher.subscribe(() => {
      throw new Error('sync boom');
    });
    publisher.subscribe(async () => Promise.reject(new Error('async boom')));
    const run = compose([publishStage({ publisher, logger: silentLogger() }), writtenRecord, fakeInvoke()]);
    const c = call({ target: target(), session: session({ log: () => { throw new Error('closed'); } }) });
    await run(c);
    expect(c.outcome).toBe('ok');
  });

  it('publishes nothing when no record was written', async () => {
    const publisher = new RecordPublisher<CallRecord>();
    let n = 0;
    publisher.subscribe(() => void n++);
    const run = compose([publishStage({ publisher }), fakeInvoke()]);
    await run(call({ target: target() }));
    expect(n).toBe(0);
  });
});
