/**
 * A task's status on the 2025-11-25 wire, derived from its row's A2A state (seed
 * 001_0e634786582ab9c8.txt: one row, one mapping), and the task engine's errors.
 */
import type { TaskStatus } from '../store/store.js';
import type { A2ATaskState } from './a2a.js';

/** The 2025-11-25 wire status of a task. */
export type McpTaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

/** A task as the 2025-11-25 wire shows it (`Task`), with the A2A state in `_meta`. */
export type McpTask = {
  taskId: string;
  status: McpTaskStatus;
  ttl: number | null;
  createdAt: string;
  lastUpdatedAt: string;
  pollInterval?: number;
  statusMessage?: string;
};

/** The MCP task status, derived from the same row through its A2A state. */
export function mcpTaskStatus(state: A2ATaskState): McpTaskStatus {
  switch (state) {
    case 'submitted':
    case 'working':
    case 'unknown':
      return 'working';
    case 'input-required':
    case 'auth-required':
      return 'input_required';
    case 'completed':
      return 'completed';
    case 'canceled':
      return 'cancelled';
    case 'failed':
    case 'rejected':
      return 'failed';
  }
}

/** Whether a row is settled for good (`tasks/result` answers, `tasks/cancel` refuses). */
export function isTerminal(status: TaskStatus): boolean {
  return status === 'completed' || status === 'failed' || status === 'killed';
}

/** A task-level refusal (unknown id, foreign id, already settled): `code` for the wire. */
export class TaskError extends Error {
  constructor(
    readonly code: 'not_found' | 'terminal',
    message: string,
  ) {
    super(message);
  }
}

/** The abort reason of a cancelled task: the call settles `cancelled`. */
export class TaskCancelled extends Error {
  constructor() {
    super('the task was cancelled');
    this.name = 'TaskCancelled';
  }
}

