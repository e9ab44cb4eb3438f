/**
 * A table of work in flight (requests, calls, their routes) kept by a long-lived owner: a `Map`
 * whose entries let go of their values when they are removed (issue 19).
 *
 * Why not a plain `Map`: V8 moves a `Map`'s entries to a new backing table whenever its deleted
 * entries have filled the old one, and the old table goes on pointing at every entry it held.
 * Once a backing table has lived long enough to sit in the old generation, each table made from
 * it is put there too, and a scavenge cannot tell such a table is garbage: whatever its entries
 * reach (a call's signal, the promise it awaits, through that its whole object graph) survives
 * every scavenge and is promoted, until the next full collection. A table of calls in flight
 * churns one entry per call, so under load that was most of what the broker promoted
 * (bench/README.md, "What each change bought": at 64 concurrent calls ~11 % of all it
 * allocated). Here each entry is a box emptied when the entry is removed; a stale table then
 * holds empty boxes (the stale tables themselves are still old garbage until a full collection:
 * ~70 bytes a call per table, not the call).
 *
 * Keys are kept as they are: use numbers or strings (ids), never the objects of a call.
 * `has`, `get`, `set`, `delete`, `clear` and `size` are the `Map`'s; {@link values} returns an
 * array snapshot, and the table is not itself iterable.
 */
export class InflightTable<K, V> {
  private readonly boxes = new Map<K, { value: V | undefined }>();

  /** Entries in the table. */
  get size(): number {
    return this.boxes.size;
  }

  has(key: K): boolean {
    return this.boxes.has(key);
  }

  get(key: K): V | undefined {
    return this.boxes.get(key)?.value;
  }

  set(key: K, value: V): this {
    const box = this.boxes.get(key);
    if (box) box.value = value;
    else this.boxes.set(key, { value });
    return this;
  }

  /** Removes `key` and empties its box; whether it was there. */
  delete(key: K): boolean {
    const box = this.boxes.get(key);
    if (!box) return false;
    box.value = undefined;
    return this.boxes.delete(key);
  }

  /** Removes every entry, emptying each box. */
  clear(): void {
    for (const box of this.boxes.values()) box.value = undefined;
    this.boxes.clear();
  }

  /** The values in insertion order, as a new array (a snapshot: the table may change while it is used). */
  values(): V[] {
    const out: V[] = [];
    for (const box of this.boxes.values()) out.push(box.value as V);
    return out;
  }
}
