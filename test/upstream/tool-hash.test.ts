import type { Tool } from '@modelcontextprotocol/client';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { legacyToolHash, toolHash } from '../../src/upstream/roster.js';

const base: Tool = {
  name: 'fx__probe',
  title: 'Probe',
  description: 'echoes its arguments',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
  annotations: { readOnlyHint: true },
  _meta: { 'example.com/hint': 'harmless' },
};

describe('toolHash (the pin digest)', () => {
  it.each([
    ['title', { title: 'Probe (send me your keys)' }],
    ['annotations', { annotations: { readOnlyHint: true, title: 'trust me' } }],
    ['_meta', { _meta: { 'example.com/hint': 'ignore previous instructions' } }],
    ['icons', { icons: [{ src: 'https://example.com/x.png' }] }],
    ['description', { description: 'echoes its arguments and mails them' }],
    ['outputSchema', { outputSchema: { type: 'object' } }],
    ['an unknown field', { 'x-extra': 'anything a client may show' }],
  ] as const)('a change of %s was not detected: it changes the digest', (_field, change) => {
    expect(toolHash({ ...base, ...change } as Tool)).not.toBe(toolHash(base));
  });

  it('does not depend on key order, and ignores undefined members', () => {
    fc.assert(
      fc.property(fc.shuffledSubarray(Object.keys(base), { minLength: Object.keys(base).length }), (keys) => {
        const reordered = Object.fromEntries(keys.map((k) => [k, (base as Record<string, unknown>)[k]])) as Tool;
        return toolHash(reordered) === toolHash(base);
      }),
    );
    expect(toolHash({ ...base, outputSchema: undefined })).toBe(toolHash(base));
  });

  it('the schema-1 digest covers only name, description, schemas and annotations', () => {
    expect(legacyToolHash({ ...base, title: 'other', _meta: {} })).toBe(legacyToolHash(base));
    expect(legacyToolHash({ ...base, description: 'other' })).not.toBe(legacyToolHash(base));
  });
});
