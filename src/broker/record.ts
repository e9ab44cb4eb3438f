/**
 * The record stage (seed 002 step 9; DESIGN.md "Contract"): after everything inside it has
 * settled the call, writes exactly one record and only then lets the answer go. When the record
 * cannot be written, a call that carried a result is refused `guard_error` and the result
 * withheld (the upstream side effect may have happened); a call already refused keeps its
 * outcome (a deny is never re-labelled) but loses the `input_required` question it would have
 * carried (an `approval_required` first round answers as a plain refusal), and the failure is logged.
 */
import type { RecordSink } from '../audit/records.js';
import { isoTime, type Clock } from '../shared/clock.js';
import { cut } from '../shared/cut.js';
import { messageOf } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import { knownJsonBytes } from '../wire/raw-json.js';
import type { Scrubber } from '../shared/scrub.js';
import { cutReason, MAX_REASON_CHARS } from './failure.js';
import { carriesResult, OUTCOME_STATUS } from './outcomes.js';
import { splitStage, type Stage } from './runner.js';
import { refuse, type BrokerCall, type CallRecord } from './types.js';

export interface RecordDeps {
  records: RecordSink;
  clock: Clock;
  logger: Logger;
  /** Makes argument values safe to keep: the scrubber's `value`. */
  scrubArgs: (args: unknown) => unknown;
  /**
   * Makes text safe to keep: the scrubber's `text`, applied to the caller-given and
   * upstream-given strings of the record (`name`, `subject`, `unit`, `reason`, `stripped`,
   * `flow.step`, `proposal.path`), so the record written, published and streamed holds no
   * secret. Required: a stage built without it would write those strings as given.
   */
  scrubText: (text: string) => string;
  /**
   * The scrubber's {@link Scrubber.generation} and {@link shownRecord}: a record built before a
   * reload added a secret, and written while it did, is published (and kept on the call) as
   * shown, scrubbed again; the file keeps it as written. Default none (published as built).
   */
  shown?: { generation: () => number; record: (record: CallRecord) => CallRecord };
  /** Told after each attempt to write a record whether it was written (metrics). Default none. */
  onRecorded?: (written: boolean) => void;
}

export function recordStage(deps: RecordDeps): Stage {
  return splitStage(
    'record',
    () => true,
    async (call) => {
      if (!call.outcome) refuse(call, 'guard_error', 'the call path ended without an outcome');
      // Still parked: not settled yet; its one record comes when the row settles.
      if (call.recordDeferred && call.outcome === 'cancelled') return;
      if (call.result) call.bytesOut = approximateJsonBytes(call.result);
      else if (call.inputRequired) call.bytesOut = approximateJsonBytes(call.inputRequired);
      const generation = deps.shown?.generation();
      const record = buildRecord(call, deps);
      try {
        await deps.records.append(record);
        call.record = deps.shown && deps.shown.generation() !== generation ? deps.shown.record(record) : record;
        deps.onRecorded?.(true);
      } catch (err) {
        deps.onRecorded?.(false);
        deps.logger.error({ callId: call.callId, err: messageOf(err) }, 'call record could not be written');
        if (carriesResult(call.outcome!)) {
          // Set outside the scrub stage: the sink's error scrubbed whole here, then cut, its own text last so the cut spares what matters.
          const why = `the call record could not be written; the result is withheld, and the upstream side effect may have happened (${messageOf(err)})`;
          refuse(call, 'guard_error', cutReason(deps.scrubText(why)));
          call.bytesOut = 0;
        } else if (call.inputRequired) {
          // The approval question (an input request, its sealed state) would let the caller go on
          // from a round with no record: refused without it, as prompts and resources are.
          call.inputRequired = undefined;
          call.bytesOut = 0;
        }
      }
    },
  );
}

/** Longest `name` and `subject` kept in a record, in characters: a caller's unknown name may be megabytes long. */
export const RECORD_NAME_MAX_CHARS = 1024;

/** A name as recorded: cut (after scrubbing) at {@link RECORD_NAME_MAX_CHARS}, marked with `…`. */
export function cutName(name: string): string {
  return cut(name, RECORD_NAME_MAX_CHARS);
}

