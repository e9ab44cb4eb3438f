/**
 * Durable tasks: a call run in the background through the same broker path, and a call parked
 * on an `ask` until an operator decides (the approval inbox). Seed 001_0e634786582ab9c8.txt for
 * the row states; DESIGN.md "Tasks" and "Approval inbox".
 *
 * Our own code, not the SDK's: SDK 2.4.0 removed the 2025-11-25 task runtime (`TaskStore`,
 * `registerToolTask`, `extra.taskStore`; upgrade-to-v2.md "Experimental tasks interception
 * removed") and keeps only the wire schemas, which {@link toMcpTask} answers in.
 *
 * Every row lives in the {@link Store} (`TaskRow`). This process is one instance: an id, a host
 * and pid, and a heartbeat every `broker.taskHeartbeatMs`. An instance is dead when its
 * heartbeat is older than `broker.taskStaleMs`, or when it ran on this host and its pid is gone
 * (a broker killed with SIGKILL and started again is recognised at once). A dead instance's
 * `running` rows become `killed` by `system` (reaped at start and on every tick), never
 * `completed` and never left `running`. A `running` row of another live instance reads as A2A
 * `unknown` ({@link projectA2ATaskState}).
 *
 * Every tick (`broker.taskPollMs`) also deletes expired rows (TTL), aborts our runs whose row
 * was cancelled elsewhere, and takes up parked rows an operator approved (from the CLI, another
 * process): a parked call still waiting here resumes in place; one whose caller or instance is
 * gone is run again from its stored arguments, through the whole path, pre-approved.
 *
 * Every call the broker accepted leaves one record, a parked one too. Every row owes it from
 * when it is stored (`TaskRow.recordOwed`, fail closed) until the call that runs or waits on it
 * writes it (through the record stage; cleared in {@link TaskEngine.onSettled}). A row
 * rejected, cancelled, killed (its broker ended before its call answered: SIGKILL) or expired
 * with no call here running or waiting on it still owes it, and the tick writes it through
 * `deps.record` (the row's owner, or any instance once the owner is dead), before an expired
 * row is deleted: a killed row's record is `cancelled`, with the row's reason, and the attempts
 * its call sent (0 for a row killed by an instance that ended: they are not known).
 *
 * One principal sees and touches only its own tasks: every read here takes the caller's
 * principal, and a foreign id reads as missing.
 */
import { isInputRequiredResult, RELATED_TASK_META_KEY } from '@modelcontextprotocol/server';
import type { ParkDecision } from '../broker/types.js';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/server';
import type { BrokerAnswer } from '../broker/broker.js';
import { OUTCOME_META_KEY, OUTCOME_STATUS, OUTCOMES, type Outcome } from '../broker/outcomes.js';
import type { BrokerCall, CallerSession, CallRecord, CallRequest, ToolTarget } from '../broker/types.js';
import { newCallId } from '../shared/ids.js';
import type { Clock } from '../shared/clock.js';
import { messageOf } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import { listKeyOf, pageOf, type ListPage } from '../store/list-cursor.js';
import type { Store, TaskRow, TaskStatus } from '../store/store.js';
import { projectA2ATaskState, type A2ATaskState } from './a2a.js';
import { A2A_META_KEY, TASK_HEARTBEAT_MS, TASK_LIST_LIMIT, TASK_POLL_MS, TASK_STALE_MS } from './constants.js';
import { decideParked, rejectionReason, type InboxDecision } from './inbox.js';
import { isTerminal, mcpTaskStatus, TaskCancelled, TaskError, type McpTask } from './status.js';
import { TaskInputs } from './inputs.js';

/** How a call's upstream requests reach its caller (`CallRequest.onServerRequest`). */
type ServerRequestHandler = NonNullable<CallRequest['onServerRequest']>;

/** How a row's reason starts when a step of the flow it runs parked it ({@link TaskEngine.park}). */
const STEP_PARKED = 'waiting for approval of its step ';

