import { describe, expect, it } from 'vitest';
import { breakerStage, Breakers } from '../../src/broker/breaker.js';
import type { Outcome } from '../../src/broker/outcomes.js';
import { compose } from '../../src/broker/runner.js';
import { refuse } from '../../src/broker/types.js';
import { ManualClock } from '../../src/shared/clock.js';
import { call, fakeInvoke, target, text } from './support.js';

function setup(threshold = 3, openMs = 60_000) {
  const clock = new ManualClock();
  const breakers = new Breakers({ clock, threshold, openMs });
  let next: Outcome = 'upstream_error';
  const invoke = fakeInvoke((c) => {
    if (next === 'ok' || next === 'tool_error') {
      c.outcome = next;
      c.result = text('r');
    } else refuse(c, next, 'x');
  });
  const run = compose([breakerStage(breakers), invoke]);
  const once = async (outcome: Outcome, name = 'fx__echo') => {
    next = outcome;
    const c = call({ target: target(name) });
    await run(c);
    return c;
  };
  return { clock, breakers, invoke, once };
}

describe('breaker stage', () => {
  it('opens after threshold consecutive upstream failures, refusing without reaching the upstream', async () => {
    const { once, invoke } = setup(3);
    await once('upstream_error');
    await once('timeout');
    const third = await once('upstream_error');
    expect(third.notes.breaker).toBe('open');
    const refused = await once('ok');
    expect(refused.outcome).toBe('breaker_open');
    expect(refused.notes.breaker).toBe('open');
    expect(invoke.reached).toBe(3);
  });

  it('tool_error and invalid_arguments never open it, and break a run of failures', async () => {
    const { once } = setup(2);
    for (let i = 0; i < 5; i++) expect((await once('invalid_arguments')).notes.breaker).toBe('closed');
    for (let i = 0; i < 5; i++) expect((await once('tool_error')).notes.breaker).toBe('closed');
    await once('upstream_error');
    await once('ok');
    expect((await once('upstream_error')).notes.breaker).toBe('closed');
  });

  it('half-open after openMs: one trial; a failure reopens, a success closes', async () => {
    const { once, clock, invoke } = setup(2, 1000);
    await once('upstream_error');
    await once('upstream_error');
    expect((await once('ok')).outcome).toBe('breaker_open');
    await clock.advance(1000);
    // The trial fails: open again for openMs.
    const trial = await once('upstream_error');
    expect(invoke.reached).toBe(3);
    expect(trial.notes.breaker).toBe('open');
    expect((await once('ok')).outcome).toBe('breaker_open');
    await clock.advance(999);
    expect((await once('ok')).outcome).toBe('breaker_open');
    await clock.advance(1);
    const success = await once('ok');
    expect(success.outcome).toBe('ok');
    expect(success.notes.breaker).toBe('closed');
    expect((await once('ok')).outcome).toBe('ok');
  });

  it('half-open lets exactly one call through while the trial is in flight', async () => {
    const clock = new ManualClock();
    const breakers = new Breakers({ clock, threshold: 1, openMs: 100 });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let fail = true;
    const run = compose([
      breakerStage(breakers),
      fakeInvoke(async (c) => {
        if (fail) return refuse(c, 'upstream_error', 'x');
        await gate;
        c.outcome = 'ok';
      }),
    ]);
    await run(call({ target: target() }));
    fail = false;
    await clock.advance(100);
    const trial = call({ target: target() });
    const pending = run(trial);
    const other = call({ target: target() });
    await run(other);
    expect(other.outcome).toBe('breaker_open');
    expect(other.notes.breaker).toBe('half_open');
    release();
    await pending;
    expect(trial.outcome).toBe('ok');
    expect(breakers.state('fx__echo')).toBe('closed');
  });

  it('circuits are per tool', async () => {
    const { once } = setup(1);
    await once('upstream_error', 'fx__a');
    expect((await once('ok', 'fx__a')).outcome).toBe('breaker_open');
    expect((await once('ok', 'fx__b')).outcome).toBe('ok');
  });

  it('a trial that never reached the upstream gives its slot back', async () => {
    const clock = new ManualClock();
    const breakers = new Breakers({ clock, threshold: 1, openMs: 10 });
    breakers.settle('t', 'upstream_error', false);
    await clock.advance(10);
    expect(breakers.admit('t')).toEqual({ ok: true, trial: true });
    expect(breakers.admit('t')).toMatchObject({ ok: false, state: 'half_open' });
    breakers.abandon('t');
    expect(breakers.admit('t')).toEqual({ ok: true, trial: true });
  });
});
