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
 * sent), so refused calls do not spend and concurrent calls cannot overshoot (only an inverse
 * can, below). Retries are one call.
 * The call is given back to the window it was taken from: once that window has renewed, nothing
 * (it was never counted in the new one).
 *
 * A flow's inverse (`request.flow.phase === "rollback"`) is never refused, so a flow that ran out
 * of budget can still roll back what landed; but it spends a call like any other (the caller
 * names an inverse's tool and arguments, so an uncharged inverse was a free call of any tool per
 * charged step). Past the limit it is charged all the same ({@link BudgetLedger.charge}): the unit
 * is left over its budget, and once it was sent the one-time `budget_exhausted` warning is given
 * if it was not yet. An inverse never sent is given back as any call is (charged and given back,
 * never given back without being charged). So a unit with a budget of N makes at
 * most N invoked calls plus the inverses of calls it was charged within those N (as many as a
 * result's rollback descriptors list: the upstream's count, not ours): a nested flow run
 * as an inverse is charged and never refused, but its steps are steps, refused past the limit.
 *
 * A session's unit lasts as long as its session (released when it ends). A sessionless unit
 * (`CallerSession.sessionless`: the admin API's `api:<principal>`, a modern request's
 * `modern:<principal>[/<key>]`) has no such end, so its budget
 * is per window instead: `windowMs` (`broker.budgetWindowMs`, default `DEFAULT_BUDGET_WINDOW_MS`)
 * from its first call, after which it renews in full and its one-time warnings may be given
 * again. No unit locks its principal out for good (DESIGN.md "Units without sessions").
 */
import { DEFAULT_BUDGET_WINDOW_MS } from '../config/schema.js';
import { ConfigError } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import { SETTLED, splitStage, type Stage } from './runner.js';
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

/** Calls spent per unit. In memory: a unit lives as long as its session, or its window. */
export class BudgetLedger {
  private readonly spent = new Map<string, number>();
  /**
   * Each unit's current tally: a new id whenever its window renews or the unit is released, so
   * a call's refund reaches only the tally it was charged to, never a renewed window's.
   */
  private readonly tallies = new Map<string, number>();
  private lastTally = 0;
  /** One-time warnings already given, per unit. */
  private readonly flags = new Map<string, Set<string>>();
  /** When each windowed unit's current window ends (ms since the epoch), in the order the windows began. */
  private readonly windowEnds = new Map<string, number>();
  /** The earliest time a window in {@link windowEnds} may have ended: {@link renew} sweeps from then on. */
  private sweepAt = Infinity;

  /**
   * Starts `unit`'s window at `now` if it has none, or renews it (spent and warnings forgotten)
   * when its window ended by `now`. Returns when the current window ends, in ms since the epoch.
   * Only for sessionless units; a session's unit never calls it.
   */
  renew(unit: string, now: number, windowMs: number): number {
    if (now >= this.sweepAt) this.sweep(now);
    const end = this.windowEnds.get(unit);
    if (end !== undefined && now < end) return end;
    this.release(unit);
    this.windowEnds.set(unit, now + windowMs);
    if (now + windowMs < this.sweepAt) this.sweepAt = now + windowMs;
    return now + windowMs;
  }

  /**
   * Forgets the windowed units whose window ended by `now`: their next call would renew them in
   * full anyway, and a unit that calls no more (a modern caller names any number of unit keys)
   * must not stay in memory for good. Windows are kept in the order they began, so with one
   * `windowMs` they end in that order and the sweep stops at the first still open (after a
   * reload changed `broker.budgetWindowMs`, an ended one may wait for those before it).
   */
  private sweep(now: number): void {
    this.sweepAt = Infinity;
    for (const [unit, end] of this.windowEnds) {
      if (end > now) {
        this.sweepAt = end;
        return;
      }
      this.release(unit);
    }
  }

  /** True the first time `flag` is raised for `unit` (until the unit is released). */
  flag(unit: string, flag: 'warned' | 'exhausted'): boolean {
    let set = this.flags.get(unit);
    if (!set) this.flags.set(unit, (set = new Set()));
    if (set.has(flag)) return false;
    set.add(flag);
    return true;
  }

  /**
   * Takes one call from `unit` if it has any left under `limit`: the tally it was taken from, to
   * hand to {@link refund}, or undefined when none was left.
   */
  reserve(unit: string, limit: number): number | undefined {
    if ((this.spent.get(unit) ?? 0) >= limit) return undefined;
    return this.charge(unit);
  }

  /**
   * Takes one call from `unit` whatever it has left, past its limit if need be (a flow's inverse,
   * which is never refused): the tally it was taken from, to hand to {@link refund}.
   */
  charge(unit: string): number {
    this.spent.set(unit, (this.spent.get(unit) ?? 0) + 1);
    let tally = this.tallies.get(unit);
    if (tally === undefined) this.tallies.set(unit, (tally = ++this.lastTally));
    return tally;
  }

  /**
   * Gives back a call that was reserved (from `tally`, what {@link reserve} or {@link charge} answered) and not
   * invoked. Nothing when the unit's tally has changed since (its window renewed, or the unit was
   * released): the call was never counted in the new one.
   */
  refund(unit: string, tally: number): void {
    if (!this.holds(unit, tally)) return;
    const used = this.spent.get(unit) ?? 0;
    if (used <= 1) this.spent.delete(unit);
    else this.spent.set(unit, used - 1);
  }

  /** Whether `tally` (what {@link reserve} or {@link charge} answered) is still `unit`'s current one. */
  holds(unit: string, tally: number): boolean {
    return this.tallies.get(unit) === tally;
  }

  /** Calls `unit` has spent (more than its limit once a flow's inverse ran past it). */
  used(unit: string): number {
    return this.spent.get(unit) ?? 0;
  }