export interface TaskEngineDeps {
  store: Store;
  clock: Clock;
  logger: Logger;
  /** Runs one call through the broker path (`Broker.call`). */
  run(request: CallRequest, session: CallerSession, target?: ToolTarget): Promise<BrokerAnswer>;
  /**
   * Writes the one record of a parked call whose row settled (rejected, cancelled) or expired
   * with no call waiting on it (the records sink, then publication); rejects when it could not
   * be written (the row stays owed and a later tick tries again). Absent: such records are
   * dropped.
   */
  record?(record: CallRecord): Promise<void>;
  /** Makes arguments safe to store: the scrubber's `value`. */
  scrubArgs(args: unknown): unknown;
  /**
   * A stored row as {@link TaskEngine.get} and {@link TaskEngine.list} hand it to a reader, and
   * `status` listeners are told it: its caller- and upstream-given text scrubbed again with
   * today's secrets (tasks/scrubbed-row.ts `scrubbedTaskRow`; a reload may have added one since it
   * was stored). Only shown: rows are matched by principal, run and recorded as stored. Default: as stored.
   */
  shown?(row: TaskRow): TaskRow;
  /** Default and longest TTL, in ms (`broker.taskTtlMs`, `broker.maxTaskTtlMs`). */
  ttlMs: number;
  maxTtlMs: number;
  /** `policy.askMode` now (it may change on reload). */
  askMode(): 'elicit' | 'park';
  /**
   * Whether the call of approved parked `row` can run now: the gateway is ready (`Gateway.ready`
   * settled) and no upstream the call needs is still in its first dial (`broker.startGraceMs`
   * may end the wait for ready before a slow upstream is up). Default always. Until then a row
   * with no call waiting here is not taken up (its run would be refused, the approval spent);
   * the first tick after takes it up.
   */
  ready?(row: TaskRow): boolean;
  /**
   * Whether the broker is shutting down (`Broker.draining`): a task call cancelled then is
   * `killed` by `system`, not `failed`. Default never (only {@link TaskEngine.stop} counts).
   */
  stopping?(): boolean;
  /** Whether `pid` is a live process on this host; default `process.kill(pid, 0)`. */
  pidAlive?(pid: number): boolean;
  /**
   * Task timing, in ms (`broker.taskHeartbeatMs`, `broker.taskStaleMs`, `broker.taskPollMs`);
   * each defaults to the schema's default ({@link TASK_HEARTBEAT_MS}, {@link TASK_STALE_MS},
   * {@link TASK_POLL_MS}).
   */
  timing?: Partial<TaskTiming>;
}

/** The task engine's periods, in ms. */
export interface TaskTiming {
  heartbeatMs: number;
  staleMs: number;
  pollMs: number;
}

/** Which page of the task list {@link TaskEngine.list} reads. */
export interface TaskPageOptions {
  /** A `nextCursor` of the page before; absent: the first page (the newest tasks). */
  readonly cursor?: string;
  /** Only tasks of this status; absent: every status. */
  readonly status?: TaskStatus;
}

export type { ParkDecision };

interface Waiter {
  resolve(decision: ParkDecision): void;
}

interface Run {
  abort(reason: unknown): void;
}

/**
 * The task engine of one broker process. Owns its heartbeat timer: {@link start} it once,
 * {@link stop} it before the store closes. Emits `status` with each row it changes.
 */
export class TaskEngine extends EventEmitter<{ status: [row: TaskRow]; tick: [] }> {
  readonly instanceId = randomUUID();
  private readonly host = hostname();
  private readonly startedAt: string;
  private cancelTimer?: () => void;
  private live = new Map<string, { heartbeatAt: number; host: string; pid: number }>();
  private readonly runs = new Map<string, Run>();
  private readonly waiters = new Map<string, Waiter>();
  /** Tasks whose call waits on its caller's answer to a live input request, and how many ({@link askLive}). */
  private readonly asking = new Map<string, number>();
  private stopping = false;
  private lastBeat = -Infinity;
  private ticking?: Promise<void>;
  /** The periods in use (`broker.taskHeartbeatMs`, `taskStaleMs`, `taskPollMs`). */
  readonly timing: TaskTiming;
  /** Input requests our running tasks wait on (a task created with `holdInputs`). */
  readonly inputs = new TaskInputs();

  /**
   * `policy.askMode` now: under `park` a parked call waits for an operator's decision only (its
   * caller is not asked); under `elicit` a task's caller may answer the approval question.
   */
  get askMode(): 'elicit' | 'park' {
    return this.deps.askMode();
  }

  constructor(private readonly deps: TaskEngineDeps) {
    super();
    this.timing = { heartbeatMs: TASK_HEARTBEAT_MS, staleMs: TASK_STALE_MS, pollMs: TASK_POLL_MS, ...deps.timing };
    this.setMaxListeners(0);
    this.startedAt = this.iso();
  }

  /** Registers this instance, reaps dead ones, and starts the tick. */
  async start(): Promise<void> {
    await this.tick();
    const loop = () => {
      this.cancelTimer = this.deps.clock.setTimer(this.timing.pollMs, () => {
        void this.tick().finally(() => !this.stopping && loop());
      });
    };
    loop();
  }

