/**
 * The owner gate of one upstream connection: lets the calls of one owner (a downstream caller)
 * be in flight at a time, so that an upstream→client request (`sampling/createMessage`,
 * `elicitation/create`, `roots/list`) that carries no link to the call that caused it (a stdio
 * or SSE upstream; connection.ts) can only belong to that owner.
 *
 * - Calls of the owner holding the gate run concurrently.
 * - A call of another owner waits, first come first served, until every call in flight has
 *   ended; then its owner holds the gate (with the calls of that owner queued right behind it).
 * - Once another owner waits, new calls of the holder queue behind it too, so no owner starves.
 * - A waiting call stays abortable: when its signal aborts it leaves the queue and
 *   {@link OwnerGate.enter} rejects with the signal's reason; nothing was let through for it.
 *
 * The gate knows nothing of time: each caller bounds its own wait with its signal (the call's
 * deadline, a cancel, shutdown). Owned by one `McpUpstream`, for all its dials.
 *
 * As p-limit warns of its slots: a holder that waits for a call of its own made after another
 * owner queued (say, a client that answers the upstream's sampling request only once another call
 * it made to the same upstream has answered) waits until that call's deadline; the gate does not
 * let a holder's new call overtake a waiting owner.
 */
import type { CancelSignal } from '../shared/cancel.js';

/** Ends one call's turn at the gate; calling it again does nothing. */
export type GateRelease = () => void;

interface Waiter {
  readonly owner: string;
  readonly admit: (release: GateRelease) => void;
}

export class OwnerGate {
  private holder: string | undefined;
  /** Calls of {@link holder} let through and not released yet. */
  private active = 0;
  private readonly queue: Waiter[] = [];

  /** The owner whose calls may be in flight now; undefined while the gate is free. */
  get current(): string | undefined {
    return this.holder;
  }

  /** Calls waiting their turn. */
  get waiting(): number {
    return this.queue.length;
  }

  /**
   * Lets a call of `owner` through at once when it may go without waiting (the gate is free, or
   * `owner` holds it and nobody waits): resolves nothing, costs no turn of the event loop.
   * @returns the call's release, or undefined when it would have to wait ({@link enter})
   */
  tryEnter(owner: string): GateRelease | undefined {
    if (this.queue.length > 0) return undefined;
    if (this.holder !== undefined && this.holder !== owner) return undefined;
    this.holder = owner;
    this.active++;
    return this.releaser();
  }

  /**
   * Waits for the turn of a call of `owner`; resolves with its release, to call once the call
   * has ended (answered, failed or abandoned). Rejects with `signal.reason` when `signal` aborts
   * before the turn came (at once when it is aborted already); the call then holds nothing.
   */
  enter(owner: string, signal?: CancelSignal): Promise<GateRelease> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const now = this.tryEnter(owner);
    if (now) return Promise.resolve(now);
    return new Promise<GateRelease>((resolve, reject) => {
      const onAbort = () => {
        const at = this.queue.indexOf(waiter);
        if (at >= 0) this.queue.splice(at, 1);
        // The holder's own calls may have queued behind the one that left.
        this.pump();
        reject(signal!.reason);
      };
      const waiter: Waiter = {
        owner,
        admit: (release) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(release);
        },
      };
      this.queue.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  private releaser(): GateRelease {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.active > 0) return;
      this.holder = undefined;
      this.pump();
    };
  }

  /** Lets through the waiters at the head of the queue that may go now (a free gate goes to the first). */
  private pump(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      if (this.holder === undefined) this.holder = head.owner;
      else if (head.owner !== this.holder) return;
      this.queue.shift();
      this.active++;
      head.admit(this.releaser());
    }
  }
}
