/** Timing and limits of durable tasks (src/tasks/engine.ts). */

import { DEFAULT_TASK_HEARTBEAT_MS, DEFAULT_TASK_POLL_MS, DEFAULT_TASK_STALE_MS } from '../config/schema.js';

/** Default heartbeat period of a broker instance, in ms: the schema's `broker.taskHeartbeatMs` default. */
export const TASK_HEARTBEAT_MS = DEFAULT_TASK_HEARTBEAT_MS;
/** Default age past which an instance is dead, in ms: the schema's `broker.taskStaleMs` default. */
export const TASK_STALE_MS = DEFAULT_TASK_STALE_MS;
/** Default period of the tick that beats, reaps, expires and takes up approvals, in ms: the schema's `broker.taskPollMs` default. */
export const TASK_POLL_MS = DEFAULT_TASK_POLL_MS;
/** Rows on one page of a task list (`tasks/list`, `GET /api/v1/tasks`, the inbox); `nextCursor` reads the next. */
export const TASK_LIST_LIMIT = 500;
/** The `_meta` key of the A2A task state on task answers and API rows. */
export const A2A_META_KEY = 'mcp-broker/a2a';
