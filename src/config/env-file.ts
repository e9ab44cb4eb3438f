/**
 * A stdio server's `envFile` (VS Code): a dotenv-style file whose variables are merged under the
 * server's `env` (`env` wins). Lines are `NAME=value` or `export NAME=value`; blank lines and
 * lines starting with `#` are skipped; a value in single or double quotes is taken verbatim
 * between them (double quotes also read `\n`); an unquoted value ends at ` #`. No placeholders
 * are filled in the file's values.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ConfigProblem } from '../shared/errors.js';

const LINE = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*?)\s*$/;

/**
 * The variables of the dotenv file at `file` (absolute), or a problem at `path` naming the file
 * as written (`shown`) and the line number; never a value.
 */
export function readEnvFile(file: string, shown: string, path: string): { vars: Record<string, string> } | { problem: ConfigProblem } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { problem: { path, message: `cannot read ${shown}${code ? ` (${code})` : ''}` } };
  }
  const vars: Record<string, string> = {};
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^\s*(?:#.*)?$/.test(line)) continue;
    const m = LINE.exec(line);
    const value = m ? unquote(m[2]!) : undefined;
    if (!m || value === undefined) return { problem: { path, message: `${shown} line ${i + 1} is not NAME=value` } };
    vars[m[1]!] = value;
  }
  return { vars };
}

function unquote(raw: string): string | undefined {
  const q = raw[0];
  if (q === '"' || q === "'") {
    const end = raw.indexOf(q, 1);
    if (end < 0 || !/^\s*(?:#.*)?$/.test(raw.slice(end + 1))) return undefined;
    const inner = raw.slice(1, end);
    return q === '"' ? inner.replace(/\\n/g, '\n') : inner;
  }
  const hash = raw.search(/\s#/);
  return (hash < 0 ? raw : raw.slice(0, hash)).trimEnd();
}

/**
 * A stdio server's `env` with the variables of its `envFile` (relative to `baseDir`) under it:
 * `env` wins. A problem at `<path>.envFile` when the file cannot be read or has a bad line.
 */
export function withEnvFile(
  env: Readonly<Record<string, string>>,
  envFile: string,
  baseDir: string,
  path: string,
): { env: Record<string, string> } | { problem: ConfigProblem } {
  const read = readEnvFile(resolve(baseDir, envFile), envFile, `${path}.envFile`);
  return 'problem' in read ? read : { env: { ...read.vars, ...env } };
}
