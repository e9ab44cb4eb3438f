import fc from 'fast-check';
import type { JSONRPCMessage } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { encodeMessage, knownJsonBytes, LAZY_STRING_MIN_BYTES, parseResponseLine, rawJsonString, withMeta, withTail } from '../../src/wire/raw-json.js';
import { resultOf } from '../support/messages.js';

const big = 'x'.repeat(20_000);
const line = (text: string) => Buffer.from(text);
const written = (encoded: string | Buffer[]) => (typeof encoded === 'string' ? encoded : Buffer.concat(encoded).toString('utf8'));

describe('raw JSON pass-through', () => {
  it('parses a response by its parts, in any member order, to what JSON.parse gives', () => {
    const result = { content: [{ type: 'text', text: big }], structuredContent: { a: [1, 2, { b: 'c' }] } };
    for (const text of [
      JSON.stringify({ result, jsonrpc: '2.0', id: 7 }),
      JSON.stringify({ jsonrpc: '2.0', id: 'req-7', result }),
      JSON.stringify({ jsonrpc: '2.0', result, id: 7 }),
      ` { "id" : 7 ,\t"jsonrpc": "2.0", "result" :${JSON.stringify(result, null, 1)} } `,
    ]) {
      const parsed = parseResponseLine(line(text));
      expect(parsed).toEqual(JSON.parse(text));
    }
  });

  it('leaves everything that is not a plain result response to the ordinary parse', () => {
    const result = JSON.stringify({ content: [{ type: 'text', text: big }] });
    for (const text of [
      `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"${big}"}}`,
      `{"jsonrpc":"2.0","id":1,"method":"x","params":${result}}`,
      `{"jsonrpc":"2.0","id":1,"extra":true,"result":${result}}`,
      `{"jsonrpc":"2.0","id":"a\\"b","result":${result}}`,
      `{"jsonrpc":"2.0","id":null,"result":${result}}`,
      `{"jsonrpc":"1.0","id":1,"result":${result}}`,
      `{"jsonrpc":"2.0","id":1,"result":[${result}]}`,
      // two results: JSON.parse keeps the last, so the bytes of one value cannot stand for it
      `{"jsonrpc":"2.0","id":1,"result":${result},"result":{"content":[]}}`,
      `{"result":${result},"jsonrpc":"2.0","id":1,"id":2}`,
    ]) {
      expect(parseResponseLine(line(text))).toBeUndefined();
    }
  });

  it('writes a result that passed through unchanged as the bytes it arrived in', () => {
    const resultText = `{ "content" : [ {"type":"text","text":"${big}"} ] , "isError":false }`;
    const parsed = parseResponseLine(line(`{"jsonrpc":"2.0","id":3,"result":${resultText}}`))!;
    const result = (parsed as { result: object }).result;
    expect(knownJsonBytes(result)).toBe(Buffer.byteLength(resultText));
    const out = written(encodeMessage({ result, jsonrpc: '2.0', id: 41 } as JSONRPCMessage));
    expect(out).toBe(`{"result":${resultText},"jsonrpc":"2.0","id":41}\n`);
  });

  it('adds _meta in front of the remembered bytes, and parses back to the spread', () => {
    for (const resultText of [`{"content":[{"type":"text","text":"${big}"}]}`, '{ }']) {
      const padded = resultText === '{ }' ? `{"jsonrpc":"2.0","id":3,"result":${resultText}${' '.repeat(20_000)}}` : `{"jsonrpc":"2.0","id":3,"result":${resultText}}`;
      const result = (parseResponseLine(line(padded)) as { result: Record<string, unknown> }).result;
      const extended = withMeta(result, { 'mcp-broker/outcome': 'ok' });
      const out = written(encodeMessage({ result: extended, jsonrpc: '2.0', id: 'x' } as JSONRPCMessage));
      expect(out.endsWith('\n')).toBe(true);
      expect(JSON.parse(out)).toEqual({ result: { ...JSON.parse(resultText), _meta: { 'mcp-broker/outcome': 'ok' } }, jsonrpc: '2.0', id: 'x' });
      expect(typeof encodeMessage({ result: extended, jsonrpc: '2.0', id: 'x' } as JSONRPCMessage)).not.toBe('string');
    }
  });

  it('serialises a result that changed (a copy) or carried its own _meta', () => {
    const withOwnMeta = `{"jsonrpc":"2.0","id":3,"result":{"_meta":{"k":1},"content":[{"type":"text","text":"${big}"}]}}`;
    const result = (parseResponseLine(line(withOwnMeta)) as { result: Record<string, unknown> }).result;
    const extended = withMeta(result, { o: 'ok' });
    expect(typeof encodeMessage({ result: extended, jsonrpc: '2.0', id: 1 } as JSONRPCMessage)).toBe('string');
    expect(JSON.parse(written(encodeMessage({ result: extended, jsonrpc: '2.0', id: 1 } as JSONRPCMessage))).result._meta).toEqual({ k: 1, o: 'ok' });

    const plain = resultOf(parseResponseLine(line(`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"${big}"}]}}`)));
    const scrubbed: Record<string, unknown> = { ...plain, content: [{ type: 'text', text: 'redacted' }] };
    const out = encodeMessage({ result: withMeta(scrubbed, { o: 'ok' }), jsonrpc: '2.0', id: 1 } as JSONRPCMessage);
    expect(typeof out).toBe('string');
    expect(JSON.parse(out as string).result.content[0].text).toBe('redacted');
  });

  it('withTail: a restamped copy (new _meta, members added after) is written as the bytes, equal to its serialisation', () => {
    for (const resultText of [`{"content":[{"type":"text","text":"${big}"}],"isError":false}`, `{ "content" : [{"type":"text","text":"${big}"}] }`, '{ }']) {
      const padded = resultText === '{ }' ? `{"jsonrpc":"2.0","id":3,"result":${resultText}${' '.repeat(20_000)}}` : `{"jsonrpc":"2.0","id":3,"result":${resultText}}`;
      const result = (parseResponseLine(line(padded)) as { result: Record<string, unknown> }).result;
      const extended = withMeta(result, { o: 'ok' });
      // As the 2026-07-28 lane builds it: _meta first, the result's members, then resultType.
      const out: Record<string, unknown> = { _meta: undefined };
      for (const key of Object.keys(extended)) if (key !== '_meta') out[key] = extended[key];
      out.resultType = 'complete';
      out._meta = { o: 'ok', server: { name: 's' } };
      const message = { result: withTail(out, extended, { resultType: 'complete' }), jsonrpc: '2.0', id: 9 } as JSONRPCMessage;
      const encoded = encodeMessage(message);
      expect(typeof encoded).not.toBe('string');
      expect(JSON.parse(written(encoded))).toEqual(JSON.parse(JSON.stringify(message)));
      if (!resultText.includes(' ')) expect(written(encoded)).toBe(JSON.stringify(message) + '\n');
    }
  });

  it('withTail: members in another order than the bytes, a changed member, or a plain source are serialised', () => {
    const result = (parseResponseLine(line(`{"jsonrpc":"2.0","id":3,"result":{"isError":false,"content":[{"type":"text","text":"${big}"}]}}`)) as {
      result: Record<string, unknown>;
    }).result;
    const extended = withMeta(result, { o: 'ok' });
    const reordered = withTail({ _meta: { o: 'ok' }, content: extended.content, isError: false, resultType: 'complete' }, extended, { resultType: 'complete' });
    expect(typeof encodeMessage({ result: reordered, jsonrpc: '2.0', id: 1 } as JSONRPCMessage)).toBe('string');
    const changed = withTail({ _meta: { o: 'ok' }, isError: true, content: extended.content, resultType: 'complete' }, extended, { resultType: 'complete' });
    expect(typeof encodeMessage({ result: changed, jsonrpc: '2.0', id: 1 } as JSONRPCMessage)).toBe('string');
    const edited = withTail({ _meta: { o: 'ok' }, isError: false, content: extended.content, resultType: 'complete' }, extended, { resultType: 'complete' });
    edited.resultType = 'input_required';
    expect(typeof encodeMessage({ result: edited, jsonrpc: '2.0', id: 1 } as JSONRPCMessage)).toBe('string');
    const plain = withTail({ _meta: {}, content: [], resultType: 'complete' }, { content: [] }, { resultType: 'complete' });
    expect(typeof encodeMessage({ result: plain, jsonrpc: '2.0', id: 1 } as JSONRPCMessage)).toBe('string');
  });

  it('freezes a remembered result, so an in-place edit fails loudly instead of being lost on the wire', () => {
    const result = resultOf<{ content: Array<{ text: string }> }>(parseResponseLine(line(`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"${big}"}]}}`)));
    expect(() => {
      result.content[0]!.text = 'edited';
    }).toThrow(TypeError);
    expect(() => result.content.push({ text: 'more' })).toThrow(TypeError);
  });

  it('property: any response line parses by its parts to what JSON.parse gives, and re-encodes to an equal message', () => {
    const json = fc.jsonValue({ maxDepth: 3 });
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ maxLength: 8 }), json, { maxKeys: 5 }),
        fc.oneof(fc.integer(), fc.string({ maxLength: 10 }).filter((s) => !/["\\\u0000-\u001f]/.test(s))),
        fc.constantFrom(0, 1, 2),
        fc.constantFrom('', ' ', '\t', '  '),
        (body, id, order, ws) => {
          const result = { ...body, pad: big };
          const members = [`"jsonrpc"${ws}:${ws}"2.0"`, `"id":${ws}${JSON.stringify(id)}`];
          members.splice(order, 0, `"result":${ws}${JSON.stringify(result, null, ws.length ? 1 : 0)}`);
          const text = `{${ws}${members.join(`${ws},${ws}`)}${ws}}`;
          const parsed = parseResponseLine(line(text));
          expect(parsed).toEqual(JSON.parse(text));
          const again = JSON.parse(written(encodeMessage(parsed!)));
          expect(again).toEqual(JSON.parse(text));
        },
      ),
      { numRuns: 200 },
    );
  });

  it('a result with a duplicated key is never passed through: the wire carries only what was inspected', () => {
    const secret = 'ghp_' + 'a'.repeat(36);
    const text = `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"${secret}"}],"content":[{"type":"text","text":"${big}"}]}}`;
    expect(parseResponseLine(line(text))).toBeUndefined();
    const nested = `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"${big}","text":"${secret}"}]}}`;
    expect(parseResponseLine(line(nested))).toBeUndefined();
    // The ordinary path: parse the line (last key wins) and serialise what was parsed.
    const message = JSON.parse(text) as JSONRPCMessage;
    expect(written(encodeMessage(message))).not.toContain(secret);
  });

  it('keys inside strings, escaped quotes and colons in values do not upset the key count', () => {
    const result = { content: [{ type: 'text', text: `${big} "a": \\" :: \"k\":` }], structuredContent: { 'we"ird': 'x:y', n: { m: [1, { o: '"' }] } } };
    const text = JSON.stringify({ jsonrpc: '2.0', id: 1, result });
    const parsed = parseResponseLine(line(text));
    expect(parsed).toEqual(JSON.parse(text));
    expect(written(encodeMessage(parsed!))).toBe(text.replace(/^\{"jsonrpc":"2.0","id":1,"result":(.*)\}$/, '{"result":$1,"jsonrpc":"2.0","id":1}') + '\n');
  });
});


