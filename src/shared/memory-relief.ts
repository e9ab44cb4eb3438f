/**
 * Gives back the memory large results leave behind (issue 6: proxy RSS after the run).
 *
 * A large result passes through the broker as several transient copies (the line's bytes, its
 * text, the parsed value): tens of MiB of garbage for an 8 MiB result. V8 collects garbage only
 * when more is allocated, so a broker that goes quiet after a burst of large results keeps them
 * resident indefinitely. {@link MemoryRelief.noteLarge} schedules one full collection for when
 * no large result has been seen for `quietMs`; a burst is collected once, after it.
 *
 * The collection is V8's memory-reducing one where V8 has it (`gc({type: 'major', execution:
 * 'sync', flavor: 'last-resort'})`, V8 12 and later: Node 22, 24): besides the old generation it
 * shrinks the young generation back to its least size and returns the freed pages. Node 24's V8
 * grows the young generation under a burst of allocation that survives (to 128 MiB in a script;
 * Node 20's stopped at 32) and a plain full collection leaves it there. It is several full
 * collections in a row, so a call arriving during it waits (the slowest small call through it
 * 9–23 ms on a 2-vCPU VM): it runs once per burst of large results, after `quietMs` without one.
 * On V8 11 (Node 20) the options form collects only the young generation, as `gc(true)` does,
 * so there relief calls `gc()` without options: one full collection.
 *
 * The collector is V8's `gc` (made available once through `--expose-gc` for a fresh context, the
 * flag then switched off again); where that is not possible, relief does nothing.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** Results at least this large (JSON bytes) leave enough garbage to collect: 1 MiB. */
export const LARGE_RESULT_BYTES = 1024 * 1024;
/** Quiet time after the last large result before collecting, in ms. */
export const RELIEF_QUIET_MS = 200;

/** What the relief asks of V8's `gc` where V8 reads its options: see the module comment. */
export const RELIEF_GC_OPTIONS = { type: 'major', execution: 'sync', flavor: 'last-resort' } as const;

/** Whether this V8 reads `gc`'s options (V8 12 and later); V8 11 collects only the young generation for them. */
export const V8_READS_GC_OPTIONS = Number(process.versions.v8.split('.')[0]) >= 12;

type Collector = (options?: typeof RELIEF_GC_OPTIONS) => void;

let collector: Collector | null | undefined;

function gc(): Collector | null {
  if (collector === undefined) {
    try {
      setFlagsFromString('--expose-gc');
      collector = runInNewContext('gc') as Collector;
    } catch {
      collector = null;
    } finally {
      setFlagsFromString('--no-expose-gc');
    }
  }
  return typeof collector === 'function' ? collector : null;
}

export class MemoryRelief {
  private timer?: NodeJS.Timeout;

  /**
   * @param quietMs time without a large result before collecting (default {@link RELIEF_QUIET_MS}).
   * @param onCollected told after each collection how long it took, in ms (the pause a call arriving during it waited).
   */
  constructor(
    private readonly quietMs = RELIEF_QUIET_MS,
    private readonly onCollected?: (ms: number) => void,
  ) {}

  /** A result of `bytes` was answered; large ones schedule a collection after the quiet time. */
  noteLarge(bytes: number): void {
    if (bytes < LARGE_RESULT_BYTES) return;
    if (this.timer) this.timer.refresh();
    else {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        const collect = gc();
        if (!collect) return;
        const start = performance.now();
        if (V8_READS_GC_OPTIONS) collect(RELIEF_GC_OPTIONS);
        else collect();
        this.onCollected?.(performance.now() - start);
      }, this.quietMs);
      this.timer.unref();
    }
  }

  /** Cancels a pending collection. */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
