/**
 * Whether the process's stdout, the downstream client of stdio serving, is congested: more
 * than `broker.maxPendingOutputBytes` written and not yet taken by the client. Set by the stdio
 * server (`transports/stdio-server.ts`); while it is, stdio upstreams' answers are not read
 * (`upstream/child-transport.ts`), so they wait in the upstreams' pipes instead of our memory.
 * Process-wide because stdout is: there is one per process.
 */
import { EventEmitter } from 'node:events';

/** A congestion flag with a `change` event (`(congested: boolean) => void`). */
export class OutputPressure extends EventEmitter<{ change: [congested: boolean] }> {
  private state = false;

  constructor() {
    super();
    // One listener per live stdio upstream child (every stdio upstream, and each principal's
    // child of an isolated one): more than ten is a normal gateway, not a leak to warn about.
    this.setMaxListeners(0);
  }

  /** Whether the output is congested now. */
  get congested(): boolean {
    return this.state;
  }

  /** Sets the flag; emits `change` when it changes. */
  set(congested: boolean): void {
    if (congested === this.state) return;
    this.state = congested;
    this.emit('change', congested);
  }
}

/** The process's stdout. */
export const stdoutPressure = new OutputPressure();
