import { describe, expect, it } from 'vitest';
import { BudgetLedger, budgetFromEnv, budgetStage } from '../../src/broker/budget.js';
import { compose, type Stage } from '../../src/broker/runner.js';
import { ManualClock } from '../../src/shared/clock.js';
import { refuse } from '../../src/broker/types.js';
import { call, fakeInvoke, session, target } from './support.js';

describe('budget stage', () => {
  it('allows budgetPerUnit invoked calls per unit, then budget_exhausted', async () => {
    const invoke = fakeInvoke();
    const run = compose([budgetStage({ limitFor: () => 2 }), invoke]);
    const outcomes: string[] = [];
    for (let i = 0; i < 3; i++) {
      const c = call({ target: target() });
      await run(c);
      outcomes.push(c.outcome!);
    }
    expect(outcomes).toEqual(['ok', 'ok', 'budget_exhausted']);
    expect(invoke.reached).toBe(2);
    // Another unit has its own budget.
    const other = call({ target: target(), session: session({ unit: 's-2' }) });
    await run(other);
    expect(other.outcome).toBe('ok');
  });

  it('refused calls do not spend (a stage inside refuses before invoke)', async () => {
    const ledger = new BudgetLedger();
    let open = true;
    const breakerLike: Stage = { name: 'breaker', run: async (c, next) => (open ? refuse(c, 'breaker_open', 'open') : next()) };
    const run = compose([budgetStage({ limitFor: () => 1, ledger }), breakerLike, fakeInvoke()]);
    for (let i = 0; i < 5; i++) await run(call({ target: target() }));
    expect(ledger.used('s-1')).toBe(0);
    open = false;
    const c = call({ target: target() });
    await run(c);
    expect(c.outcome).toBe('ok');
    expect(ledger.used('s-1')).toBe(1);
  });

  it('a call that failed upstream still spent its budget; retries are one call', async () => {
    const ledger = new BudgetLedger();
    const run = compose([budgetStage({ limitFor: () => 5, ledger }), fakeInvoke((c) => {
      c.attempts += 2;
      refuse(c, 'upstream_error', 'x');
    })]);
    await run(call({ target: target() }));
    expect(ledger.used('s-1')).toBe(1);
  });

  it('concurrent calls cannot overshoot the budget', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const invoke = fakeInvoke(async (c) => {
      await gate;
      c.outcome = 'ok';
    });
    const run = compose([budgetStage({ limitFor: () => 3 }), invoke]);
    const calls = Array.from({ length: 6 }, () => call({ target: target() }));
    const pending = calls.map((c) => run(c));
    release();
    await Promise.all(pending);
    expect(calls.filter((c) => c.outcome === 'ok')).toHaveLength(3);
    expect(calls.filter((c) => c.outcome === 'budget_exhausted')).toHaveLength(3);
  });

  it('"unlimited" never refuses and spends nothing (issue 18 §1)', async () => {
    const ledger = new BudgetLedger();
    const run = compose([budgetStage({ limitFor: () => 'unlimited', ledger }), fakeInvoke()]);
    for (let i = 0; i < 500; i++) {
      const c = call({ target: target() });
      await run(c);
      expect(c.outcome).toBe('ok');
    }
    expect(ledger.used('s-1')).toBe(0);
  });

  it('warns once near the limit and once at it; the refusal names the settings that raise it (issue 18 §1)', async () => {
    const warnings: { obj: Record<string, unknown>; msg: string }[] = [];
    const logger = { warn: (obj: Record<string, unknown>, msg: string) => void warnings.push({ obj, msg }) };
    const run = compose([budgetStage({ limitFor: () => 10, logger: logger as never }), fakeInvoke()]);
    const outcomes: string[] = [];
    let last: ReturnType<typeof call> | undefined;
    for (let i = 0; i < 12; i++) {
      last = call({ target: target() });
      await run(last);
      outcomes.push(last.outcome!);
    }
    expect(outcomes.filter((o) => o === 'ok')).toHaveLength(10);
    expect(warnings.map((w) => w.obj.event)).toEqual(['budget_low', 'budget_exhausted']);
    expect(warnings[0]!.obj).toMatchObject({ used: 8, limit: 10 });
    expect(last!.reason).toMatch(/budgetPerUnit.*MCP_BROKER_CALL_BUDGET.*"unlimited"/);
  });

  it("a flow's inverse is never refused yet spends a call, past the limit if need be; one never sent gives back only what it took", async () => {
    const warnings: { obj: Record<string, unknown>; msg: string }[] = [];
    const logger = { warn: (obj: Record<string, unknown>, msg: string) => void warnings.push({ obj, msg }) };
    const ledger = new BudgetLedger();
    let send = true;
    const invoke = fakeInvoke((c) => {
      if (!send) c.attempts = 0;
      c.outcome = send ? 'ok' : 'invalid_arguments';
    });
    const run = compose([budgetStage({ limitFor: () => 2, ledger, logger: logger as never }), invoke]);
    const inverse = () => call({ target: target(), request: { flow: { id: 'f-1', step: 'a', phase: 'rollback' } } });
    const first = inverse();
    await run(first);
    expect([first.outcome, ledger.used('s-1')]).toEqual(['ok', 1]);
    await run(call({ target: target() }));
    expect(ledger.used('s-1')).toBe(2);
    // At the limit: a step is refused, an inverse runs and leaves the unit past it (warned of once).
    const step = call({ target: target(), request: { flow: { id: 'f-1', step: 'b' } } });
    await run(step);
    expect(step.outcome).toBe('budget_exhausted');
    const past = inverse();
    await run(past);
    expect([past.outcome, ledger.used('s-1')]).toEqual(['ok', 3]);
    // One never sent (refused inside, attempts 0) takes nothing and gives back nothing.
    send = false;
    const unsent = inverse();
    await run(unsent);
    expect([unsent.outcome, ledger.used('s-1')]).toEqual(['invalid_arguments', 3]);
    expect(warnings.map((w) => w.obj.event)).toEqual(['budget_exhausted']);
  });

  it('an inverse sent past the limit before any refusal gives the one-time budget_exhausted warning; one never sent does not', async () => {
    const warnings: { obj: Record<string, unknown>; msg: string }[] = [];
    const logger = { warn: (obj: Record<string, unknown>, msg: string) => void warnings.push({ obj, msg }) };
    const ledger = new BudgetLedger();
    let send = true;
    const run = compose([
      budgetStage({ limitFor: () => 1, ledger, logger: logger as never }),
      fakeInvoke((c) => {
        if (!send) c.attempts = 0;
        c.outcome = send ? 'ok' : 'invalid_arguments';
      }),
    ]);
    const inverse = () => call({ target: target(), request: { flow: { id: 'f-1', step: 'a', phase: 'rollback' } } });
    await run(call({ target: target() }));
    // At the limit, an inverse never sent: charged and given back, so nothing ran past it.
    send = false;
    await run(inverse());
    expect(warnings).toEqual([]);
    expect(ledger.used('s-1')).toBe(1);
    send = true;
    await run(inverse());
    expect(ledger.used('s-1')).toBe(2);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.obj).toMatchObject({ event: 'budget_exhausted', used: 2, limit: 1 });
    expect(warnings[0]!.msg).toMatch(/has spent its budget of 1 calls: a flow's inverse ran past it .*MCP_BROKER_CALL_BUDGET/);
    // The refusal after it is not warned of again.
    const refused = call({ target: target() });
    await run(refused);
    expect(refused.outcome).toBe('budget_exhausted');
    expect(warnings).toHaveLength(1);
  });

  it('a budget of 0 refuses every call', async () => {
    const run = compose([budgetStage({ limitFor: () => 0 }), fakeInvoke()]);
    const c = call({ target: target() });
    await run(c);
    expect(c.outcome).toBe('budget_exhausted');
  });

  it('issue 13 §4: a sessionless unit (api:<principal>) renews its budget when its window ends, never locked out for good', async () => {
    const clock = new ManualClock();
    const ledger = new BudgetLedger();
    const run = compose([budgetStage({ limitFor: () => 2, ledger, windowMs: 60_000, now: () => clock.now() }), fakeInvoke()]);
    const api = session({ unit: 'api:alice', principal: 'alice', sessionless: true });
    const outcomes = async (n: number) => {
      const out: string[] = [];
      for (let i = 0; i < n; i++) {
        const c = call({ target: target(), session: api });
        await run(c);
        out.push(c.outcome!);
      }
      return out;
    };
    expect(await outcomes(3)).toEqual(['ok', 'ok', 'budget_exhausted']);
    await clock.advance(59_999);
    const refused = call({ target: target(), session: api });
    await run(refused);
    expect(refused.outcome).toBe('budget_exhausted');
    expect(refused.reason).toMatch(/per 60000 ms; it renews in 1 ms/);
    await clock.advance(1);
    expect(await outcomes(3)).toEqual(['ok', 'ok', 'budget_exhausted']);
    // A session's unit has no window: its budget lasts as long as the session.
    const run2 = compose([budgetStage({ limitFor: () => 1, windowMs: 60_000, now: () => clock.now() }), fakeInvoke()]);
    const first = call({ target: target() });
    await run2(first);
    await clock.advance(120_000);
    const second = call({ target: target() });
    await run2(second);
    expect([first.outcome, second.outcome]).toEqual(['ok', 'budget_exhausted']);
  });
});

