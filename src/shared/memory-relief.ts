/**
 * Gives back the memory large results leave behind (issue 6: proxy RSS after the run).
 *
 * A large result passes through the broker as several transient copies (the line's bytes, its
 * text, the parsed value): tens of MiB of garbage for an 8 MiB result. V8 collects garbage only
 * when more is allocated, so a broker that goes quiet after a burst of large results keeps them
 * resident indefinitely. {@link MemoryRelief.noteLarge} schedules one full collection for when
 * no large result has been seen for `quietMs`; a burst is collected once, after it.
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

let collector: (() => void) | null | undefined;

function gc(): (() => void) | null {
  if (collector === undefined) {
    try {
      setFlagsFromString('--expose-gc');
      collector = runInNewContext('gc') as () => void;
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

  constructor(private readonly quietMs = RELIEF_QUIET_MS) {}

  /** A result of `bytes` was answered; large ones schedule a collection after the quiet time. */
  noteLarge(bytes: number): void {
    if (bytes < LARGE_RESULT_BYTES) return;
    if (this.timer) this.timer.refresh();
    else {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        gc()?.();
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
