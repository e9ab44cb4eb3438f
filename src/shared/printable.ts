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

/**
 * {@link CONTROL} but for a line break, carriage return and tab: outside a string they are JSON's
 * own whitespace (a log line's ending), and inside one JSON writers escape them already.
 */
const JSON_UNSAFE = /(?![\t\n\r])[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}\u2028\u2029]/gu;

/**
 * A line of JSON with every character {@link printable} escapes written as a JSON escape
 * (`\u202e`; a code point past U+FFFF as its surrogate pair, `\udb40\udc41`): the same JSON
 * value, and a line that neither acts on a terminal nor reorders or hides what it shows when it
 * is read raw (`tail -f` of a JSON log). Such characters can only stand inside JSON strings, where
 * the escape means the same character. JSON writers escape C0 controls already; DEL, C1, the
 * format and invisible characters and U+2028/U+2029 are left raw by them. A raw line break, carriage
 * return or tab is JSON's own whitespace (the line's ending) and stays. The same string when there
 * are none.
 */
export function jsonLineEscaped(line: string): string {
  JSON_UNSAFE.lastIndex = 0;
  if (!JSON_UNSAFE.test(line)) return line;
  return line.replace(JSON_UNSAFE, (c) => {
    let out = '';
    for (let i = 0; i < c.length; i++) out += `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`;
    return out;
  });
}
