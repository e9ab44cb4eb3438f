/** Timing and limits of durable tasks (src/tasks/engine.ts). */

/** Heartbeat period of a broker instance, in ms. */
export const TASK_HEARTBEAT_MS = 5_000;
/** An instance whose last heartbeat is older than this is dead, in ms (three missed beats). */
export const TASK_STALE_MS = 3 * TASK_HEARTBEAT_MS;
/** Period of the tick that beats, reaps, expires and takes up approvals, in ms; also the `pollInterval` we suggest. */
export const TASK_POLL_MS = 1_000;
/** Longest list answered at once (`tasks/list`, `GET /api/v1/tasks`, the inbox). */
export const TASK_LIST_LIMIT = 500;
/** The `_meta` key of the A2A task state on task answers and API rows. */
export const A2A_META_KEY = 'mcp-broker/a2a';
