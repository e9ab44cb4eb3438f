import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { advertisedName, advertisedNames, NAME_PATTERN } from '../../src/upstream/naming.js';

describe('advertisedName', () => {
  it('joins prefix and tool with "__"', () => {
    expect(advertisedName('fs', 'read_file')).toBe('fs__read_file');
    expect(advertisedName('', 'read_file')).toBe('read_file');
  });

  it('F14: sanitises ".", "/", spaces and non-ASCII to "_"', () => {
    expect(advertisedName('svc', 'a.b/c d汉')).toBe('svc__a_b_c_d_');
  });

  it('F14: cuts over-long names with a stable hash suffix', () => {
    const name = advertisedName('servicenow-catalog', 'post_api_sn_sc_servicecatalog_items_by_sys_id_versioning_checkout');
    expect(name).toMatch(NAME_PATTERN);
    expect(name.length).toBe(64);
    expect(name).toBe(advertisedName('servicenow-catalog', 'post_api_sn_sc_servicecatalog_items_by_sys_id_versioning_checkout'));
    expect(name.startsWith('servicenow-catalog__post_api')).toBe(true);
  });

  it('every advertised name matches the Contract pattern, and distinct long names stay distinct', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_-]{0,30}$/), fc.string({ minLength: 1, maxLength: 200 }), (prefix, tool) => {
        expect(advertisedName(prefix, tool)).toMatch(NAME_PATTERN);
      }),
    );
    fc.assert(
      fc.property(fc.string({ minLength: 70, maxLength: 120 }), fc.string({ minLength: 70, maxLength: 120 }), (a, b) => {
        fc.pre(a !== b);
        const x = advertisedName('p', `long_${a}`);
        const y = advertisedName('p', `long_${b}`);
        expect(x === y).toBe(false);
      }),
    );
  });
});

describe('advertisedNames', () => {
  it('F14: one upstream\'s names that sanitise alike each get their own, matching the pattern, whatever the order (they were one name: the second withheld)', () => {
    // A small alphabet, so that names often sanitise alike ("a.b", "a/b", "a_b").
    const name = fc.stringMatching(/^[ab._/ 汉]{1,6}$/);
    fc.assert(
      fc.property(fc.uniqueArray(name, { minLength: 1, maxLength: 12 }), fc.constantFrom('', 'p'), (originals, prefix) => {
        const names = advertisedNames(prefix, originals);
        expect(new Set(names).size).toBe(originals.length);
        for (const n of names) expect(n).toMatch(NAME_PATTERN);
        const byOriginal = new Map(originals.map((o, i) => [o, names[i]]));
        const reversed = [...originals].reverse();
        expect(new Map(reversed.map((o, i) => [o, advertisedNames(prefix, reversed)[i]]))).toEqual(byOriginal);
        // A name with no sibling to tell apart from is its advertisedName.
        originals.forEach((o, i) => {
          if (originals.every((other) => other === o || advertisedName(prefix, other) !== advertisedName(prefix, o))) expect(names[i]).toBe(advertisedName(prefix, o));
        });
      }),
    );
  });

  it('a tool the upstream adds never takes a name another tool had: an advertised name routes to one original, or to none', () => {
    const name = fc.stringMatching(/^[ab._/ 汉]{1,6}$/);
    fc.assert(
      fc.property(fc.uniqueArray(name, { minLength: 1, maxLength: 12 }), name, fc.constantFrom('', 'p'), (before, added, prefix) => {
        fc.pre(!before.includes(added));
        const after = [...before, added];
        const was = new Map(advertisedNames(prefix, before).map((n, i) => [n, before[i]]));
        const now = new Map(advertisedNames(prefix, after).map((n, i) => [n, after[i]]));
        for (const [advertised, original] of now) if (was.has(advertised)) expect(original).toBe(was.get(advertised));
      }),
    );
  });
});
