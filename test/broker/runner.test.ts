/** The runner's contract (src/broker/runner.ts): order in and out, one error boundary, `next()` rules. */
import { describe, expect, it } from 'vitest';
import { compose, type Stage } from '../../src/broker/runner.js';
import { call } from './support.js';

/** A stage that logs its way in and out around `next()`. */
function logged(name: string, log: string[]): Stage {
  return {
    name,
    async run(_call, next) {
      log.push(`${name} in`);
      await next();
      log.push(`${name} out`);
    },
  };
}

describe('compose', () => {
  it('runs the way in outermost first and the way out innermost first', async () => {
    const log: string[] = [];
    const c = call();
    await compose([logged('a', log), logged('b', log), { name: 'end', run: async (x) => void (x.outcome = 'ok') }])(c);
    expect(log).toEqual(['a in', 'b in', 'b out', 'a out']);
    expect(c.outcome).toBe('ok');
  });

  it('a stage that does not call next() settles the call: nothing inside it runs', async () => {
    const log: string[] = [];
    const c = call();
    await compose([logged('a', log), { name: 'deny', run: async (x) => void (x.outcome = 'denied') }, logged('never', log)])(c);
    expect(log).toEqual(['a in', 'a out']);
    expect(c.outcome).toBe('denied');
  });

  it.each([
    ['rejects', async () => Promise.reject(new Error('gone'))],
    [
      'throws before returning a promise',
      () => {
        throw new Error('gone');
      },
    ],
  ])('a stage that %s is guard_error naming it; the stages around it still finish, and run never rejects', async (_what, run) => {
    const log: string[] = [];
    const c = call();
    await expect(compose([logged('a', log), { name: 'store', run: run as Stage['run'] }, logged('never', log)])(c)).resolves.toBeUndefined();
    expect(log).toEqual(['a in', 'a out']);
    expect(c.outcome).toBe('guard_error');
    expect(c.reason).toBe('store failed: gone');
  });

  it('next() again while the first is running rejects (and so fails the stage); again after it returned runs the inner stages again', async () => {
    let inner = 0;
    const twice: Stage = {
      name: 'twice',
      async run(_c, next) {
        const first = next();
        await expect(next()).rejects.toThrow('stage "twice" called next() while it was still running');
        await first;
        await next();
      },
    };
    const c = call();
    await compose([twice, { name: 'end', run: async () => void inner++ }])(c);
    expect(inner).toBe(2);
    expect(c.outcome).toBeUndefined();
  });
});
