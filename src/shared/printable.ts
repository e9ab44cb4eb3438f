/**
 * Text a remote caller or an upstream chose, made safe to show an operator (a CLI table cell, a
 * refused Host or Origin in a 403 and its log line): every character that acts on a terminal or
 * hides in a line, written as an escape.
 */

/**
 * Every control character (`\p{Cc}`: C0, DEL, C1), every format character (`\p{Cf}`: the bidi
 * embeddings, overrides, isolates and marks; the zero-width space, joiners and word joiner; the
 * invisible operators; the byte order mark; the soft hyphen; the Mongolian vowel separator; the
 * deprecated format controls U+206A–U+206F; the interlinear annotation marks; the tag characters
 * U+E0001 and U+E0020–U+E007F, which can carry invisible text), every other default-ignorable
 * code point (`\p{Default_Ignorable_Code_Point}`, what a renderer shows as nothing: the variation
 * selectors U+FE00–U+FE0F and U+E0100–U+E01EF, which carry invisible text a byte each as tags
 * do; the combining grapheme joiner; the Hangul fillers; the Mongolian free variation
 * selectors; the code points reserved for more of them), and the line and paragraph separators
 * U+2028 and U+2029: none may reach the terminal. An emoji's presentation selector (U+FE0F) is
 * shown as an escape too. One character class of Unicode properties (V8 compiles it to ranges):
 * linear in the text, and a text with none of them is scanned once and returned as it is.
 */
const CONTROL = /[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}\u2028\u2029]/gu;

/**
 * `text` with every control character written as an escape (`\x1b`, `\n`, `\u202e`, `\u200b`,
 * `\xad`, `\ufe0f`, `\u{e0041}`, …): text a remote caller or an upstream chose (a tool name nobody serves, an error
 * line, a Host header) must neither send escape sequences to the terminal nor start a line of
 * its own (a line separator ends a line in some terminals and log viewers), nor reorder what the
 * terminal shows of its line (a right-to-left override, Trojan-source style), nor hide characters
 * in it (a zero-width character or a variation selector makes two different names look the same). A backslash is left as
 * it is: where the escapes must read unambiguously, escape backslashes first (`JSON.stringify`).
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (c) => {
    const code = c.codePointAt(0) as number;
    if (code > 0xffff) return `\\u{${code.toString(16)}}`;
    if (code > 0xff) return `\\u${code.toString(16).padStart(4, '0')}`;
    return c === '\n' ? '\\n' : c === '\r' ? '\\r' : c === '\t' ? '\\t' : `\\x${code.toString(16).padStart(2, '0')}`;
  });
}
