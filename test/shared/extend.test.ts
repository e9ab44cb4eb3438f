import fc from 'fast-check';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { extend, hasOwnMember } from '../../src/shared/extend.js';

/** Own keys in order, each with its value, and the prototype: what tells two copies apart. */
const shape = (o: object) => ({ keys: Reflect.ownKeys(o), values: Reflect.ownKeys(o).map((k) => (o as Record<PropertyKey, unknown>)[k]), proto: Object.getPrototypeOf(o) });

// Keys a spread and Object.assign could disagree on: `__proto__`, integer-like keys (they sort first), shared keys.
const key = fc.oneof(fc.constantFrom('__proto__', '0', '10', 'a', '_meta', 'constructor'), fc.string({ maxLength: 4 }));
// Built through JSON.parse, so `__proto__` is an own data member, as in a message from the wire.
const jsonObject = fc.dictionary(key, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 6 }).map((d) => JSON.parse(JSON.stringify(d)) as Record<string, unknown>);

describe('extend', () => {
  it('makes what { ...base, ...extra } makes: the same keys in the same order, values and prototype', () => {
    fc.assert(
      fc.property(fc.oneof(jsonObject, fc.constantFrom(null, undefined)), jsonObject, (base, extra) => {
        expect(shape(extend(base, extra))).toEqual(shape({ ...base, ...extra }));
      }),
      { numRuns: 500 },
    );
  });

  it('takes a null or undefined base as no members, and copies symbol keys as a spread does', () => {
    const sym = Symbol('s');
    expect(shape(extend(undefined, { b: 2 }))).toEqual(shape({ b: 2 }));
    expect(shape(extend(null, { b: 2 }))).toEqual(shape({ b: 2 }));
    const own = JSON.parse('{"__proto__": {"admin": true}, "x": 1}') as Record<string, unknown>;
    expect(Object.keys(extend(undefined, own))).toEqual(['__proto__', 'x']);
    expect((extend(undefined, own) as Record<string, unknown>).admin).toBeUndefined();
    expect(shape(extend({ [sym]: 1, a: 1 }, { a: 3 }))).toEqual(shape({ [sym]: 1, a: 3 }));
    const polluted = JSON.parse('{"__proto__": {"admin": true}, "a": 1}') as Record<string, unknown>;
    const out = extend(polluted, { b: 2 }) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(out.admin).toBeUndefined();
    expect(Object.keys(out)).toEqual(['__proto__', 'a', 'b']);
  });

  it('gives every copy of one shape the same hidden class, where a warm spread on Node 20 makes a new one each time', () => {
    const fixture = fileURLToPath(new URL('../fixtures/extend-maps.mjs', import.meta.url));
    const counted = JSON.parse(execFileSync(process.execPath, ['--allow-natives-syntax', fixture], { encoding: 'utf8' })) as { extend: number; spread: number };
    expect(counted.extend).toBe(0);
    // What extend exists for (V8 11, Node 20): the spread copy's added member takes a fresh class on every call.
    if (process.versions.v8.startsWith('11.')) expect(counted.spread).toBeGreaterThan(10_000);
  });
});

describe('hasOwnMember', () => {
  it('answers as Object.keys(value).length > 0: inherited, symbol-keyed and non-enumerable members do not count', () => {
    const withSymbol = { [Symbol('s')]: 1 };
    const hidden = Object.defineProperty({}, 'x', { value: 1, enumerable: false });
    const inherited = Object.create({ inheritedKey: 1 }) as object;
    for (const v of [withSymbol, hidden, inherited, {}, { a: undefined }, JSON.parse('{"__proto__":1}') as object, [], [1], null, undefined]) {
      expect(hasOwnMember(v)).toBe(v != null && Object.keys(v).length > 0);
    }
    fc.assert(
      fc.property(jsonObject, (o) => {
        expect(hasOwnMember(o)).toBe(Object.keys(o).length > 0);
      }),
    );
  });
});