describe('large strings held in their bytes (issue 19)', () => {
  const pad = 'p'.repeat(LAZY_STRING_MIN_BYTES);
  /** A response line whose text block is `inside` (JSON string content, escapes as written) after the pad. */
  const withText = (inside: string, extra = '') => line(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"${pad}${inside}"}]${extra}}}`);
  const held = (parsed: JSONRPCMessage | undefined) => resultOf<{ content: Array<Record<string, unknown>> }>(parsed).content[0]!;

  it('a large text reads as JSON.parse gives it, its bytes and the characters its escapes stand for kept', () => {
    const inside = String.raw`line\nquote\" slash\/ tab\t e\u00e9 A\u0041 smile\ud83d\ude00 back\\slash`;
    const parsed = parseResponseLine(withText(inside));
    const block = held(parsed);
    const raw = rawJsonString(block, 'text')!;
    expect(raw.bytes.toString('utf8')).toBe(pad + inside);
    expect([...raw.escaped.keys()].filter((c) => raw.escaped[c])).toEqual([0x09, 0x0a, 0x22, 0x2f, 0x41, 0x5c]);
    expect(raw.read).toBe(false);
    expect(parsed).toEqual(JSON.parse(withText(inside).toString('utf8')));
    expect(raw.read).toBe(true);
    expect(block.text).toBe(JSON.parse(`"${pad}${inside}"`));
    // Frozen like the rest; written as the bytes it came in.
    expect(() => {
      block.text = 'edited';
    }).toThrow(TypeError);
    const out = written(encodeMessage({ jsonrpc: '2.0', id: 1, result: (parsed as { result: object }).result } as JSONRPCMessage));
    expect(out).toContain(inside);
    expect(JSON.parse(out).result).toEqual(JSON.parse(withText(inside).toString('utf8')).result);
  });

  it('an array element or a key is read at once; a short string is parsed as usual', () => {
    const text = `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"list":["${pad}a"],"${pad}k":"short"},"content":[]}}`;
    const parsed = parseResponseLine(line(text));
    expect(parsed).toEqual(JSON.parse(text));
    const { structuredContent } = resultOf<{ structuredContent: { list: string[] } }>(parsed);
    expect(rawJsonString(structuredContent, 'list')).toBeUndefined();
    expect(Object.getOwnPropertyDescriptor(structuredContent.list, 0)).toHaveProperty('value', `${pad}a`);
    expect(rawJsonString(held(parseResponseLine(withText(''))), 'text')).toBeDefined();
    const small = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"${big}"}]}}`;
    expect(rawJsonString(held(parseResponseLine(line(small))), 'text')).toBeUndefined();
  });

  it('a large string that is no valid JSON string leaves the line to the ordinary parse, which refuses it', () => {
    for (const inside of ['tab\there', String.raw`bad\q`, String.raw`short\u12`, String.raw`hex\u12G4`, String.raw`nul\u00`, 'ctl\u0001x', 'us\u001fx']) {
      const bytes = withText(inside);
      expect(() => JSON.parse(bytes.toString('utf8'))).toThrow(SyntaxError);
      expect(parseResponseLine(bytes)).toBeUndefined();
    }
  });

  it('DEL (0x7F) and non-ASCII bytes are no control bytes: such a large string is held', () => {
    const parsed = parseResponseLine(withText('del\u007fx \u00e9 😀'));
    expect(rawJsonString(held(parsed), 'text')).toBeDefined();
    expect(held(parsed).text).toBe(`${pad}del\u007fx \u00e9 😀`);
  });

  it('a duplicated key beside a large value still refuses the pass-through', () => {
    const secret = 'ghp_' + 'a'.repeat(36);
    const text = `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"${pad}","text":"${secret}"}]}}`;
    expect(parseResponseLine(line(text))).toBeUndefined();
  });

  it('property: a large string written with any escapes reads as JSON.parse gives it, and its escapes are told exactly', () => {
    const escapeOne = (ch: string, how: number): string => {
      const code = ch.charCodeAt(0);
      if (how === 1 || code < 0x20) return `\\u${code.toString(16).padStart(4, '0')}`;
      if (how === 2 && ch === '/') return '\\/';
      return JSON.stringify(ch).slice(1, -1);
    };
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.string({ unit: 'binary', maxLength: 4 }), fc.constantFrom(0, 0, 0, 1, 2)), { maxLength: 40 }), (parts) => {
        let inside = pad;
        const expected = new Set<number>();
        let text = pad;
        for (const [chunk, how] of parts) {
          for (const ch of chunk) {
            const written = ch.length === 1 ? escapeOne(ch, how) : JSON.stringify(ch).slice(1, -1);
            inside += written;
            text += ch;
            if (written.startsWith('\\')) {
              const stands = JSON.parse(`"${written}"`) as string;
              if (stands.length === 1 && stands.charCodeAt(0) < 128) expected.add(stands.charCodeAt(0));
            }
          }
        }
        const parsed = parseResponseLine(withText(inside.slice(pad.length)));
        const block = held(parsed);
        const raw = rawJsonString(block, 'text')!;
        expect([...raw.escaped.keys()].filter((c) => raw.escaped[c])).toEqual([...expected].sort((a, b) => a - b));
        expect(block.text).toBe(text);
      }),
      { numRuns: 150 },
    );
  });
});
