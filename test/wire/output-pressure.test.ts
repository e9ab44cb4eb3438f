import { describe, expect, it } from 'vitest';
import { OutputPressure } from '../../src/wire/output-pressure.js';

describe('OutputPressure', () => {
  it('one change listener per stdio upstream child: a gateway with more than ten children gets no listener-leak warning, and each hears the flag', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const pressure = new OutputPressure();
      const heard: boolean[][] = Array.from({ length: 24 }, () => []);
      for (const log of heard) pressure.on('change', (congested) => log.push(congested));
      pressure.set(true);
      pressure.set(true); // no change, no event
      pressure.set(false);
      await new Promise((r) => setImmediate(r)); // a warning is emitted on the next tick
      expect(heard.every((log) => log.join() === 'true,false')).toBe(true);
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
