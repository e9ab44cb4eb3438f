/**
 * The budget stage (seed 002_7bce204a86c1c7ba.txt step 4; issue 3 §2): at most a number of
 * invoked calls per unit (a stdio session is one unit; an HTTP caller's unit later). The limit
 * is the principal's `budgetPerUnit`, else `MCP_BROKER_CALL_BUDGET`, else `broker.budgetPerUnit`
 * (default 200, `config/schema.ts`). Past it → `budget_exhausted`.
 *
 * A call reserves one unit of budget on the way in and gives it back on the way out when it was
 * never invoked (`call.attempts === 0`: refused by the breaker, cancelled before invoke), so
 * refused calls do not spend and concurrent calls cannot overshoot. Retries are one call.
 */
import { ConfigError } from '../shared/errors.js';
import type { Stage } from './runner.js';
import { refuse, type BrokerCall } from './types.js';

/** The environment variable that overrides `broker.budgetPerUnit`. */
export const BUDGET_ENV = 'MCP_BROKER_CALL_BUDGET';

/**
 * `MCP_BROKER_CALL_BUDGET` as a number, or `undefined` when unset or empty. Throws
 * {@link ConfigError} (exit 2) when it is not a non-negative integer.
 */
export function budgetFromEnv(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env[BUDGET_ENV]?.trim();
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) throw new ConfigError(BUDGET_ENV, `must be a non-negative integer (got ${JSON.stringify(raw)})`);
  return n;
}

/** Calls spent per unit. In memory: a unit lives as long as its session. */
export class BudgetLedger {
  private readonly spent = new Map<string, number>();

  /** Takes one call from `unit` if it has any left under `limit`. */
  reserve(unit: string, limit: number): boolean {
    const used = this.spent.get(unit) ?? 0;
    if (used >= limit) return false;
    this.spent.set(unit, used + 1);
    return true;
  }

  /** Gives back a call that was reserved and not invoked. */
  refund(unit: string): void {
    const used = this.spent.get(unit) ?? 0;
    if (used <= 1) this.spent.delete(unit);
    else this.spent.set(unit, used - 1);
  }

  /** Calls `unit` has spent. */
  used(unit: string): number {
    return this.spent.get(unit) ?? 0;
  }

  /** Forgets a unit (its session ended). */
  release(unit: string): void {
    this.spent.delete(unit);
  }
}

export interface BudgetDeps {
  /** The budget of the call's unit, in calls. */
  limitFor(call: BrokerCall): number;
  ledger?: BudgetLedger;
}

export function budgetStage(deps: BudgetDeps): Stage & { readonly ledger: BudgetLedger } {
  const ledger = deps.ledger ?? new BudgetLedger();
  return {
    name: 'budget',
    ledger,
    async run(call, next) {
      const unit = call.session.unit;
      const limit = deps.limitFor(call);
      if (!ledger.reserve(unit, limit)) {
        return refuse(call, 'budget_exhausted', `unit "${unit}" has spent its budget of ${limit} calls`);
      }
      try {
        await next();
      } finally {
        if (call.attempts === 0) ledger.refund(unit);
      }
    },
  };
}