  /**
   * Stops the tick. Our rows still `running` (their calls were cancelled by the broker's drain,
   * or are being) become `killed` by `system`, and this instance is forgotten.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.cancelTimer?.();
    await this.ticking?.catch(() => undefined);
    for (const w of this.waiters.values()) w.resolve({ approved: false, reason: 'the broker is shutting down; the call stays parked', cancelled: true, stillParked: true });
    this.waiters.clear();
    await this.deps.store.reapInstance(this.instanceId, this.iso()).catch(() => undefined);
  }

  /**
   * Puts `request` of task `id`'s call to its caller through `ask`, tagged with the task; the
   * task is `input_required` (status notified) until every such request is answered or ends.
   */
  private async askLive(id: string, request: Parameters<ServerRequestHandler>[0], signal: AbortSignal, ask: ServerRequestHandler): Promise<Record<string, unknown>> {
    const n = (this.asking.get(id) ?? 0) + 1;
    this.asking.set(id, n);
    if (n === 1) await this.changed(id).catch(() => undefined);
    try {
      const params = request.params ?? {};
      const meta = { ...((params._meta as Record<string, unknown> | undefined) ?? {}), [RELATED_TASK_META_KEY]: { taskId: id } };
      return await ask({ ...request, params: { ...params, _meta: meta } }, signal);
    } finally {
      const left = (this.asking.get(id) ?? 1) - 1;
      if (left > 0) this.asking.set(id, left);
      else {
        this.asking.delete(id);
        const row = await this.get(id, undefined).catch(() => undefined);
        if (row?.status === 'running') this.emit('status', row);
      }
    }
  }

  /** Whether instance `owner` is live (this one always is). */
  isLive(owner: string): boolean {
    if (owner === this.instanceId) return true;
    const i = this.live.get(owner);
    return i !== undefined && this.alive(i);
  }

  /** The A2A state a reader is shown for `row`. */
  a2a(row: TaskRow): A2ATaskState {
    if (row.status === 'running' && this.asking.has(row.id)) return 'input-required'; // its call waits on its caller (askLive)
    return projectA2ATaskState(row, { instanceId: this.instanceId, isLive: (o) => this.isLive(o) });
  }

  /** The 2025-11-25 wire task for `row`, with `_meta["mcp-broker/a2a"]`. */
  toMcpTask(row: TaskRow): McpTask & { _meta: Record<string, unknown> } {
    const state = this.a2a(row);
    return {
      taskId: row.id,
      status: mcpTaskStatus(state),
      ttl: row.ttlMs,
      createdAt: row.createdAt,
      lastUpdatedAt: row.updatedAt,
      pollInterval: this.timing.pollMs,
      ...(row.reason ? { statusMessage: row.reason } : {}),
      _meta: { [A2A_META_KEY]: state },
    };
  }

  /** The task `id` if `principal` owns it (every principal when undefined: operators, the CLI), as readers are shown it ({@link TaskEngineDeps.shown}). */
  async get(id: string, principal: string | undefined): Promise<TaskRow | undefined> {
    const row = await this.deps.store.getTask(id, this.deps.clock.now());
    return row && (principal === undefined || row.principal === principal) ? this.shown(row) : undefined;
  }

  /**
   * One page of `principal`'s tasks (every principal's when undefined: operators), newest first
   * (`created_at`, then id), optionally of one status only, as readers are shown them: at most
   * {@link TASK_LIST_LIMIT} rows, and `nextCursor` when more follow (store/list-cursor.ts). The
   * principal and status filter every page in the store, a cursor only says where the page starts.
   * Throws `BrokerError('invalid_arguments')` for a cursor no page gave.
   */
  async list(principal: string | undefined, page: TaskPageOptions = {}): Promise<ListPage<TaskRow>> {
    const after = listKeyOf(page.cursor, 'the task list');
    const rows = await this.deps.store.listTasks({
      principal,
      status: page.status,
      ...(after && { after }),
      now: this.deps.clock.now(),
      limit: TASK_LIST_LIMIT + 1,
    });
    const { items, nextCursor } = pageOf(rows, TASK_LIST_LIMIT);
    return { items: items.map((row) => this.shown(row)), ...(nextCursor !== undefined && { nextCursor }) };
  }

  private shown(row: TaskRow): TaskRow {
    return this.deps.shown ? this.deps.shown(row) : row;
  }

