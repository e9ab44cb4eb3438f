import { describe, expect, it } from 'vitest';
import { FlowReferenceError, resolveReferences, resultValue } from '../../src/flows/references.js';
import { rollbackDescriptors, unappliedRollbackCall } from '../../src/flows/rollback.js';

describe('flow references', () => {
  const results = new Map<string, unknown>([
    ['make', { id: 7, items: [{ name: 'x' }] }],
    ['text', 'plain'],
  ]);

  it('a whole-string reference keeps the value\'s type; an embedded one becomes text', () => {
    expect(resolveReferences({ a: '${steps.make.result.id}', b: 'id=${steps.make.result.id}', c: ['${steps.make.result.items[0]}'] }, results)).toEqual({
      a: 7,
      b: 'id=7',
      c: [{ name: 'x' }],
    });
    expect(resolveReferences('${steps.make.result}/${steps.text.result}', results)).toBe('{"id":7,"items":[{"name":"x"}]}/plain');
  });

  it('a step that has not run, or a path the result lacks, is a FlowReferenceError', () => {
    expect(() => resolveReferences('${steps.later.result}', results)).toThrow(FlowReferenceError);
    expect(() => resolveReferences('${steps.make.result.nope}', results)).toThrow(/has no \.nope/);
    expect(() => resolveReferences('${steps.make.data}', results)).toThrow(/not of the form/);
    // Inherited members are no part of a result (they resolved to a function, dropped from the arguments, or "undefined" in text).
    for (const inherited of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      expect(() => resolveReferences(`pre-\${steps.make.result.${inherited}}-post`, results), inherited).toThrow(FlowReferenceError);
    }
  });

  it('result is structuredContent, else the JSON text, else the text', () => {
    expect(resultValue({ content: [{ type: 'text', text: '{"a":1}' }], structuredContent: { b: 2 } })).toEqual({ b: 2 });
    expect(resultValue({ content: [{ type: 'text', text: '{"a":1}' }] })).toEqual({ a: 1 });
    expect(resultValue({ content: [{ type: 'text', text: 'hello' }] })).toBe('hello');
  });
});

describe('rollback descriptors', () => {
  it('one descriptor or an array; entries of another shape are skipped', () => {
    const meta = (v: unknown) => ({ content: [], _meta: { 'mcp-broker/rollback': v } });
    expect(rollbackDescriptors(meta({ tool: 'kv__delete', args: { key: 'a' } }))).toEqual([{ tool: 'kv__delete', args: { key: 'a' } }]);
    expect(rollbackDescriptors(meta([{ tool: 'a' }, { tool: 5 }, 'x', { tool: 'b', args: [] }]))).toEqual([{ tool: 'a', args: {} }]);
    expect(rollbackDescriptors({ content: [] })).toEqual([]);
  });

  it('the unapplied call is the tool name and its arguments as one line of JSON', () => {
    expect(unappliedRollbackCall({ tool: 'kv__put', args: { key: 'a', value: 'multi\nline' } })).toBe('kv__put {"key":"a","value":"multi\\nline"}');
  });
});