export function buildRecord(call: BrokerCall, deps: Pick<RecordDeps, 'clock' | 'scrubArgs' | 'scrubText'>): CallRecord {
  const outcome = call.outcome!;
  const text = deps.scrubText;
  const record: CallRecord = {
    ts: isoTime(call.startedAt),
    callId: call.callId,
    sessionId: call.session.sessionId,
    principal: call.session.principal,
    unit: text(call.session.unit),
    subject: cutName(text(call.target ? `${call.target.server}/${call.target.toolName}` : `?/${call.request.name}`)),
    name: cutName(text(call.request.name)),
    outcome,
    status: OUTCOME_STATUS[outcome],
    durationMs: Math.max(0, deps.clock.now() - call.startedAt),
    attempts: call.attempts,
    bytesOut: call.bytesOut,
    args: deps.scrubArgs(call.request.args),
  };
  if (call.reason !== undefined && outcome !== 'ok') record.reason = text(call.reason);
  if (call.inputRequired && outcome === 'ok') record.resultType = 'input_required';
  if (call.notes.breaker) record.breaker = call.notes.breaker;
  if (call.notes.stripped?.length) record.stripped = call.notes.stripped.map(text);
  // The path is the caller's (resolved in the estate): scrubbed as its other text is.
  if (call.notes.proposal) record.proposal = { ...call.notes.proposal, path: text(call.notes.proposal.path) };
  const flow = call.request.flow;
  if (flow) record.flow = { id: flow.id, step: text(flow.step), ...(flow.phase ? { phase: flow.phase } : {}) };
  if (call.notes.traceId) {
    record.traceId = call.notes.traceId;
    record.spanId = call.notes.spanId;
  }
  return record;
}

/**
 * A written record as a reader is shown it (`GET /api/v1/calls`, `GET /api/v1/events`, the status
 * page, `mcp-broker calls`, the calling session's `debug` log): the fields {@link buildRecord}
 * scrubs (the caller's and the upstream's text: `unit`, `name`, `subject`, `reason`, `args`,
 * `stripped`, `flow.step`, `proposal.path`) scrubbed again with `scrubber`'s secrets of now; the broker's own
 * fields (ids, times, outcome, counts, principal) as written, so a short secret inside a call id
 * never changes the id a reader looks up. The records file keeps each record as written, scrubbed
 * with the secrets known then: a reload that adds a secret must not leave it readable through
 * them. A `name`, `subject` or `reason` written cut (at its cut length, its mark at the end) also
 * loses, with any exact secret known, one fewer characters before the mark than the longest
 * secret spelling, whatever they are (`Scrubber.cutEndText`): the start of a secret that ran across
 * the cut never shows, and what is dropped tells nothing. The record itself when nothing changes;
 * never modifies it.
 */
export function shownRecord<T extends CallRecord>(scrubber: Scrubber, record: T): T {
  let out: T | undefined;
  const set = <K extends keyof CallRecord>(key: K, next: CallRecord[K]) => {
    if (next !== record[key]) (out ??= { ...record })[key] = next as T[K];
  };
  // A line of the file need not be a whole record (one put there by hand, one a crash tore): a
  // field that is missing or of another type is shown as it is.
  const text = (t: string) => (typeof t === 'string' ? scrubber.text(t) : t);
  set('unit', text(record.unit));
  set('name', shownName(scrubber, record.name));
  set('subject', shownName(scrubber, record.subject));
  if (record.reason !== undefined) set('reason', shownReason(scrubber, record.reason));
  set('args', scrubber.value(record.args));
  if (Array.isArray(record.stripped)) {
    const stripped = record.stripped.map(text);
    if (stripped.some((t, i) => t !== record.stripped![i])) set('stripped', stripped);
  }
  if (record.flow && typeof record.flow === 'object') {
    const step = text(record.flow.step);
    if (step !== record.flow.step) set('flow', { ...record.flow, step });
  }
  if (record.proposal && typeof record.proposal === 'object') {
    const path = text(record.proposal.path);
    if (path !== record.proposal.path) set('proposal', { ...record.proposal, path });
  }
  return out ?? record;
}

