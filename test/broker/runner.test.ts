/** The runner's contract (src/broker/runner.ts): order in and out, one error boundary, `next()` rules. */
import { describe, expect, it } from 'vitest';
import { compose, SETTLED, splitStage, type Stage } from '../../src/broker/runner.js';
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

  describe('split stages (enter / leave)', () => {
    /** A split stage that logs its halves; `ticket` tells leave what enter saw. */
    function split(name: string, log: string[], options: { settle?: boolean; throwIn?: boolean; throwOut?: boolean; later?: boolean } = {}): Stage {
      return splitStage(
        name,
        (c) => {
          log.push(`${name} in`);
          if (options.throwIn) throw new Error(`${name} broke`);
          if (options.settle) {
            c.outcome = 'denied';
            return SETTLED;
          }
          const ticket = { seen: name };
          return options.later ? Promise.resolve(ticket) : ticket;
        },
        (_c, ticket) => {
          log.push(`${name} out (${ticket.seen})`);
          if (options.throwOut) throw new Error(`${name} broke on the way out`);
        },
      );
    }

    it('keep the order in and out, hand each ticket from enter to its own leave, and mix with stages that call next()', async () => {
      const log: string[] = [];
      const c = call();
      await compose([split('a', log), logged('b', log), split('c', log, { later: true }), split('d', log), { name: 'end', run: async (x) => void (x.outcome = 'ok') }])(c);
      expect(log).toEqual(['a in', 'b in', 'c in', 'd in', 'd out (d)', 'c out (c)', 'b out', 'a out (a)']);
      expect(c.outcome).toBe('ok');
    });

    it('an enter that settles the call: nothing inside runs, nor its own leave; the stages outside still leave', async () => {
      const log: string[] = [];
      const c = call();
      await compose([split('a', log), split('gate', log, { settle: true }), split('never', log)])(c);
      expect(log).toEqual(['a in', 'gate in', 'a out (a)']);
      expect(c.outcome).toBe('denied');
    });

    it.each([
      ['enter', { throwIn: true }, ['a in', 'x in', 'a out (a)']],
      ['leave', { throwOut: true }, ['a in', 'x in', 'never in', 'never out (never)', 'x out (x)', 'a out (a)']],
    ] as const)('a throw in %s is guard_error naming the stage, at that stage; the stages around it still finish', async (_half, options, expected) => {
      const log: string[] = [];
      const c = call();
      await expect(compose([split('a', log), split('x', log, options), split('never', log)])(c)).resolves.toBeUndefined();
      expect(log).toEqual(expected);
      expect(c.outcome).toBe('guard_error');
      expect(c.reason).toMatch(/^x failed: x broke/);
    });

    it('inside a stage that calls next() twice (retry), the split stages run again each time', async () => {
      const log: string[] = [];
      const twice: Stage = {
        name: 'twice',
        async run(_c, next) {
          await next();
          await next();
        },
      };
      await compose([twice, split('in', log)])(call());
      expect(log).toEqual(['in in', 'in out (in)', 'in in', 'in out (in)']);
    });

    it('halves that answer at once reach the innermost stage in the same turn, through compose and through the derived run', async () => {
      let reached = false;
      const stages = [split('a', []), split('b', []), { name: 'end', run: async () => void (reached = true) }];
      const running = compose(stages)(call());
      expect(reached).toBe(true);
      await running;
      reached = false;
      const byHand = stages[0]!.run(call(), async () => void (reached = true));
      expect(reached).toBe(true);
      await byHand;
    });

    /** A split stage with `again`: asks for `rounds` more passes (later: each answer a promise); `throwAgain` throws when asked. */
    function repeating(name: string, log: string[], options: { rounds: number; later?: boolean; throwAgain?: boolean }): Stage {
      return splitStage(
        name,
        () => {
          log.push(`${name} in`);
          return { left: options.rounds };
        },
        (_c, ticket) => void log.push(`${name} out (${ticket.left} left)`),
        (_c, ticket) => {
          log.push(`${name} again?`);
          if (options.throwAgain) throw new Error(`${name} broke when asked`);
          const more = ticket.left-- > 0;
          return options.later ? Promise.resolve(more) : more;
        },
      );
    }

    it.each([false, true])('a stage whose again says true sends the call through the stages inside it once more, each entering and leaving, then leaves once (answers as promises: %s)', async (later) => {
      const log: string[] = [];
      const c = call();
      await compose([split('a', log), repeating('r', log, { rounds: 2, later }), split('in', log), { name: 'end', run: async (x) => void (x.outcome = 'ok') }])(c);
      expect(log).toEqual([
        'a in',
        'r in',
        'in in',
        'in out (in)',
        'r again?',
        'in in',
        'in out (in)',
        'r again?',
        'in in',
        'in out (in)',
        'r again?',
        'r out (-1 left)',
        'a out (a)',
      ]);
      expect(c.outcome).toBe('ok');
    });

    it('the same through the derived run, and through stages that call next() (a wrapper such as the tracer)', async () => {
      const log: string[] = [];
      let inner = 0;
      await repeating('r', log, { rounds: 1 }).run(call(), async () => void inner++);
      expect(inner).toBe(2);
      expect(log).toEqual(['r in', 'r again?', 'r again?', 'r out (-1 left)']);
      const wrapped: Stage[] = [repeating('r', [], { rounds: 2 }), split('in', log)].map((stage) => ({ name: stage.name, run: (x, next) => stage.run(x, next) }));
      log.length = 0;
      await compose(wrapped)(call());
      expect(log.filter((l) => l === 'in in')).toHaveLength(3);
    });

    it.each([
      ['compose', (stage: Stage, c: ReturnType<typeof call>) => compose([stage, { name: 'end', run: async () => undefined }])(c)],
      ['the derived run', (stage: Stage, c: ReturnType<typeof call>) => stage.run(c, async () => undefined)],
    ] as const)('a throw in again is guard_error naming the stage, and its leave still runs (%s)', async (_how, run) => {
      const log: string[] = [];
      const c = call();
      await run(repeating('r', log, { rounds: 1, throwAgain: true }), c);
      expect(log).toEqual(['r in', 'r again?', 'r out (1 left)']);
      expect(c.outcome).toBe('guard_error');
      expect(c.reason).toMatch(/^r failed: r broke when asked/);
    });

    it('the derived run(call, next) is enter, next(), leave; a settling enter never calls next()', async () => {
      const log: string[] = [];
      await split('s', log).run(call(), async () => void log.push('next'));
      await split('t', log, { settle: true }).run(call(), async () => void log.push('never'));
      expect(log).toEqual(['s in', 'next', 's out (s)', 't in']);
    });
  });
});