  /**
   * Starts `request` as a task for `session`: stores a `running` row and runs the call in the
   * background through the broker path; answers the row at once. `ttlMs` defaults to
   * `broker.taskTtlMs`, capped at `broker.maxTaskTtlMs`. The call's own signal is the task's,
   * not the request's: the caller going away does not end it, `cancel` does.
   *
   * `holdInputs` (a 2026-07-28 caller, who has no server-to-client requests): the upstream's
   * elicitation, sampling and roots requests during the call wait in {@link inputs} until the
   * caller answers them (`tasks/update`), instead of going through `request.onServerRequest`.
   * `ask` (a 2025-11-25 caller): the upstream's elicitation, sampling and roots requests during
   * the call are put to the caller through it, live, with
   * `_meta["io.modelcontextprotocol/related-task"]: {taskId}`; while one waits the task reads
   * `input_required` (A2A `input-required`) and its status is notified. Its own properties
   * (`sessionId`, `notify`) are kept on the route the call is given. Absent (and no
   * `holdInputs`): such a request fails the call (`upstream_error`).
   * `given` is told the row's id once it is stored, before the call starts (so a session can tell
   * the tasks it handed out from parked plain calls' rows).
   */
  async create(
    request: Omit<CallRequest, 'signal' | 'abort' | 'taskId'>,
    session: CallerSession,
    target: ToolTarget,
    ttlMs?: number,
    options: { holdInputs?: boolean; ask?: ServerRequestHandler; given?: (id: string) => void } = {},
  ): Promise<TaskRow> {
    const row = this.newRow(request, session, target, 'running', ttlMs);
    await this.deps.store.addTask(row);
    options.given?.(row.id);
    const controller = new AbortController();
    this.runs.set(row.id, { abort: (reason) => controller.abort(reason) });
    const detached: CallerSession = { ...session, isLive: () => true, ping: undefined };
    const { ask } = options;
    const held: Partial<Pick<CallRequest, 'onServerRequest'>> = options.holdInputs
      ? { onServerRequest: (r, signal) => this.inputs.ask(row.id, r, signal) }
      : ask
        ? { onServerRequest: Object.assign((r: Parameters<ServerRequestHandler>[0], signal: AbortSignal) => this.askLive(row.id, r, signal, ask), ask) }
        : {};
    void this.deps
      .run({ ...request, ...held, signal: controller.signal, abort: (r) => controller.abort(r), taskId: row.id }, detached, target)
      .then((answer) => this.settle(row.id, answer), (err: unknown) => this.deps.logger.error({ taskId: row.id, err: messageOf(err) }, 'task run failed'))
      .finally(() => this.runs.delete(row.id));
    return row;
  }

  /**
   * Makes a call already running for `session` a task (a 2026-07-28 upstream answered it with a
   * task of its own, and its caller declared the tasks extension): stores a `running` row and
   * settles it with `running.answer` (the call's one broker path, its one record); answers the
   * row. `running.abort` ends the call (`cancel`, and a cancel made elsewhere); the caller's
   * request no longer owns it. `ttlMs` as for {@link create}.
   */
  async adopt(
    request: Pick<CallRequest, 'name' | 'args'>,
    session: CallerSession,
    target: ToolTarget,
    running: { answer: Promise<BrokerAnswer>; abort(reason: unknown): void },
    ttlMs?: number,
  ): Promise<TaskRow> {
    const row = this.newRow(request, session, target, 'running', ttlMs);
    await this.deps.store.addTask(row);
    this.runs.set(row.id, { abort: running.abort });
    void running.answer
      .then(async (answer) => {
        // The call began before its row: its record, once written, is the row's (owed till then).
        if (answer.record) await this.deps.store.setRecordOwed(row.id, false);
        await this.settle(row.id, answer);
      }, (err: unknown) => this.deps.logger.error({ taskId: row.id, err: messageOf(err) }, 'task run failed'))
      .finally(() => this.runs.delete(row.id));
    return row;
  }

  /**
   * Waits until task `id` of `principal` is settled and answers its row (`tasks/result`).
   * Rejects with {@link TaskError} `not_found`, or with `signal`'s reason.
   */
  async settled(id: string, principal: string | undefined, signal: AbortSignal): Promise<TaskRow> {
    for (;;) {
      const row = await this.get(id, principal);
      if (!row) throw new TaskError('not_found', `no task "${id}"`);
      if (isTerminal(row.status)) return row;
      await new Promise<void>((resolve, reject) => {
        const done = () => {
          this.off('status', onStatus);
          this.off('tick', done);
          signal.removeEventListener('abort', onAbort);
          resolve();
        };
        const onStatus = (r: TaskRow) => r.id === id && done();
        const onAbort = () => {
          done();
          reject(signal.reason);
        };
        this.on('status', onStatus);
        this.on('tick', done);
        signal.addEventListener('abort', onAbort, { once: true });
      });
      signal.throwIfAborted();
    }
  }

  /**
   * Cancels task `id` of `principal` (`tasks/cancel`): the row becomes `killed` by `user` before
   * this answers, and the call is aborted (its upstream request cancelled) or, parked, never runs.
   * Rejects with {@link TaskError} `not_found`, or `terminal` for a settled task.
   */
  async cancel(id: string, principal: string | undefined): Promise<TaskRow> {
    const row = await this.get(id, principal);
    if (!row) throw new TaskError('not_found', `no task "${id}"`);
    if (isTerminal(row.status)) throw new TaskError('terminal', `task "${id}" is already ${row.status}`);
    const reason = 'cancelled by the client';
    const moved = await this.deps.store.updateTask(id, ['running', 'parked'], { status: 'killed', stoppedBy: 'user', reason, updatedAt: this.iso() });
    if (!moved) return this.cancel(id, principal);
    this.runs.get(id)?.abort(new TaskCancelled());
    this.waiters.get(id)?.resolve({ approved: false, reason, cancelled: true });
    // Its record from the row as stored: the row shown may have its principal redacted.
    const stored = await this.changed(id);
    if (stored) await this.writeOwed(stored, this.deps.clock.now());
    return (stored && this.shown(stored))!;
  }

