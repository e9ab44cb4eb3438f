/**
 * `printable` (commands/table.ts) writes every character that could act on the operator's
 * terminal, or hide in a cell, as an escape. It left the invisible format characters (zero
 * width space, joiners, word joiner and invisible operators, the byte order mark, the Mongolian
 * vowel separator, the soft hyphen) and the line and paragraph separators as they came: a name
 * with a zero-width character read as another name, and U+2028 broke the row in terminals and
 * log viewers that take it for a line end. Then the other format characters (the deprecated
 * format controls U+206A–U+206F, the annotation marks, the tag characters U+E0000–U+E007F that
 * spell invisible text) passed too: every `\p{Cf}` is escaped now. Then the default-ignorable
 * characters outside `\p{Cf}` passed: the variation selectors (U+FE00–U+FE0F, and U+E0100–U+E01EF,
 * which spell invisible text a byte each as the tags do), the combining grapheme joiner, the
 * Hangul fillers: every `\p{Default_Ignorable_Code_Point}` is escaped now.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { alignedTable, printable } from '../../src/commands/table.js';

/** The invisible format characters and separators, with the escape each is shown as. */
const INVISIBLE: ReadonlyArray<readonly [string, string]> = [
  ['\u200b', '\\u200b'],
  ['\u200c', '\\u200c'],
  ['\u200d', '\\u200d'],
  ['\u2060', '\\u2060'],
  ['\u2061', '\\u2061'],
  ['\u2062', '\\u2062'],
  ['\u2063', '\\u2063'],
  ['\u2064', '\\u2064'],
  ['\ufeff', '\\ufeff'],
  ['\u180e', '\\u180e'],
  ['\u00ad', '\\xad'],
  ['\u2028', '\\u2028'],
  ['\u2029', '\\u2029'],
  ['\u206a', '\\u206a'],
  ['\ufff9', '\\ufff9'],
  ['\u{e0001}', '\\u{e0001}'],
  ['\u{e0041}', '\\u{e0041}'],
  ['\u{e007f}', '\\u{e007f}'],
  ['\ufe00', '\\ufe00'],
  ['\ufe0f', '\\ufe0f'],
  ['\u{e0100}', '\\u{e0100}'],
  ['\u{e01ef}', '\\u{e01ef}'],
  ['\u034f', '\\u034f'],
  ['\u115f', '\\u115f'],
  ['\u3164', '\\u3164'],
  ['\uffa0', '\\uffa0'],
  ['\u180b', '\\u180b'],
  ['\u2065', '\\u2065'],
];

/** Every character `printable` must never pass: C0, DEL, C1, the bidi controls and {@link INVISIBLE}. */
const NEVER = /[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}\u2028\u2029]/u;

describe('printable', () => {
  it('shows the zero-width and invisible format characters and the line and paragraph separators as escapes (regression: they were passed as they came)', () => {
    for (const [c, escape] of INVISIBLE) expect(printable(`a${c}b`), `U+${(c.codePointAt(0) as number).toString(16)}`).toBe(`a${escape}b`);
    expect(printable(`admin\u200b__delete\u2028forged row`)).toBe('admin\\u200b__delete\\u2028forged row');
    // Tag characters spell invisible text (U+E0041 is an invisible "A"): each is shown, none hidden.
    expect(printable('ok\u{e0069}\u{e0067}\u{e006e}')).toBe('ok\\u{e0069}\\u{e0067}\\u{e006e}');
    // So do variation selectors after a character that has no variant: "hi" a byte each, and a name that reads as another.
    expect(printable('ok\u{e0158}\u{e0159}')).toBe('ok\\u{e0158}\\u{e0159}');
    expect(printable('fs__read_file\ufe0f')).toBe('fs__read_file\\ufe0f');
  });

  it('still shows C0, C1 and bidi controls as escapes, and leaves other text as it is', () => {
    expect(printable('x\u001b[2K\r\n\t\u009b\u202e\u2066\u061c')).toBe('x\\x1b[2K\\r\\n\\t\\x9b\\u202e\\u2066\\u061c');
    for (const plain of ['', 'fs__read_file', 'café 東京 ١٢٣ 🙂', 'a\u00a0b', 'x\u2070y']) expect(printable(plain)).toBe(plain);
  });

  it('no character it must escape survives, whatever the text', () => {
    const pick = fc.constantFrom(...INVISIBLE.map(([c]) => c), '\u0000', '\u001b', '\u007f', '\u0085', '\u202e', '\u2069', '\u200e', '\u061c');
    const text = fc.array(fc.oneof(fc.string({ unit: 'binary', maxLength: 8 }), pick), { maxLength: 20 }).map((parts) => parts.join(''));
    fc.assert(fc.property(text, (t) => !NEVER.test(printable(t))));
  });

  it('a table row with a line separator in a cell stays one row', () => {
    const table = alignedTable(['TOOL', 'WHY'], [['x\u2028y', 'p\u2029q\u200br']]);
    expect(table.split(/[\n\u2028\u2029\u0085]/)).toEqual(['TOOL      WHY', 'x\\u2028y  p\\u2029q\\u200br', '']);
  });
});
