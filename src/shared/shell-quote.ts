/** `text` quoted for a POSIX shell when it needs it (single quotes; `'` written as `'\\''`). */
export function shellQuote(text: string): string {
  return /^[A-Za-z0-9_./@%+=:,-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}
