import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { advertisedName, NAME_PATTERN } from '../../src/upstream/naming.js';

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