describe('budget ledger', () => {
  it('forgets sessionless units whose window ended, so unit keys a caller stops using do not pile up', async () => {
    const clock = new ManualClock();
    const ledger = new BudgetLedger();
    const run = compose([budgetStage({ limitFor: () => 2, ledger, windowMs: 60_000, now: () => clock.now() }), fakeInvoke()]);
    const spend = async (unit: string) => {
      const c = call({ target: target(), session: session({ unit, principal: 'alice', sessionless: true }) });
      await run(c);
      return c.outcome;
    };
    for (let i = 0; i < 1_000; i++) expect(await spend(`modern:alice/k${i}`)).toBe('ok');
    await clock.advance(30_000);
    expect(await spend('modern:alice/late')).toBe('ok');
    expect(ledger.entries()).toHaveLength(1_001);
    // Once their windows ended, the next call of any unit lets them go; the one still open stays.
    await clock.advance(30_000);
    expect(await spend('modern:alice/next')).toBe('ok');
    expect(ledger.entries().map((e) => e.unit).sort()).toEqual(['modern:alice/late', 'modern:alice/next']);
    // A forgotten unit calling again starts a fresh window, as a renewal would.
    expect([await spend('modern:alice/k0'), await spend('modern:alice/k0'), await spend('modern:alice/k0')]).toEqual(['ok', 'ok', 'budget_exhausted']);
  });
});

describe('budgetFromEnv', () => {
  it('reads MCP_BROKER_CALL_BUDGET; unset or empty is undefined; garbage is a config error', () => {
    expect(budgetFromEnv({ MCP_BROKER_CALL_BUDGET: '7' })).toBe(7);
    expect(budgetFromEnv({ MCP_BROKER_CALL_BUDGET: '0' })).toBe(0);
    expect(budgetFromEnv({ MCP_BROKER_CALL_BUDGET: 'unlimited' })).toBe('unlimited');
    expect(budgetFromEnv({ MCP_BROKER_CALL_BUDGET: 'Unlimited ' })).toBe('unlimited');
    expect(budgetFromEnv({})).toBeUndefined();
    expect(budgetFromEnv({ MCP_BROKER_CALL_BUDGET: ' ' })).toBeUndefined();
    expect(() => budgetFromEnv({ MCP_BROKER_CALL_BUDGET: 'lots' })).toThrow(expect.objectContaining({ code: 'config_invalid' }));
    expect(() => budgetFromEnv({ MCP_BROKER_CALL_BUDGET: '-1' })).toThrow(/MCP_BROKER_CALL_BUDGET/);
  });
});
