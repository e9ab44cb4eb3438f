/**
 * In-process publication of every written call record (seed 002 step 9; issue 3 §9).
 * A subscriber's error, sync or async, never reaches the call: it is logged and dropped.
 */
import type { Logger } from '../shared/logger.js';

export type RecordSubscriber<T = object> = (record: T) => void | Promise<void>;

export class RecordPublisher<T = object> {
  private readonly subscribers = new Set<RecordSubscriber<T>>();

  constructor(private readonly logger?: Logger) {}

  /** Adds a subscriber; returns the function that removes it. */
  subscribe(subscriber: RecordSubscriber<T>): () => void {
    this.subscribers.add(subscriber);
    return () => this.subscribers.delete(subscriber);
  }

  /** Hands `record` to every subscriber; never throws. */
  publish(record: T): void {
    for (const subscriber of this.subscribers) {
      try {
        const pending = subscriber(record);
        if (pending && typeof (pending as Promise<void>).catch === 'function') {
          (pending as Promise<void>).catch((err) => this.logger?.warn({ err: String(err) }, 'record subscriber failed'));
        }
      } catch (err) {
        this.logger?.warn({ err: String(err) }, 'record subscriber failed');
      }
    }
  }
}
