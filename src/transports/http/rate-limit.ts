/**
 * A sliding-window limit: at most `max` events per key in any `windowMs`. Time comes from the
 * injected clock. Keys with no event in the window are forgotten on the next check.
 */
import type { Clock } from '../../shared/clock.js';

export class SlidingWindowLimit {
  private readonly hits = new Map<string, number[]>();

  constructor(
    private readonly clock: Clock,
    private readonly max: number,
    private readonly windowMs: number,
  ) {}

  /** Counts one event for `key`; returns 0 when allowed, else the ms until one would be. */
  take(key: string): number {
    const now = this.clock.now();
    const recent = (this.hits.get(key) ?? []).filter((t) => now - t < this.windowMs);
    if (recent.length >= this.max) {
      this.hits.set(key, recent);
      return Math.max(1, recent[0]! + this.windowMs - now);
    }
    recent.push(now);
    this.hits.set(key, recent);
    for (const [k, times] of this.hits) if (k !== key && times.every((t) => now - t >= this.windowMs)) this.hits.delete(k);
    return 0;
  }
}
