/**
 * The A2A protocol's task states and the mapping between them and a durable task row
 * (seed 001_0e634786582ab9c8.txt). The row side is {@link TaskRow} (`store/store.ts`): a
 * `status` of five values plus who stopped it (`stoppedBy`).
 *
 * Both functions switch exhaustively with no default arm: a sixth row status, or a tenth protocol
 * state added to {@link A2A_TASK_STATES}, is a compile error here rather than a silent default.
 */
import type { TaskRow, TaskStatus } from '../store/store.js';

/**
 * The protocol's nine task states, as one list: {@link A2ATaskState} is derived from it, so wire
 * input is validated against the same source the mapping uses.
 */
export const A2A_TASK_STATES = [
  'submitted',
  'working',
  'input-required',
  'completed',
  'canceled',
  'failed',
  'rejected',
  'auth-required',
  'unknown',
] as const;

/** One A2A task state (see {@link A2A_TASK_STATES}). */
export type A2ATaskState = (typeof A2A_TASK_STATES)[number];

/** Whether `value` is one of {@link A2A_TASK_STATES}. */
export function isA2ATaskState(value: unknown): value is A2ATaskState {
  return (A2A_TASK_STATES as readonly unknown[]).includes(value);
}

/**
 * Durable row → protocol state. Total and pure: every (`status`, `stoppedBy`) pair has an answer
 * and it depends on nothing else. `stoppedBy` is read as stored, so a value this build does not
 * know is accepted (and answered as no attribution).
 *
 * - `running` → `working`; `completed` → `completed`; `failed` → `failed`;
 * - `parked` → `input-required`: the row waits on an approval decision, a narrowing of "waiting
 *   for the caller to supply something", redeemed through the approval inbox;
 * - `killed` by `user` or `parent` → `canceled` (a deliberate stop); by `system`, by a source not
 *   known, or with no attribution → `failed` (nobody asked for it, so `canceled` would claim an
 *   intent nobody expressed).
 *
 * `submitted`, `rejected` and `auth-required` have no arm: they describe moments before a row
 * exists (admission). `unknown` has none either: it belongs to the read projection
 * ({@link projectA2ATaskState}), for a `running` row another live instance owns.
 */
export function toA2ATaskState(row: { readonly status: TaskStatus; readonly stoppedBy?: TaskRow['stoppedBy'] | string | undefined }): A2ATaskState {
  switch (row.status) {
    case 'running':
      return 'working';
    case 'completed':
      return 'completed';
    case 'failed':
      return 'failed';
    case 'parked':
      return 'input-required';
    case 'killed':
      return row.stoppedBy === 'user' || row.stoppedBy === 'parent' ? 'canceled' : 'failed';
  }
}

/**
 * The read projection: what a reader reports for a row. A `running` row whose owner is another
 * instance that is still live is `unknown` (this instance cannot speak to its outcome); every
 * other row is {@link toA2ATaskState}.
 */
export function projectA2ATaskState(
  row: Pick<TaskRow, 'status' | 'stoppedBy' | 'owner'>,
  view: { readonly instanceId: string; readonly isLive: (owner: string) => boolean },
): A2ATaskState {
  if (row.status === 'running' && row.owner !== view.instanceId && view.isLive(row.owner)) return 'unknown';
  return toA2ATaskState(row);
}

/** A reversal that keeps everything the protocol state carried. */
export interface A2ATaskStateReversalFaithful {
  readonly lossy: false;
  readonly status: TaskStatus;
}

/** A reversal that dropped something; `note` (required) says what. */
export interface A2ATaskStateReversalLossy {
  readonly lossy: true;
  readonly status: TaskStatus;
  readonly note: string;
}

/** The result of {@link fromA2ATaskState}, discriminated on `lossy`. */
export type A2ATaskStateReversal = A2ATaskStateReversalFaithful | A2ATaskStateReversalLossy;

/**
 * Protocol state → row status. Nine onto five, so five arms lose information and say what
 * (`lossy: true` with a `note`). `lossy: false` holds exactly for the states that come back
 * unchanged from `toA2ATaskState(fromA2ATaskState(s))` (with no `stoppedBy`: a reversal carries
 * none); `test/tasks/a2a.property.test.ts` pins that biconditional.
 */
export function fromA2ATaskState(state: A2ATaskState): A2ATaskStateReversal {
  switch (state) {
    case 'working':
      return { lossy: false, status: 'running' };
    case 'input-required':
      return { lossy: false, status: 'parked' };
    case 'completed':
      return { lossy: false, status: 'completed' };
    case 'failed':
      return { lossy: false, status: 'failed' };
    case 'submitted':
      return { lossy: true, status: 'running', note: 'a row starts running when it is created: "submitted" (not started yet) has no row status' };
    case 'canceled':
      return { lossy: true, status: 'killed', note: 'who cancelled (user or parent) is kept in stoppedBy, which a status alone does not carry' };
    case 'rejected':
      return { lossy: true, status: 'failed', note: 'a rejection happens at admission, before a row exists; kept as failed' };
    case 'auth-required':
      return { lossy: true, status: 'failed', note: 'an authorization demand is answered at admission, before a row exists; kept as failed' };
    case 'unknown':
      return { lossy: true, status: 'running', note: 'another live instance owns the running row; its outcome is not known here' };
  }
}
