/**
 * JSON log lines carry no raw character that acts on a terminal or hides in a line
 * (`jsonLineEscaped` as pino's `streamWrite` hook, src/shared/logger.ts): read raw (`tail -f` of
 * a JSON log), a caller's tool name or an upstream's error line could send a C1 control sequence,
 * reorder the line (a right-to-left override) or hide text (tag characters). Each is written as a
 * JSON escape, so the value parsed back is unchanged.
 */
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/shared/logger.js';
import { jsonLineEscaped } from '../../src/shared/printable.js';
import { Scrubber } from '../../src/shared/scrub.js';

function capture(): { stream: Writable; lines: () => string[] } {
  let text = '';
  const stream = new Writable({
    write(chunk, _enc, done) {
      text += String(chunk);
      done();
    },
  });
  return { stream, lines: () => text.split('\n').filter(Boolean) };
}

/** DEL, a C1 CSI, a right-to-left override, a zero-width space, a line separator, a BOM, a tag character. */
const HOSTILE = 'a\u007fb\u009b31mc\u202ed\u200be\u2028f\ufeffg\u{e0041}h';

describe('JSON log lines', () => {
  it('write every such character as an escape, with and without a scrubber; the value parses back the same', () => {
    for (const scrubber of [new Scrubber(), undefined]) {
      const log = capture();
      const logger = createLogger({ level: 'info', scrubber, stream: log.stream });
      logger.info({ tool: HOSTILE }, `unknown tool ${HOSTILE}`);
      const [line] = log.lines();
      expect(line).toBeDefined();
      expect(line).not.toMatch(/[\u007f-\u009f\u200b\u202e\u2028\ufeff]|\u{e0041}/u);
      expect(line).toContain('\\u009b');
      expect(line).toContain('\\u202e');
      expect(line).toContain('\\udb40\\udc41');
      const parsed = JSON.parse(line!);
      expect(parsed.tool).toBe(HOSTILE);
      expect(parsed.msg).toBe(`unknown tool ${HOSTILE}`);
    }
  });

  it('property: any JSON line escaped parses to the same value, and a line with none of them is returned as it is', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.string({ unit: 'binary' }), (value, text) => {
        const line = JSON.stringify({ value, text });
        const escaped = jsonLineEscaped(line);
        expect(JSON.parse(escaped)).toEqual(JSON.parse(line));
        expect(escaped).not.toMatch(/[\p{Cc}\p{Cf}\u2028\u2029]/u);
      }),
      { numRuns: 500 },
    );
    const plain = '{"msg":"plain ascii and é"}';
    expect(jsonLineEscaped(plain)).toBe(plain);
  });
});
