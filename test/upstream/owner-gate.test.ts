/**
 * The owner gate (issue 14, exact attribution on stdio/SSE upstreams): calls of one owner at a
 * time, FIFO between owners, no starvation, waits abortable. Driven by releases and abort
 * signals only; the order of admissions is observed through settled promises.
 */
import { describe, expect, it } from 'vitest';
import { OwnerGate, type GateRelease } from '../../src/upstream/owner-gate.js';

/** Lets every promise callback queued so far run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Enters and notes, in `log`, when the turn came. */
function entering(gate: OwnerGate, owner: string, log: string[], label: string, signal?: AbortSignal) {
  const turn = gate.enter(owner, signal).then((release) => {
    log.push(label);
    return release;
  });
  return turn;
}

describe('OwnerGate', () => {
  it('lets the calls of one owner through together, at once', () => {
    const gate = new OwnerGate();
    const a1 = gate.tryEnter('a');
    const a2 = gate.tryEnter('a');
    expect(a1).toBeTypeOf('function');
    expect(a2).toBeTypeOf('function');
    expect(gate.current).toBe('a');
    a1!();
    expect(gate.current).toBe('a');
    a2!();
    expect(gate.current).toBeUndefined();
  });

  it("holds another owner's call until every call in flight has ended", async () => {
    const gate = new OwnerGate();
    const log: string[] = [];
    const a1 = gate.tryEnter('a')!;
    const a2 = gate.tryEnter('a')!;
    expect(gate.tryEnter('b')).toBeUndefined();
    const b = entering(gate, 'b', log, 'b');
    a1();
    await settle();
    expect(log).toEqual([]);
    a2();
    await settle();
    expect(log).toEqual(['b']);
    expect(gate.current).toBe('b');
    (await b)();
    expect(gate.current).toBeUndefined();
  });

  it('queues new calls of the holder behind a waiting owner (no starvation), then serves owners first come first served', async () => {
    const gate = new OwnerGate();
    const log: string[] = [];
    const a1 = gate.tryEnter('a')!;
    const b1 = entering(gate, 'b', log, 'b1');
    // b waits: a's next call may not overtake it.
    expect(gate.tryEnter('a')).toBeUndefined();
    const a2 = entering(gate, 'a', log, 'a2');
    const c1 = entering(gate, 'c', log, 'c1');
    const b2 = entering(gate, 'b', log, 'b2');
    a1();
    await settle();
    expect(log).toEqual(['b1']);
    (await b1)();
    await settle();
    expect(log).toEqual(['b1', 'a2']);
    (await a2)();
    await settle();
    expect(log).toEqual(['b1', 'a2', 'c1']);
    (await c1)();
    await settle();
    expect(log).toEqual(['b1', 'a2', 'c1', 'b2']);
    (await b2)();
    expect(gate.current).toBeUndefined();
    expect(gate.waiting).toBe(0);
  });

  it("lets a new holder's calls queued together at the head through together", async () => {
    const gate = new OwnerGate();
    const log: string[] = [];
    const a1 = gate.tryEnter('a')!;
    const b1 = entering(gate, 'b', log, 'b1');
    const b2 = entering(gate, 'b', log, 'b2');
    a1();
    await settle();
    expect(log).toEqual(['b1', 'b2']);
    (await b1)();
    (await b2)();
  });

  it('a waiting call that is aborted leaves the queue, rejects with the reason, and holds nothing', async () => {
    const gate = new OwnerGate();
    const log: string[] = [];
    const a1 = gate.tryEnter('a')!;
    const cancel = new AbortController();
    const b = entering(gate, 'b', log, 'b', cancel.signal);
    const c = entering(gate, 'c', log, 'c');
    const reason = new Error('deadline');
    cancel.abort(reason);
    await expect(b).rejects.toBe(reason);
    expect(gate.waiting).toBe(1);
    a1();
    await settle();
    expect(log).toEqual(['c']);
    (await c)();
    expect(gate.current).toBeUndefined();
  });

  it("the holder's calls queued behind an aborted waiter go through as soon as it left", async () => {
    const gate = new OwnerGate();
    const log: string[] = [];
    const a1 = gate.tryEnter('a')!;
    const cancel = new AbortController();
    const b = entering(gate, 'b', log, 'b', cancel.signal);
    const a2 = entering(gate, 'a', log, 'a2');
    cancel.abort(new Error('cancelled'));
    await b.catch(() => undefined);
    await settle();
    expect(log).toEqual(['a2']);
    a1();
    (await a2)();
    expect(gate.current).toBeUndefined();
  });

  it('rejects at once with an aborted signal, and a release called twice counts once', async () => {
    const gate = new OwnerGate();
    const reason = new Error('gone');
    await expect(gate.enter('a', AbortSignal.abort(reason))).rejects.toBe(reason);
    const a1: GateRelease = gate.tryEnter('a')!;
    const a2: GateRelease = gate.tryEnter('a')!;
    a1();
    a1();
    expect(gate.current).toBe('a');
    a2();
    expect(gate.current).toBeUndefined();
  });
});