  /**
   * The judge's hook for an `ask` verdict: parks `call` and waits for an operator's decision, or
   * answers undefined when the call is not to park (not a task, and `policy.askMode` is
   * `elicit`). A task's row moves to `parked` (an approval it had is spent); a plain call gets a
   * new `parked` row. A plain call whose caller cancels stops waiting (`cancelled`) but its row
   * stays parked: approved later, it runs again from the stored arguments and keeps its result
   * for `tasks/get`. A flow's step is withdrawn instead (`killed`, stopped by its parent): run
   * later, it would run outside its flow, after the flow's rollback.
   */
  async park(call: BrokerCall, why: string): Promise<ParkDecision | undefined> {
    const taskId = call.request.taskId;
    if (taskId === undefined && this.deps.askMode() !== 'park') return undefined;
    let id: string;
    // A step of a flow run as a task parks its flow's row: said so, as its take-up needs to know.
    const step = taskId !== undefined ? call.request.flow?.step : undefined;
    const reason = step !== undefined ? `${STEP_PARKED}${JSON.stringify(step)}: ${why}` : `waiting for approval: ${why}`;
    if (taskId !== undefined) {
      id = taskId;
      // An approval of an earlier ask of this task (a flow run as a task asks once a step) is spent: this ask waits for its own.
      if (!(await this.deps.store.updateTask(id, ['running'], { status: 'parked', reason, recordOwed: true, approvedBy: null, updatedAt: this.iso() }))) {
        return { approved: false, reason: 'the task was cancelled', cancelled: true };
      }
    } else {
      const row = { ...this.newRow(call.request, call.session, call.target!, 'parked'), callId: call.callId, reason, recordOwed: true };
      id = row.id;
      await this.deps.store.addTask(row);
    }
    // This call writes the row's record when it settles (onSettled), unless it leaves it parked.
    this.waiting.add(id);
    this.parkedOf.set(call, id);
    await this.changed(id);
    // A flow's step is no call of its own: once its flow stops waiting, the row goes with it
    // (approved later, it ran after the flow had failed and rolled back, out of its flow).
    const flowStep = taskId === undefined && call.request.flow !== undefined;
    const decision = await new Promise<ParkDecision>((resolve) => {
      const onAbort = () => {
        if (!flowStep) return resolve({ approved: false, reason: `cancelled while waiting for approval; it stays parked as task ${id}`, cancelled: true, stillParked: true });
        const reason = 'cancelled while waiting for approval; withdrawn with its flow';
        void this.deps.store
          .updateTask(id, ['parked'], { status: 'killed', stoppedBy: 'parent', reason, updatedAt: this.iso() })
          .then(() => this.changed(id))
          .catch((err: unknown) => this.deps.logger.error({ taskId: id, err: messageOf(err) }, 'task row could not be updated'))
          .finally(() => resolve({ approved: false, reason, cancelled: true }));
      };
      const signal = call.request.signal;
      this.waiters.set(id, {
        resolve: (d) => {
          signal.removeEventListener('abort', onAbort);
          resolve(d);
        },
      });
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    this.waiters.delete(id);
    if (taskId === undefined && decision.approved) this.plainRuns.set(call, id);
    return decision;
  }

  /**
   * The broker's hook for every settled call (`Broker.onSettled`): a parked plain call that was
   * approved keeps its answer in its row, for `tasks/get` and the inbox. Never throws.
   */
  onSettled(call: BrokerCall, answer: BrokerAnswer): Promise<void> | undefined {
    const parked = this.parkedOf.get(call);
    const id = this.plainRuns.get(call);
    // A flow's step runs in its flow's task but is no call of that task: its record is the step's, not the task's one.
    const task = call.request.flow === undefined ? call.request.taskId : undefined;
    if (task !== undefined && answer.record) {
      // A task's call wrote its one record: its row owes none (cleared before anything else
      // awaits, so a broker killed now cannot leave a written record owed as well).
      void this.deps.store.setRecordOwed(task, false).catch((err: unknown) => this.deps.logger.error({ taskId: task, err: messageOf(err) }, 'task row could not be updated'));
    }
    if (parked === undefined && id === undefined) return undefined;
    return (async () => {
      if (parked !== undefined) {
        this.parkedOf.delete(call);
        // Its record written, the row owes none; left parked (record deferred), it still does. A
        // step of a flow run as a task parked its flow's row: the step's record is not the flow's.
        const stepOfTask = call.request.flow !== undefined && call.request.taskId !== undefined;
        if (answer.record && !stepOfTask) await this.deps.store.setRecordOwed(parked, false).catch((err: unknown) => this.deps.logger.error({ taskId: parked, err: messageOf(err) }, 'task row could not be updated'));
        this.waiting.delete(parked);
      }
      if (id === undefined) return;
      this.plainRuns.delete(call);
      await this.finish(id, answer.outcome === 'ok' ? 'completed' : 'failed', toolResultOf(answer), answer.reason ?? null, answer.callId, answer.attempts);
    })();
  }

  /**
   * An operator's decision on parked task `id` (any principal's): approve → the call resumes
   * through the rest of the path; reject → `failed` with `reason`. Answers the row after, or
   * undefined when no such parked task (already decided, or gone).
   */
  async decide(id: string, decision: InboxDecision): Promise<TaskRow | undefined> {
    const row = await decideParked(this.deps.store, id, decision, this.deps.clock.now());
    if (!row) return undefined;
    // Told as readers are shown it: an approved row keeps the reason it was parked with, stored then.
    this.emit('status', this.shown(row));
    if (decision.approve) await this.takeUp(row);
    else {
      this.waiters.get(id)?.resolve({ approved: false, reason: rejectionReason(decision) });
      await this.writeOwed(row, this.deps.clock.now());
    }
    return this.get(id, undefined);
  }

  private readonly plainRuns = new WeakMap<BrokerCall, string>();
  /** The row each parked call here parked (until it settles). */
  private readonly parkedOf = new WeakMap<BrokerCall, string>();
  /** Rows a call here waits on, or waited on and is settling: that call writes the record. */
  private readonly waiting = new Set<string>();

  /** Runs an approved parked row: in place when its call waits here, else again from its row. */
  private async takeUp(row: TaskRow | undefined): Promise<void> {
    if (!row || row.status !== 'parked' || row.approvedBy === null) return;
    const waiter = this.waiters.get(row.id);
    if (!waiter && row.owner !== this.instanceId && this.isLive(row.owner)) return; // its own instance takes it up
    if (!waiter && this.deps.ready?.(row) === false) return; // a later tick, once its upstreams are up
    const moved = await this.deps.store.updateTask(row.id, ['parked'], {
      status: 'running',
      owner: this.instanceId,
      reason: `approved by ${row.approvedBy}`,
      // Still owed: the call that runs now clears it when it writes the record (onSettled).
      recordOwed: true,
      updatedAt: this.iso(),
    });
    if (!moved) return;
    await this.changed(row.id);
    if (waiter) return waiter.resolve({ approved: true, by: row.approvedBy });
    const cannot = row.argsRedacted
      ? { outcome: 'guard_error' as const, text: 'its arguments held a secret the store does not keep; call the tool again', reason: 'arguments redacted' }
      : row.reason?.startsWith(STEP_PARKED)
        ? this.stepNotRerun(row)
        : undefined;
    if (cannot) {
      // The call never runs, so no stage writes its record: written here (unless it was already,
      // by the call that parked it), before its result can be read (fail closed). Unwritable: back
      // to approved and parked, for a later tick to try again.
      const result = refusal(cannot.outcome, cannot.text);
      let callId = row.callId || undefined;
      if (row.recordOwed) {
        const record = owedRecord({ ...row, status: 'failed', result, reason: cannot.reason }, false, this.deps.clock.now());
        try {
          await this.deps.record?.(record);
        } catch (err) {
          this.deps.logger.error({ taskId: row.id, err: messageOf(err) }, 'the record of an approved call that cannot run could not be written; retried on a later tick');
          await this.deps.store.updateTask(row.id, ['running'], { status: 'parked', updatedAt: this.iso() });
          return;
        }
        await this.deps.store.setRecordOwed(row.id, false);
        callId = record.callId;
      }
      return void (await this.finish(row.id, 'failed', result, cannot.reason, callId));
    }
    const controller = new AbortController();
    this.runs.set(row.id, { abort: (reason) => controller.abort(reason) });
    // The caller as the call that parked had it: a modern one's row keeps no session ('', recorded
    // null), and a unit that is not its session's own (a modern request's, the admin API's) is
    // sessionless, so its budget is charged to its current window, renewed if it ended.
    const session: CallerSession = {
      sessionId: row.sessionId || null,
      principal: row.principal,
      unit: row.unit,
      sessionless: row.unit !== row.sessionId,
      isLive: () => true,
    };
    const request: CallRequest = {
      name: row.name,
      args: (row.args ?? {}) as Record<string, unknown>,
      signal: controller.signal,
      abort: (r) => controller.abort(r),
      taskId: row.id,
      approvedBy: row.approvedBy,
    };
    void this.deps
      .run(request, session)
      .then((answer) => this.settle(row.id, answer), (err: unknown) => this.deps.logger.error({ taskId: row.id, err: messageOf(err) }, 'task run failed'))
      .finally(() => this.runs.delete(row.id));
  }

  /** Stores a task call's answer in its row (unless it was cancelled first). */
  private async settle(id: string, answer: BrokerAnswer): Promise<void> {
    // Cancelled by the broker's shutdown (its drain runs before stop()): killed by system.
    const killed = answer.outcome === 'cancelled' && (this.stopping || this.deps.stopping?.() === true);
    if (killed) {
      await this.deps.store.updateTask(id, ['running'], { status: 'killed', stoppedBy: 'system', reason: answer.reason ?? 'the broker stopped', result: toolResultOf(answer), attempts: answer.attempts, updatedAt: this.iso() });
      await this.changed(id);
      return;
    }
    await this.finish(id, answer.outcome === 'ok' ? 'completed' : 'failed', toolResultOf(answer), answer.reason ?? null, answer.callId, answer.attempts);
  }

  /**
   * The refusal an approved flow row gets when a step of it parked it and no call waits on it any
   * more (its broker stopped): its earlier steps ran, and run again from its row they would run
   * twice. A flow parked at its own ask (no step ran) is run from its row as any call.
   */
  private stepNotRerun(row: TaskRow): { outcome: 'cancelled'; text: string; reason: string } {
    const why = 'the flow stopped while one of its steps waited for approval (its broker ended); its earlier steps ran, and it cannot resume there: run the flow again';
    return { outcome: 'cancelled', text: `approved, but not run: ${why}`, reason: `approved by ${row.approvedBy}, not run: ${why}` };
  }

  /** Stores a settled call's answer in its row; `attempts` as the call sent them (its owed record's, should it owe one). */
  private async finish(id: string, status: 'completed' | 'failed', result: CallToolResult, reason: string | null, callId?: string, attempts?: number): Promise<void> {
    try {
      if (await this.deps.store.updateTask(id, ['running'], { status, result, reason, callId, attempts, updatedAt: this.iso() })) await this.changed(id);
    } catch (err) {
      this.deps.logger.error({ taskId: id, err: messageOf(err) }, 'task result could not be stored');
    }
  }

  /** Re-reads row `id`, tells listeners it as readers are shown it, and answers it as stored (undefined once gone). */
  private async changed(id: string): Promise<TaskRow | undefined> {
    const row = await this.deps.store.getTask(id, this.deps.clock.now());
    if (row) this.emit('status', this.shown(row));
    return row;
  }

  private newRow(request: Pick<CallRequest, 'name' | 'args'>, session: CallerSession, target: ToolTarget, status: TaskStatus, ttlMs?: number): TaskRow {
    const at = this.iso();
    const args = this.deps.scrubArgs(request.args);
    return {
      id: randomUUID(),
      status,
      stoppedBy: null,
      owner: this.instanceId,
      principal: session.principal,
      unit: session.unit,
      sessionId: session.sessionId ?? '', // '' for a sessionless (modern) caller: no session to notify
      subject: `${target.server}/${target.toolName}`,
      name: target.name,
      args,
      argsRedacted: JSON.stringify(args) !== JSON.stringify(request.args),
      // Owed from the start (fail closed): the call's record stage clears it when it writes the
      // record (onSettled); a broker that dies first leaves it owed, for the reaper to write.
      recordOwed: true,
      result: null,
      reason: null,
      callId: '',
      approvedBy: null,
      createdAt: at,
      updatedAt: at,
      ttlMs: Math.min(ttlMs ?? this.deps.ttlMs, this.deps.maxTtlMs),
    };
  }

  /** One tick: heartbeat, reap the dead, expire, follow cancels made elsewhere, take up approvals. */
  private tick(): Promise<void> {
    const run = async () => {
      const { store } = this.deps;
      const now = this.deps.clock.now();
      if (now - this.lastBeat >= this.timing.heartbeatMs) {
        await store.heartbeat({ id: this.instanceId, host: this.host, pid: process.pid, startedAt: this.startedAt, heartbeatAt: new Date(now).toISOString() });
        this.lastBeat = now;
      }
      const live = new Map<string, { heartbeatAt: number; host: string; pid: number }>();
      for (const i of await store.listInstances()) {
        if (i.id === this.instanceId) continue;
        const seen = { heartbeatAt: Date.parse(i.heartbeatAt), host: i.host, pid: i.pid };
        if (this.alive(seen)) live.set(i.id, seen);
        else {
          const killed = await store.reapInstance(i.id, new Date(now).toISOString());
          if (killed) this.deps.logger.warn({ instance: i.id, killed }, 'a broker instance ended with tasks running: they are killed');
        }
      }
      this.live = live;
      for (const row of await store.listOwedRecords(now, TASK_LIST_LIMIT)) await this.writeOwed(row, now);
      await store.deleteExpiredTasks(now);
      for (const id of this.runs.keys()) {
        const row = await store.getTask(id, now);
        if (!row || row.status === 'killed') this.runs.get(id)?.abort(new TaskCancelled());
      }
      for (const row of await store.listTasks({ status: 'parked', approved: true, now, limit: TASK_LIST_LIMIT })) await this.takeUp(row);
      for (const id of this.waiters.keys()) {
        const row = await store.getTask(id, now);
        if (!row) this.waiters.get(id)?.resolve({ approved: false, reason: 'the parked call expired' });
        else if (row.status === 'failed' || row.status === 'killed') this.waiters.get(id)?.resolve({ approved: false, reason: row.reason ?? row.status });
      }
    };
    this.ticking = run()
      .catch((err: unknown) => this.deps.logger.warn({ err: messageOf(err) }, 'task tick failed'))
      .finally(() => this.emit('tick'));
    return this.ticking;
  }

  /**
   * Writes the record a row owes when no call will: the row is settled (`failed`, `killed`) or
   * expired, no call here waits on it, and its owner is this instance or a dead one (a live
   * owner writes its own). Claimed in the store first, so one instance writes it once; marked
   * owed again when the record cannot be written. Never throws.
   */
  private async writeOwed(row: TaskRow, now: number): Promise<void> {
    const expired = Date.parse(row.createdAt) + row.ttlMs <= now;
    if (!row.recordOwed || this.waiting.has(row.id) || this.runs.has(row.id)) return; // a call here writes it
    if (row.status === 'running') return; // its call writes it, or its broker ends and the row is killed
    if (row.status !== 'failed' && row.status !== 'killed' && !expired) return;
    if (row.owner !== this.instanceId && this.isLive(row.owner)) return;
    const { store, logger } = this.deps;
    try {
      if (!(await store.setRecordOwed(row.id, false))) return;
      const record = owedRecord(row, expired, now);
      try {
        await this.deps.record?.(record);
      } catch (err) {
        await store.setRecordOwed(row.id, true);
        throw err;
      }
      if (!expired && !row.callId) await store.updateTask(row.id, [row.status], { status: row.status, callId: record.callId, updatedAt: row.updatedAt });
    } catch (err) {
      logger.error({ taskId: row.id, err: messageOf(err) }, 'the record of a settled parked call could not be written; retried on the next tick');
    }
  }

  /** Whether another instance is live: a fresh heartbeat and, on this host, its pid running (and not ours: a reused pid). */
  private alive(i: { heartbeatAt: number; host: string; pid: number }): boolean {
    if (this.deps.clock.now() - i.heartbeatAt > this.timing.staleMs) return false;
    if (i.host !== this.host) return true;
    return i.pid !== process.pid && (this.deps.pidAlive ?? pidAlive)(i.pid);
  }

  private iso(): string {
    return new Date(this.deps.clock.now()).toISOString();
  }
}

function refusal(outcome: string, reason: string): CallToolResult {
  return { content: [{ type: 'text', text: `${outcome}: ${reason}` }], isError: true, _meta: { 'mcp-broker/outcome': outcome } };
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * A settled call's answer as a tool result. A task's `ask` parks in the inbox, so its answer is
 * never an input request; should one come, it is kept as a failed call's reason, not as a result.
 */
function toolResultOf(answer: BrokerAnswer): CallToolResult {
  if (!isInputRequiredResult(answer.result)) return answer.result;
  return { content: [{ type: 'text', text: answer.reason ?? 'the call was answered with an input request' }], isError: true };
}

/**
 * The one record a row owes, written with no call waiting on it: a parked call settled or
 * expired, or a call that settled without writing its own. Its outcome as its row says (a
 * rejection's `approval_required`, a cancel's `cancelled`, a failed call's own), or
 * `approval_required` for a row that expired undecided; its attempts as the row kept them
 * ({@link TaskRow.attempts}: 0 when no call of it settled).
 */
function owedRecord(row: TaskRow, expired: boolean, now: number): CallRecord {
  // A row settled before it expired keeps its own outcome.
  let outcome: Outcome;
  let reason: string;
  if (row.status === 'killed') {
    outcome = 'cancelled';
    reason = row.reason ?? 'the parked call was cancelled';
  } else if (row.status === 'failed') {
    const stored = ((row.result as { _meta?: Record<string, unknown> } | null)?._meta ?? {})[OUTCOME_META_KEY];
    outcome = (OUTCOMES as readonly unknown[]).includes(stored) ? (stored as Outcome) : 'guard_error';
    reason = row.reason ?? outcome;
  } else {
    outcome = 'approval_required';
    reason = expired ? `the parked call expired undecided (its ttl of ${row.ttlMs} ms ran out)` : 'the parked call was not decided';
  }
  return {
    ts: row.createdAt,
    callId: row.callId || newCallId(),
    sessionId: row.sessionId || null,
    principal: row.principal,
    unit: row.unit,
    subject: row.subject,
    name: row.name,
    outcome,
    status: OUTCOME_STATUS[outcome],
    durationMs: Math.max(0, now - Date.parse(row.createdAt)),
    attempts: row.attempts ?? 0,
    bytesOut: 0,
    reason,
    args: row.args,
  };
}
