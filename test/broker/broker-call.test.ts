import { describe, expect, it } from 'vitest';
import { Broker } from '../../src/broker/broker.js';
import { ManualClock } from '../../src/shared/clock.js';
import { session, target, text } from './support.js';

describe('Broker.call', () => {
  it('a throw escaping the path (here its settled hook) rejects the caller only: the call leaves the table and nothing goes unhandled', async () => {
    const downstream = new AbortController();
    const broker = new Broker([{ name: 'invoke', run: async (c) => void ((c.outcome = 'ok'), (c.result = text('ok'))) }], new ManualClock());
    broker.onSettled = () => Promise.reject(new Error('a bug after the path'));
    // vitest fails the file on an unhandled rejection: the broker's own bookkeeping of the call must not leave one.
    await expect(broker.call({ name: 'fx__t', args: {}, signal: downstream.signal }, session(), target('fx__t'))).rejects.toThrow('a bug after the path');
    // Its entry is gone (drain does not wait on it) and the downstream signal lost its listener (aborting it reaches nothing).
    await broker.drain(0);
    downstream.abort();
  });
});
