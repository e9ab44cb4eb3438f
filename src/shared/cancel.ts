/**
 * A call's cancellation without an `AbortSignal` of its own until something asks for one
 * (issue 19).
 *
 * Every `tools/call` is cancellable (downstream `notifications/cancelled`, the deadline,
 * shutdown), so each had an `AbortController`, and the upstream request added and removed an
 * `abort` listener on its signal. On Node 20 that is several microseconds a call: the signal is
 * built through `createAbortSignal`, which gives each one three fresh V8 hidden classes (old
 * space garbage), and `EventTarget` listeners are kept in a linked list of wrapper objects. A
 * {@link Cancellation} is the controller and the signal in one plain object: the broker's own
 * code reads it through {@link CancelSignal}, and a real `AbortSignal` is made only when code
 * that needs one (a function tool's handler, the SDK, `fetch`) reads {@link Cancellation.signal}.
 *
 * Behaviour matches `AbortController` (model test against one): `abort()` once (later calls,
 * a listener's included, do nothing), the reason defaults to a `DOMException` named `AbortError`,
 * listeners run in the order they were added, each once, one removed by an earlier listener does
 * not run, and one that throws does not stop the others (its error is thrown on the next tick, as
 * `EventTarget` does). Two differences, neither relied on: a listener added once the abort has
 * begun never runs, even when a listener adds it while the others run (the DOM standard's rule;
 * Node's `EventTarget` runs it unless the adding listener was the last); and where the real
 * signal was made, its listeners run before this one's. Inside any listener of either, both read
 * as aborted with the same reason.
 */

/**
 * What the broker's code reads of a cancellable call: a subset of `AbortSignal`, so a real
 * `AbortSignal` is one too. Listeners take no arguments (no `Event` is made).
 */
export interface CancelSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  throwIfAborted(): void;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** An `AbortController` and its signal in one object; the real `AbortSignal` is made on first read of {@link signal}. */
export class Cancellation implements CancelSignal {
  #aborted = false;
  #reason: unknown = undefined;
  /** Listeners not yet run, in the order added; `undefined` until the first is added. */
  #listeners: Array<() => void> | undefined = undefined;
  /** Made on the first read of {@link signal}. */
  #controller: AbortController | undefined = undefined;

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  throwIfAborted(): void {
    if (this.#aborted) throw this.#reason;
  }

  /** Runs `listener` once, on abort. `options` is accepted for `AbortSignal`'s shape: every listener here runs once. */
  addEventListener(_type: 'abort', listener: () => void, _options?: { once?: boolean }): void {
    // Added once the abort has begun, even by a listener while it runs: never runs (module doc).
    if (this.#aborted) return;
    const listeners = (this.#listeners ??= []);
    // As EventTarget: the same listener added twice runs once.
    if (!listeners.includes(listener)) listeners.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const listeners = this.#listeners;
    if (listeners === undefined) return;
    const at = listeners.indexOf(listener);
    if (at >= 0) listeners.splice(at, 1);
  }

  /**
   * Aborts with `reason` (default: a `DOMException` named `AbortError`); does nothing once
   * aborted. The real signal, if one was made, aborts first, then this one's listeners run: both
   * read as aborted, with the same reason, inside every listener.
   */
  abort(reason?: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason;
    this.#controller?.abort(this.#reason);
    const listeners = this.#listeners;
    if (listeners === undefined) return;
    // Taken off one at a time, so a listener removed by an earlier one does not run (as EventTarget).
    for (let listener = listeners.shift(); listener !== undefined; listener = listeners.shift()) {
      try {
        listener();
      } catch (err) {
        process.nextTick(() => {
          throw err;
        });
      }
    }
    this.#listeners = undefined;
  }

  /** A real `AbortSignal` that aborts with this, with the same reason; made on first read. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }
}

/** `signal` as a real `AbortSignal`, for code that needs one (the SDK, `fetch`, a function tool's context). */
export function toAbortSignal(signal: CancelSignal): AbortSignal {
  return signal instanceof Cancellation ? signal.signal : (signal as AbortSignal);
}

/**
 * A {@link Cancellation} that aborts when `source` does (at once when it already has), with
 * `source`'s reason, or `fallback()` when that is undefined. `detach` stops following: call it
 * once the work is over, so a long-lived `source` keeps nothing of it.
 */
export function cancellationFollowing(source: CancelSignal, fallback?: () => unknown): { own: Cancellation; detach: () => void } {
  const own = new Cancellation();
  const onAbort = () => own.abort(source.reason ?? fallback?.());
  if (source.aborted) {
    onAbort();
    return { own, detach: () => {} };
  }
  source.addEventListener('abort', onAbort, { once: true });
  return { own, detach: () => source.removeEventListener('abort', onAbort) };
}
