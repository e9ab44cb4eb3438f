/**
 * The memory relief after large results (src/shared/memory-relief.ts): one collection per burst,
 * a real full collection, and on V8s that know the memory-reducing flavour, the young
 * generation given back. V8's own collector runs here; nothing is stubbed.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { getHeapSpaceStatistics } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { LARGE_RESULT_BYTES, MemoryRelief, V8_READS_GC_OPTIONS } from '../../src/shared/memory-relief.js';

const MiB = 1024 * 1024;
const newSpaceBytes = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_size;

/** A relief with no quiet time, and the promise of its next collection's duration (ms). */
function relief(): { relief: MemoryRelief; collections: number[]; next: () => Promise<number> } {
  const collections: number[] = [];
  let wake: ((ms: number) => void) | undefined;
  const r = new MemoryRelief(0, (ms) => {
    collections.push(ms);
    wake?.(ms);
  });
  return { relief: r, collections, next: () => new Promise((resolve) => (wake = resolve)) };
}

/** An object only a WeakRef reaches (made in its own frame, so no local keeps it). */
function unreachable(): WeakRef<object> {
  return new WeakRef({ payload: new Array(1000).fill('x') });
}

describe('MemoryRelief', () => {
  it('collects once after a burst of large results, and not for small ones', async () => {
    const { relief: r, collections, next } = relief();
    const collected = next();
    r.noteLarge(LARGE_RESULT_BYTES - 1);
    r.noteLarge(LARGE_RESULT_BYTES);
    r.noteLarge(8 * MiB);
    r.noteLarge(LARGE_RESULT_BYTES);
    await collected;
    // A timer set after the relief's has fired: any second collection would have run by now.
    await sleep(5);
    expect(collections).toHaveLength(1);
    r.noteLarge(100);
    await sleep(5);
    expect(collections).toHaveLength(1);
    r.stop();
  });

  it('runs a full collection: garbage only a WeakRef reaches is gone', async () => {
    const { relief: r, next } = relief();
    const ref = unreachable();
    const collected = next();
    r.noteLarge(LARGE_RESULT_BYTES);
    await collected;
    expect(ref.deref()).toBeUndefined();
  });

  it('stop() cancels a pending collection', async () => {
    const { relief: r, collections } = relief();
    r.noteLarge(LARGE_RESULT_BYTES);
    r.stop();
    await sleep(5);
    expect(collections).toHaveLength(0);
  });

  it.runIf(V8_READS_GC_OPTIONS)('gives the young generation back (V8 12+: Node 22, 24)', async () => {
    // Grow the young generation the way a burst of results does: allocation that survives a scavenge.
    let keep: object[] = [];
    for (let i = 0; i < 2_000_000 && newSpaceBytes() < 16 * MiB; i++) {
      keep.push({ i, s: `v${i}` });
      if (keep.length > 100_000) keep = keep.slice(50_000);
    }
    const grown = newSpaceBytes();
    expect(grown).toBeGreaterThanOrEqual(16 * MiB);
    keep = [];
    const { relief: r, next } = relief();
    const collected = next();
    r.noteLarge(8 * MiB);
    await collected;
    expect(newSpaceBytes()).toBeLessThanOrEqual(grown / 4);
  });
});