/** A record's `name` or `subject` as {@link shownRecord} shows it (what a `tool` filter is matched against). */
export function shownName(scrubber: Scrubber, name: string): string {
  return shownCut(scrubber, name, RECORD_NAME_MAX_CHARS, '…');
}

/**
 * A record's `reason` as {@link shownRecord} shows it (a task row's too: it keeps its call's
 * reason, cut as the record's is at `MAX_REASON_CHARS`, marked `...`).
 */
export function shownReason(scrubber: Scrubber, reason: string): string {
  return shownCut(scrubber, reason, MAX_REASON_CHARS, '...');
}

/**
 * Text that may have been cut at `max` characters, `marker` at its end: scrubbed, and
 * `Scrubber.cutEndText`'s drop only when it was. Anything but a string as it is.
 */
function shownCut(scrubber: Scrubber, text: string, max: number, marker: string): string {
  if (typeof text !== 'string') return text;
  return text.length === max && text.endsWith(marker) ? scrubber.cutEndText(text, marker) : scrubber.text(text);
}

/**
 * Bytes of the value as JSON, estimated without serialising it: strings measured natively
 * (`Buffer.byteLength`, quotes included), keys by their length, structure counted; exact for a
 * large result parsed by its bytes. Not exact: an escape (`\u0001` is six bytes) or a non-ASCII
 * key counts less than it writes, but never more than {@link JSON_EXPANSION} times less (nesting
 * past 64 levels is serialised whole, so that bound holds there too): the evaluate stage judges
 * `policy.output.maxBytes` exactly ({@link jsonBytes}) whenever the bound does not settle it.
 */
export function approximateJsonBytes(value: unknown): number {
  return jsonSize(value, 0, false);
}

/**
 * How many times {@link approximateJsonBytes} may under-count: a UTF-16 unit is at most six
 * bytes of JSON (`\uXXXX`), and every string, key and unit counts at least one.
 */
export const JSON_EXPANSION = 6;

/**
 * Bytes of the value as JSON (UTF-8), never fewer than `JSON.stringify` writes: exact but for
 * one comma counted after every member and element. Slower than {@link approximateJsonBytes}
 * (every string's escapes are counted): for a size that must not be under-counted.
 */
export function jsonBytes(value: unknown): number {
  return jsonSize(value, 0, true);
}

/** The walk of both: strings and keys estimated, or (`exact`) counted with their escapes. */
function jsonSize(value: unknown, depth: number, exact: boolean): number {
  // A large result parsed by its bytes (wire/raw-json.ts) knows its exact size: no walk.
  const known = depth === 0 ? knownJsonBytes(value) : undefined;
  if (known !== undefined) return known;
  if (typeof value === 'string') return exact ? jsonStringBytes(value) : Buffer.byteLength(value) + 2;
  if (value === null || typeof value !== 'object') return String(value).length;
  // Deeper than this walk goes: serialised whole (a nesting too deep for that throws, and the stage's error boundary refuses the call).
  if (depth > 64) return Buffer.byteLength(JSON.stringify(value) ?? '');
  let total = 2;
  if (Array.isArray(value)) {
    for (const v of value) total += jsonSize(v, depth + 1, exact) + 1;
    return total;
  }
  for (const k of Object.keys(value)) total += (exact ? jsonStringBytes(k) + 2 : k.length + 4) + jsonSize((value as Record<string, unknown>)[k], depth + 1, exact);
  return total;
}

/** Characters `JSON.stringify` writes as escapes: `"`, `\\`, control characters (`\u0001`: six bytes), surrogates (a lone one: six). */
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/** The exact UTF-8 size of `text` as a JSON string, quotes included; serialised only when it holds a character written as an escape. */
function jsonStringBytes(text: string): number {
  return ESCAPED.test(text) ? Buffer.byteLength(JSON.stringify(text)) : Buffer.byteLength(text) + 2;
}
