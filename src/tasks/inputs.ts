/**
 * Input requests a running task is waiting on: an upstream's `elicitation/create`,
 * `sampling/createMessage` or `roots/list` made during a task's call, held here until the
 * task's caller answers it (2026-07-28 tasks extension, `tasks/get` `inputRequests` and
 * `tasks/update` `inputResponses`; SEP-2663 "Task Update Requests").
 *
 * In memory, in the process running the call: the upstream request it answers is held on this
 * process's connection anyway. Each key is minted once per task (`<kind>-<n>`) and never reused;
 * an answer for a key that is not outstanding is ignored. A request whose call ends (cancel,
 * deadline) is dropped with it.
 */
import { EventEmitter } from 'node:events';

/** One outstanding input request, as the extension lists it under its key. */
export interface TaskInputRequest {
  readonly method: string;
  readonly params?: Record<string, unknown>;
}

interface Pending {
  readonly request: TaskInputRequest;
  resolve(response: Record<string, unknown>): void;
}

const KIND: Record<string, string> = { 'elicitation/create': 'elicitation', 'sampling/createMessage': 'sampling', 'roots/list': 'roots' };

/** The outstanding input requests of every task running here. Emits `changed` with a task id when its set changes. */
export class TaskInputs extends EventEmitter<{ changed: [taskId: string] }> {
  private readonly byTask = new Map<string, Map<string, Pending>>();
  private seq = 0;

  constructor() {
    super();
    this.setMaxListeners(0);
  }

  /**
   * Holds `request` for task `taskId` until its caller answers it through {@link answer}; resolves
   * with the answer (the result the upstream gets). Rejects with `signal`'s reason when the call
   * ends first.
   */
  ask(taskId: string, request: TaskInputRequest, signal: AbortSignal): Promise<Record<string, unknown>> {
    signal.throwIfAborted();
    const key = `${KIND[request.method] ?? 'input'}-${++this.seq}`;
    let pending = this.byTask.get(taskId);
    if (!pending) this.byTask.set(taskId, (pending = new Map()));
    const own = pending;
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.remove(taskId, own, key);
        reject(signal.reason);
      };
      own.set(key, {
        request,
        resolve: (response) => {
          signal.removeEventListener('abort', onAbort);
          resolve(response);
        },
      });
      signal.addEventListener('abort', onAbort, { once: true });
      this.emit('changed', taskId);
    });
  }

  /** The outstanding requests of task `taskId` by key, or undefined when it waits on none. */
  pending(taskId: string): Record<string, TaskInputRequest> | undefined {
    const pending = this.byTask.get(taskId);
    if (!pending?.size) return undefined;
    return Object.fromEntries([...pending].map(([key, p]) => [key, p.request]));
  }

  /** Answers the outstanding requests of task `taskId` named in `responses`; other keys are ignored. Answers how many were taken. */
  answer(taskId: string, responses: Record<string, unknown>): number {
    const pending = this.byTask.get(taskId);
    if (!pending) return 0;
    let taken = 0;
    for (const [key, response] of Object.entries(responses)) {
      const p = pending.get(key);
      if (!p || typeof response !== 'object' || response === null || Array.isArray(response)) continue;
      this.remove(taskId, pending, key);
      p.resolve(response as Record<string, unknown>);
      taken++;
    }
    return taken;
  }

  private remove(taskId: string, pending: Map<string, Pending>, key: string): void {
    if (!pending.delete(key)) return;
    if (pending.size === 0 && this.byTask.get(taskId) === pending) this.byTask.delete(taskId);
    this.emit('changed', taskId);
  }
}
