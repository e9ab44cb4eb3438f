import type { CallToolResult } from '@modelcontextprotocol/server';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileDenyPatterns, evaluateStage } from '../../src/broker/evaluate.js';
import { approximateJsonBytes, JSON_EXPANSION, jsonBytes } from '../../src/broker/record.js';
import { compose } from '../../src/broker/runner.js';
import { call, fakeInvoke, target, text } from './support.js';

async function evaluate(result: CallToolResult, deps: { maxBytes?: number; deny?: string[] }, outcome: 'ok' | 'tool_error' = 'ok') {
  const run = compose([
    evaluateStage({ maxBytes: deps.maxBytes ?? 1 << 20, deny: deps.deny ?? [] }),
    fakeInvoke((c) => ((c.outcome = outcome), (c.result = result))),
  ]);
  const c = call({ target: target() });
  await run(c);
  return c;
}

describe('evaluate stage', () => {
  it('withholds a result over policy.output.maxBytes', async () => {
    const c = await evaluate(text('x'.repeat(2000)), { maxBytes: 1000 });
    expect(c.outcome).toBe('withheld');
    expect(c.result).toBeUndefined();
    expect(c.reason).toContain('policy.output.maxBytes');
    expect((await evaluate(text('x'.repeat(500)), { maxBytes: 1000 })).outcome).toBe('ok');
  });

  it('a result whose JSON grows by escapes or hides deep in structuredContent is measured as sent (both were under-counted and let through)', async () => {
    // 40,000 control characters: 40 KB of text, 240 KB as JSON (each one \u0001).
    expect((await evaluate(text('\u0001'.repeat(40_000)), { maxBytes: 100_000 })).outcome).toBe('withheld');
    // A 200 KB string 70 levels down: past the walk's depth it was counted as "[object Object]".
    let deep: unknown = { s: 'a'.repeat(200_000) };
    for (let i = 0; i < 70; i++) deep = { d: deep };
    expect((await evaluate(text('x', { structuredContent: deep as Record<string, unknown> }), { maxBytes: 100_000 })).outcome).toBe('withheld');
    // Non-ASCII keys count their bytes, and quotes and backslashes their escapes.
    expect((await evaluate(text('x', { structuredContent: { ['é'.repeat(20_000)]: '"\\'.repeat(20_000) } }), { maxBytes: 100_000 })).outcome).toBe('withheld');
  });

  it('property: the exact size is never under the serialised size (over it by one comma a member or element at most), and the estimate never under it by more than its bound', () => {
    const json = fc.jsonValue({ maxDepth: 6 });
    const commas = (v: unknown): number => (Array.isArray(v) ? v.length + v.reduce((n: number, x) => n + commas(x), 0) : v && typeof v === 'object' ? Object.values(v).reduce((n: number, x) => n + 1 + commas(x), 0) : 0);
    fc.assert(
      fc.property(fc.oneof(json, fc.string({ unit: 'binary' }), fc.dictionary(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }))), (value) => {
        const exact = Buffer.byteLength(JSON.stringify(value));
        const measured = jsonBytes(value);
        expect(measured).toBeGreaterThanOrEqual(exact);
        expect(measured - exact).toBeLessThanOrEqual(commas(value));
        expect(approximateJsonBytes(value) * JSON_EXPANSION).toBeGreaterThanOrEqual(exact);
      }),
      { numRuns: 500 },
    );
  });

  it('withholds a result whose text, resource text or structured strings match a deny pattern; the reason never quotes it', async () => {
    const deny = ['INTERNAL-ONLY', '\\b\\d{3}-\\d{2}-\\d{4}\\b'];
    const c1 = await evaluate(text('ssn 123-45-6789'), { deny });
    expect(c1).toMatchObject({ outcome: 'withheld', reason: 'the result matched policy.output.deny[1]' });
    const c2 = await evaluate({ content: [{ type: 'resource', resource: { uri: 'x:a', text: 'INTERNAL-ONLY memo' } }] }, { deny });
    expect(c2.outcome).toBe('withheld');
    const c3 = await evaluate(text('fine', { structuredContent: { items: [{ note: 'INTERNAL-ONLY' }] } }), { deny });
    expect(c3.outcome).toBe('withheld');
    expect((await evaluate(text('fine'), { deny })).outcome).toBe('ok');
  });

  it('judges tool_error bodies too', async () => {
    expect((await evaluate(text('INTERNAL-ONLY', { isError: true }), { deny: ['INTERNAL'] }, 'tool_error')).outcome).toBe('withheld');
  });

  it('a bad deny pattern is a config error naming its index', () => {
    expect(() => compileDenyPatterns(['ok', '(unclosed'])).toThrow(/policy\.output\.deny\[1\]/);
  });
});
