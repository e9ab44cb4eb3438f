import type { CallToolResult } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { compileDenyPatterns, evaluateStage } from '../../src/broker/evaluate.js';
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