  /** Every live unit that has spent a call, with the calls spent (a windowed unit until its window ended and another unit's call swept it). */
  entries(): { unit: string; used: number }[] {
    return [...this.spent].map(([unit, used]) => ({ unit, used }));
  }

  /** Forgets a unit (its session ended, or its window did). */
  release(unit: string): void {
    this.spent.delete(unit);
    this.flags.delete(unit);
    this.windowEnds.delete(unit);
    this.tallies.delete(unit);
  }
}

export interface BudgetDeps {
  /** The budget of the call's unit, in invoked calls, or `"unlimited"`. */
  limitFor(call: BrokerCall): Budget;
  ledger?: BudgetLedger;
  /**
   * Window of a sessionless unit's budget, in ms (`broker.budgetWindowMs`); default
   * `DEFAULT_BUDGET_WINDOW_MS` (config/schema.ts).
   */
  windowMs?: number;
  /** The time, in ms since the epoch, for windows; default `Date.now`. */
  now?: () => number;
  /** Gets the one-time warnings (near the limit, at the limit); default none. */
  logger?: Pick<Logger, 'warn'>;
}

/** What a refusal tells the caller to change: every setting that raises the limit, in precedence order. */
const RAISE_HINT =
  'raise principals.<name>.budgetPerUnit, MCP_BROKER_CALL_BUDGET or broker.budgetPerUnit ("unlimited" for no limit)';

export function budgetStage(deps: BudgetDeps): Stage & { readonly ledger: BudgetLedger } {
  const ledger = deps.ledger ?? new BudgetLedger();
  const windowMs = deps.windowMs ?? DEFAULT_BUDGET_WINDOW_MS;
  const now = deps.now ?? Date.now;
  const stage = splitStage<Ticket>(
    'budget',
    (call) => {
      const unit = call.session.unit;
      const limit = deps.limitFor(call);
      if (limit === 'unlimited') return NOTHING_RESERVED;
      const at = call.session.sessionless ? now() : undefined;
      const windowEnd = at === undefined ? undefined : ledger.renew(unit, at, windowMs);
      // A flow's inverse is never refused (a flow that ran out must still undo what landed), but
      // it spends like any call: the caller names its tool, so a free inverse was a free call of any tool.
      if (call.request.flow?.phase === 'rollback') {
        const reserved = { unit, tally: ledger.charge(unit) };
        // Past the limit: warned of once it was sent (leave), as one never sent is given back.
        if (ledger.used(unit) > limit) return { reserved, past: { limit, windowEnd, at } };
        warnIfLow(call, unit, limit);
        return { reserved };
      }
      const tally = ledger.reserve(unit, limit);
      if (tally === undefined) {
        const spent = spentText(unit, limit, windowMs, windowEnd, at);
        if (ledger.flag(unit, 'exhausted')) {
          deps.logger?.warn({ unit, principal: call.session.principal, limit, event: 'budget_exhausted' }, `${spent}; ${RAISE_HINT}`);
        }
        refuse(call, 'budget_exhausted', `${spent}; ${RAISE_HINT}`);
        return SETTLED;
      }
      warnIfLow(call, unit, limit);
      return { reserved: { unit, tally } };
    },
    // A call that sent nothing upstream gives its reservation back, to the window it was taken from.
    (call, { reserved, past }) => {
      if (reserved === undefined) return;
      if (call.attempts === 0) {
        ledger.refund(reserved.unit, reserved.tally);
        return;
      }
      // An inverse sent past the limit: the unit has run out, whether or not a call was refused yet
      // (unless its window renewed meanwhile: the new one has not).
      if (past !== undefined && ledger.holds(reserved.unit, reserved.tally) && ledger.flag(reserved.unit, 'exhausted')) {
        const used = ledger.used(reserved.unit);
        deps.logger?.warn(
          { unit: reserved.unit, principal: call.session.principal, used, limit: past.limit, event: 'budget_exhausted' },
          `${spentText(reserved.unit, past.limit, windowMs, past.windowEnd, past.at)}: a flow's inverse ran past it (a rollback is never refused); ${RAISE_HINT}`,
        );
      }
    },
  );
  return Object.assign(stage, { ledger });

  /** Logs the one-time warning once `unit` has spent {@link BUDGET_WARN_SHARE} of `limit`, and not all of it. */
  function warnIfLow(call: BrokerCall, unit: string, limit: number): void {
    const used = ledger.used(unit);
    if (used >= Math.ceil(limit * BUDGET_WARN_SHARE) && used < limit && ledger.flag(unit, 'warned')) {
      deps.logger?.warn(
        { unit, principal: call.session.principal, used, limit, event: 'budget_low' },
        `unit "${unit}" has spent ${used} of its ${limit} calls; ${RAISE_HINT}`,
      );
    }
  }
}

/**
 * The budget stage's ticket: the call reserved (absent when it was not charged), and, for an
 * inverse charged past the limit, what its `budget_exhausted` warning names (the limit, and a
 * sessionless unit's window end and the time it was charged, ms since the epoch).
 */
interface Ticket {
  reserved?: { unit: string; tally: number };
  past?: { limit: number; windowEnd: number | undefined; at: number | undefined };
}

/** How a unit that has spent its budget is described (refusal and warning): a sessionless unit's says when its window renews. */
function spentText(unit: string, limit: number, windowMs: number, windowEnd: number | undefined, at: number | undefined): string {
  return windowEnd === undefined || at === undefined
    ? `unit "${unit}" has spent its budget of ${limit} calls`
    : `unit "${unit}" has spent its budget of ${limit} calls per ${windowMs} ms; it renews in ${windowEnd - at} ms`;
}

/** The budget stage's ticket when the call was not charged. */
const NOTHING_RESERVED: Ticket = {};
