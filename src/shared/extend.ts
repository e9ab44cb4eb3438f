/**
 * `{ ...base, ...extra }` for objects made once per call on the broker path (issue 19).
 *
 * On Node 20 (V8 11.3) a spread copy gets a hidden class that is not linked into V8's tree of
 * classes, so every member added to the copy afterwards (`{ ...base, key: value }`, a second
 * spread) makes a new hidden class, allocated in the old generation, each time it runs (from the
 * first calls on, interpreted or optimized): ~0.4 µs, and old space that only a full collection
 * gives back (bench/README, "What each change bought"). `Object.assign` onto a fresh `{}` follows
 * the cached classes instead (~0.05 µs). Node 22 and 24 have neither cost; the result is the
 * same there.
 *
 * Same members, order and values as the spread: own enumerable string and symbol keys of `base`,
 * then those of `extra`, a key of both keeping `base`'s place with `extra`'s value. `base` may be
 * `null` or `undefined` (no members, as a spread of them; a `_meta` from the wire can be `null`).
 * A `__proto__` key (an own data member, as `JSON.parse` makes one) would be a prototype
 * assignment to `Object.assign`, so with one in either object the spread itself is used.
 */
export function extend<B extends object, E extends object>(base: B | null | undefined, extra: E): Omit<B, keyof E> & E {
  if (Object.hasOwn(extra, '__proto__') || (base != null && Object.hasOwn(base, '__proto__'))) return { ...base, ...extra } as Omit<B, keyof E> & E;
  return Object.assign({}, base, extra);
}

/** Whether `value` has an own enumerable string-keyed member (`Object.keys(value).length > 0`, without making the array). */
export function hasOwnMember(value: object | null | undefined): boolean {
  for (const key in value) if (Object.hasOwn(value!, key)) return true;
  return false;
}
