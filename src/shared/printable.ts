/**
 * Text a remote caller or an upstream chose, made safe to show an operator (a CLI table cell, a
 * refused Host or Origin in a 403 and its log line): every character that acts on a terminal or
 * hides in a line, written as an escape.
 */

/**
 * C0 and C1 control characters and DEL; the Unicode bidi controls (embeddings and overrides
 * U+202A–U+202E, isolates U+2066–U+2069, the marks U+200E, U+200F and U+061C); the invisible
 * format characters (zero width space, non-joiner and joiner U+200B–U+200D, word joiner and
 * invisible operators U+2060–U+2064, the byte order mark U+FEFF, the Mongolian vowel separator
 * U+180E, the soft hyphen U+00AD); and the line and paragraph separators U+2028 and U+2029: none
 * may reach the terminal. One character class: linear in the text, and a text with none of them
 * is scanned once and returned as it is.
 */
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;

/**
 * `text` with every control character written as an escape (`\x1b`, `\n`, `\u202e`, `\u200b`,
 * `\xad`, …): text a remote caller or an upstream chose (a tool name nobody serves, an error
 * line, a Host header) must neither send escape sequences to the terminal nor start a line of
 * its own (a line separator ends a line in some terminals and log viewers), nor reorder what the
 * terminal shows of its line (a right-to-left override, Trojan-source style), nor hide characters
 * in it (a zero-width character makes two different names look the same). A backslash is left as
 * it is: where the escapes must read unambiguously, escape backslashes first (`JSON.stringify`).
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (c) => {
    const code = c.charCodeAt(0);
    if (code > 0xff) return `\\u${code.toString(16).padStart(4, '0')}`;
    return c === '\n' ? '\\n' : c === '\r' ? '\\r' : c === '\t' ? '\\t' : `\\x${code.toString(16).padStart(2, '0')}`;
  });
}
