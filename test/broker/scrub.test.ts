import type { CallToolResult } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { compose } from '../../src/broker/runner.js';
import { scrubResult, scrubStage } from '../../src/broker/scrub.js';
import { refuse } from '../../src/broker/types.js';
import { REDACTED, Scrubber } from '../../src/shared/scrub.js';
import { LAZY_STRING_MIN_BYTES, parseResponseLine, rawJsonString } from '../../src/wire/raw-json.js';
import { call, fakeInvoke, target, text } from './support.js';
import { resultOf } from '../support/messages.js';

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

  it('scrubs every member an upstream puts in a result, keys included, not only content, structuredContent and _meta; non-array content and bare strings in content; a text blob of an embedded resource', async () => {
    const b64 = (t: string) => Buffer.from(t, 'utf8').toString('base64');
    const binary = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0xff, 0xfe, 0x00, 0x01]).toString('base64');
    const result = {
      content: [
        { type: 'resource', resource: { uri: 'file:///a', blob: b64(`key ${SECRET}`), mimeType: 'text/plain' } },
        { type: 'resource', resource: { uri: 'file:///b', blob: binary, mimeType: 'application/octet-stream' } },
        `bare ${SECRET}`,
        { type: 'future-kind', data: `future ${SECRET}` },
      ],
      toolResult: `legacy ${SECRET}`,
      debug: { trace: [`deep ${SECRET}`] },
      [`key-${SECRET}`]: 1,
      isError: false,
    } as unknown as CallToolResult;
    const { result: out } = scrubResult(scrubber, result);
    const json = JSON.stringify(out);
    expect(json).not.toContain(SECRET);
    const blocks = out.content as unknown as Array<Record<string, any>>;
    expect(Buffer.from(blocks[0]!.resource.blob, 'base64').toString('utf8')).toBe(`key ${REDACTED}`);
    expect(blocks[1]).toBe(result.content[1]); // binary: untouched
    expect(blocks[2]).toBe(`bare ${REDACTED}`);
    expect(blocks[3]).toEqual({ type: 'future-kind', data: `future ${REDACTED}` });
    expect((out as any).toolResult).toBe(`legacy ${REDACTED}`);
    expect((out as any).debug).toEqual({ trace: [`deep ${REDACTED}`] });
    expect(out.isError).toBe(false);
    expect(Object.keys(out)).toContain(`key-${REDACTED}`);

    const flat = scrubResult(scrubber, { content: `not an array ${SECRET}` } as unknown as CallToolResult).result;
    expect(flat).toEqual({ content: `not an array ${REDACTED}` });
    const oddFlag = scrubResult(scrubber, { content: [], isError: `yes ${SECRET}` } as unknown as CallToolResult).result;
    expect(oddFlag.isError).toBe(`yes ${REDACTED}`);
  });

  it("a modern caller's JSON-RPC error (an upstream's -32021 passed on) and a relayed input_required answer are scrubbed; the input request's schema and the sealed requestState are kept", async () => {
    const inputRequired = {
      resultType: 'input_required',
      inputRequests: {
        [`up__ask-${SECRET}`]: {
          method: 'elicitation/create',
          params: { message: 'confirm', requestedSchema: { type: 'object', properties: { password: { type: 'string', description: 'the password' } } }, [`hint-${SECRET}`]: 'kept value' },
          note: `extra ${SECRET}`,
          // A plain value under a credential's name: the field-name rule holds here too (only the text scrubber ran).
          auth: { password: 'plain-pw-value' },
        },
      },
      requestState: 'sealed.state.of.ours',
      _meta: { trace: `meta ${SECRET}` },
      hint: `hint ${SECRET}`,
    };
    const run = compose([
      scrubStage({ scrubber }),
      fakeInvoke((c) => {
        c.outcome = 'upstream_error';
        c.requestError = { code: -32021, message: `needs a capability, ${SECRET}`, data: { detail: SECRET, requiredCapabilities: { sampling: {} } } };
        c.inputRequired = inputRequired as never;
      }),
    ]);
    const c = call({ target: target() });
    await run(c);
    expect(JSON.stringify([c.requestError, c.inputRequired])).not.toContain(SECRET);
    expect(c.requestError).toEqual({ code: -32021, message: `needs a capability, ${REDACTED}`, data: { detail: REDACTED, requiredCapabilities: { sampling: {} } } });
    const relayed = c.inputRequired as unknown as typeof inputRequired;
    expect(relayed.requestState).toBe('sealed.state.of.ours');
    expect(relayed.resultType).toBe('input_required');
    expect(relayed._meta).toEqual({ trace: `meta ${REDACTED}` });
    expect(relayed.hint).toBe(`hint ${REDACTED}`);
    // Keyed by its scrubbed name now: not one of the literal keys of `inputRequired`'s type.
    const asked = (relayed.inputRequests as Record<string, (typeof inputRequired.inputRequests)[keyof typeof inputRequired.inputRequests]>)[`up__ask-${REDACTED}`]!;
    expect(asked.params.requestedSchema).toEqual(inputRequired.inputRequests[`up__ask-${SECRET}`]!.params.requestedSchema);
    expect(asked.note).toBe(`extra ${REDACTED}`);
    expect(asked.auth).toEqual({ password: REDACTED });
    // A param's key holding the secret is scrubbed, its value kept (it was dropped).
    expect((asked.params as Record<string, unknown>)[`hint-${REDACTED}`]).toBe('kept value');
    expect(JSON.stringify(c.inputRequired)).not.toContain('plain-pw-value');
  });

  it("a text block's other members are scrubbed as any object's are: their keys too (a secret in a key reached a legacy client), credential-named ones redacted", async () => {
    const block = { type: 'text', text: 'hi', [`note_${SECRET}`]: 'x', password: 'hunter22', nested: { [SECRET]: 1 } };
    const c = await through({ content: [block as CallToolResult['content'][number]] });
    const out = c.result!.content[0] as Record<string, unknown>;
    expect(JSON.stringify(out)).not.toContain(SECRET);
    expect(out).toEqual({ type: 'text', text: 'hi', [`note_${REDACTED}`]: 'x', password: REDACTED, nested: { [REDACTED]: 1 } });
    const clean = { type: 'text', text: 'hi', note: 'x' };
    expect((await through({ content: [clean as CallToolResult['content'][number]] })).result!.content[0]).toBe(clean);
  });

  it('a member named __proto__ an upstream sends (JSON.parse makes it an own member) is scrubbed and kept as a member, not made a prototype', () => {
    const result = JSON.parse(`{"content":[{"type":"text","text":"ok"}],"__proto__":{"note":"${SECRET}"},"_meta":{"a":1}}`) as CallToolResult;
    const out = scrubResult(scrubber, result).result as Record<string, unknown>;
    expect(JSON.stringify(out)).toBe(`{"__proto__":{"note":"${REDACTED}"},"_meta":{"a":1},"content":[{"type":"text","text":"ok"}]}`);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    const clean = JSON.parse('{"content":[],"__proto__":{"note":"fine"}}') as CallToolResult;
    expect(scrubResult(scrubber, clean).result).toBe(clean);
  });

  it('a copy keeps the members a local tool put under symbols (never written as JSON), as they were', () => {
    const tag = Symbol('tag');
    const result = { content: [{ type: 'text', text: `a ${SECRET}` }], [tag]: { note: 'kept' } } as unknown as CallToolResult;
    const out = scrubResult(scrubber, result).result as unknown as Record<PropertyKey, unknown>;
    expect(out).not.toBe(result);
    expect(out[tag]).toBe((result as unknown as Record<PropertyKey, unknown>)[tag]);
    expect(Reflect.ownKeys(out)).toEqual(['content', tag]);
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

describe('a large text block still in its bytes (wire/raw-json.ts)', () => {
  const pad = 'The quick brown fox; \\"quoted\\"\\n'.repeat(Math.ceil(LAZY_STRING_MIN_BYTES / 30));
  const parsed = (inside: string, others = '') =>
    resultOf<CallToolResult>(parseResponseLine(Buffer.from(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"${pad}${inside}"${others}}]}}`)));

  it('told clean from its bytes: the very same result, the text never read', async () => {
    const result = parsed(' all clean');
    const block = result.content[0]!;
    expect(rawJsonString(block, 'text')).toBeDefined();
    const c = await through(result);
    expect(c.result).toBe(result);
    expect(c.outcome).toBe('ok');
    expect(rawJsonString(block, 'text')!.read).toBe(false);
  });

  it('a secret in it, or one behind an escape, is redacted; so is a secret in the block\'s other members', async () => {
    for (const [inside, others] of [
      [` ${SECRET} `, ''],
      [' AKIA\\u0041BCDEFGHIJKLMNOP ', ''],
      [' clean ', `,"_meta":{"note":"${SECRET}"}`],
    ] as const) {
      const result = parsed(inside, others);
      const c = await through(result);
      expect(c.result).not.toBe(result);
      const out = JSON.stringify(c.result);
      expect(out).not.toContain(SECRET);
      expect(out).not.toContain('AKIAABCDEFGHIJKLMNOP');
      expect(out).toContain(REDACTED);
      expect((c.result!.content[0] as { text: string }).text.startsWith('The quick brown fox; "quoted"\n')).toBe(true);
    }
  });
});
