/**
 * The budget stage (seed 002_7bce204a86c1c7ba.txt step 4; issues 3 §2 and 18 §1): at most a
 * number of invoked calls per unit (a stdio session is one unit; an HTTP session or the admin
 * API's `api:<principal>` another). The limit is the principal's `budgetPerUnit`, else
 * `MCP_BROKER_CALL_BUDGET`, else `broker.budgetPerUnit` (default `DEFAULT_BUDGET_PER_UNIT` in
 * `config/schema.ts`); `"unlimited"` means no limit. Past it → `budget_exhausted`, with a reason
 * naming the settings that raise it. A warning is logged once per unit when it has spent
 * {@link BUDGET_WARN_SHARE} of its budget, and once when it runs out.
 *
 * A call reserves one unit of budget on the way in and gives it back on the way out when it was
 * never invoked (`call.attempts === 0`, which counts only attempts that were sent: refused by
 * the breaker, cancelled before invoke, or refused by invoke or the router before anything was
 * sent), so refused calls do not spend and concurrent calls cannot overshoot. Retries are one call.
 */
import { ConfigError } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import type { Stage } from './runner.js';
import { refuse, type BrokerCall } from './types.js';

/** The environment variable that overrides `broker.budgetPerUnit`. */
export const BUDGET_ENV = 'MCP_BROKER_CALL_BUDGET';

/** Share of a unit's budget spent at which a warning is logged (once per unit). */
export const BUDGET_WARN_SHARE = 0.8;

/** A unit's budget in invoked calls; `"unlimited"` for none. */
export type Budget = number | 'unlimited';

/**
 * `MCP_BROKER_CALL_BUDGET` as a budget (a non-negative integer, or `unlimited`), or `undefined`
 * when unset or empty. Throws {@link ConfigError} (exit 2) for anything else.
 */
export function budgetFromEnv(env: NodeJS.ProcessEnv = process.env): Budget | undefined {
  const raw = env[BUDGET_ENV]?.trim();
  if (raw === undefined || raw === '') return undefined;
  if (raw.toLowerCase() === 'unlimited') return 'unlimited';
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new ConfigError(BUDGET_ENV, `must be a non-negative integer or "unlimited" (got ${JSON.stringify(raw)})`);
  }
  return n;
}

/** Calls spent per unit. In memory: a unit lives as long as its session. */
export class BudgetLedger {
  private readonly spent = new Map<string, number>();
  /** One-time warnings already given, per unit. */
  private readonly flags = new Map<string, Set<string>>();

  /** True the first time `flag` is raised for `unit` (until the unit is released). */
  flag(unit: string, flag: 'warned' | 'exhausted'): boolean {
    let set = this.flags.get(unit);
    if (!set) this.flags.set(unit, (set = new Set()));
    if (set.has(flag)) return false;
    set.add(flag);
    return true;
  }

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

  /** Every live unit that has spent a call, with the calls spent. */
  entries(): { unit: string; used: number }[] {
    return [...this.spent].map(([unit, used]) => ({ unit, used }));
  }

  /** Forgets a unit (its session ended). */
  release(unit: string): void {
    this.spent.delete(unit);
    this.flags.delete(unit);
  }
}

export interface BudgetDeps {
  /** The budget of the call's unit, in invoked calls, or `"unlimited"`. */
  limitFor(call: BrokerCall): Budget;
  ledger?: BudgetLedger;
  /** Gets the one-time warnings (near the limit, at the limit); default none. */
  logger?: Pick<Logger, 'warn'>;
}

/** What a refusal tells the caller to change: every setting that raises the limit, in precedence order. */
const RAISE_HINT =
  'raise principals.<name>.budgetPerUnit, MCP_BROKER_CALL_BUDGET or broker.budgetPerUnit ("unlimited" for no limit)';

export function budgetStage(deps: BudgetDeps): Stage & { readonly ledger: BudgetLedger } {
  const ledger = deps.ledger ?? new BudgetLedger();
  return {
    name: 'budget',
    ledger,
    async run(call, next) {
      const unit = call.session.unit;
      const limit = deps.limitFor(call);
      if (limit === 'unlimited') return next();
      if (!ledger.reserve(unit, limit)) {
        if (ledger.flag(unit, 'exhausted')) {
          deps.logger?.warn({ unit, principal: call.session.principal, limit, event: 'budget_exhausted' }, `unit "${unit}" has spent its budget of ${limit} calls; ${RAISE_HINT}`);
        }
        return refuse(call, 'budget_exhausted', `unit "${unit}" has spent its budget of ${limit} calls; ${RAISE_HINT}`);
      }
      const used = ledger.used(unit);
      if (used >= Math.ceil(limit * BUDGET_WARN_SHARE) && used < limit && ledger.flag(unit, 'warned')) {
        deps.logger?.warn(
          { unit, principal: call.session.principal, used, limit, event: 'budget_low' },
          `unit "${unit}" has spent ${used} of its ${limit} calls; ${RAISE_HINT}`,
        );
      }
      try {
        await next();
      } finally {
        if (call.attempts === 0) ledger.refund(unit);
      }
    },
  };
}
