import type { CallToolResult } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { compose } from '../../src/broker/runner.js';
import { scrubResult, scrubStage } from '../../src/broker/scrub.js';
import { refuse } from '../../src/broker/types.js';
import { REDACTED, Scrubber } from '../../src/shared/scrub.js';
import { call, fakeInvoke, target, text } from './support.js';

const SECRET = 'upstream-env-secret-42';
const scrubber = new Scrubber([SECRET]);

async function through(result: CallToolResult, t = target()) {
  const run = compose([scrubStage({ scrubber }), fakeInvoke((c) => ((c.outcome = 'ok'), (c.result = result)))]);
  const c = call({ target: t });
  await run(c);
  return c;
}

describe('scrub stage', () => {
  it('F17: scrubs text, embedded resource text, resource links, structuredContent and _meta; keeps binary data and every block', async () => {
    const image = 'iVBORw0KGgo' + SECRET; // binary data is never rewritten
    const result: CallToolResult = {
      content: [
        { type: 'text', text: `token is ${SECRET}` },
        { type: 'image', data: image, mimeType: 'image/png' },
        { type: 'resource', resource: { uri: 'file:///a', text: `password=${SECRET}`, mimeType: 'text/plain' } },
        { type: 'resource_link', uri: `https://h/x?api_key=${SECRET}`, name: 'link' },
        { type: 'text', text: 'clean' },
      ],
      structuredContent: { value: SECRET, n: 1 },
      _meta: { trace: SECRET },
    };
    const c = await through(result);
    const out = c.result!;
    expect(c.outcome).toBe('ok');
    expect(out.content).toHaveLength(5);
    expect(JSON.stringify({ ...out, content: out.content.filter((b) => b.type !== 'image') })).not.toContain(SECRET);
    expect(out.content[1]).toBe(result.content[1]);
    expect(out.content[4]).toBe(result.content[4]);
    expect(out.structuredContent).toEqual({ value: REDACTED, n: 1 });
    expect(result.structuredContent).toEqual({ value: SECRET, n: 1 }); // input untouched
  });

  it('a result that needs no change keeps its reference (no copy, no re-serialising)', async () => {
    const result = text('nothing secret', { structuredContent: { a: 1 } });
    expect(scrubResult(scrubber, result).result).toBe(result);
    expect((await through(result)).result).toBe(result);
  });

  it('scrubbed structuredContent that no longer fits the outputSchema is withheld', async () => {
    const t = target('fx__key', { tool: { outputSchema: { type: 'object', properties: { key: { type: 'string', pattern: '^upstream-' } }, required: ['key'] } } });
    const c = await through(text('k', { structuredContent: { key: SECRET } }), t);
    expect(c.outcome).toBe('withheld');
    expect(c.result).toBeUndefined();
    expect(c.reason).toContain('outputSchema');
    expect(c.reason).not.toContain(SECRET);
  });

  it('scrubbed structuredContent that still fits passes; a numeric secret under a password name that breaks a number type is withheld', async () => {
    const t = target('fx__s', { tool: { outputSchema: { type: 'object', properties: { note: { type: 'string' } } } } });
    expect((await through(text('k', { structuredContent: { note: SECRET } }), t)).outcome).toBe('ok');
    const n = target('fx__n', { tool: { outputSchema: { type: 'object', properties: { pin: { type: 'integer' } } } } });
    expect((await through(text('k', { structuredContent: { pin: 1234 } }), n)).outcome).toBe('withheld');
  });

  it('scrubs the reason of a refusal or tool_error', async () => {
    const run = compose([scrubStage({ scrubber }), fakeInvoke((c) => refuse(c, 'upstream_error', `connect failed with ${SECRET}`))]);
    const c = call({ target: target() });
    await run(c);
    expect(c.reason).toBe(`connect failed with ${REDACTED}`);
  });
});
