/**
 * Issue 18 §3: the line of a crashed child's stderr that says why, picked out of real Node crash
 * outputs (generated here with the running Node), never the `Node.js v…` trailer or a frame.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Scrubber } from '../../src/shared/scrub.js';
import { isErrorLine, meaningfulStderrLine, shownStderrLine, STDERR_LINE_KEPT_CHARS, STDERR_LINE_MAX_CHARS, withoutHostPaths } from '../../src/upstream/stderr-line.js';

const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-stderr-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** What Node writes to stderr when it runs `source` as `file` (or a file that is not there). */
function crash(file: string, source?: string): string {
  if (source !== undefined) writeFileSync(join(dir, file), source);
  const run = spawnSync(process.execPath, [join(dir, file)], { encoding: 'utf8', cwd: dir });
  expect(run.status).not.toBe(0);
  return run.stderr;
}

describe('meaningfulStderrLine on real Node crashes', () => {
  it('issue 18: a missing script gives the "Cannot find module" line, not the Node.js version trailer', () => {
    const stderr = crash('missing-file.js');
    expect(stderr.trim().split('\n').pop()).toMatch(/^Node\.js v/);
    expect(meaningfulStderrLine(stderr)).toBe(`Error: Cannot find module '${join(dir, 'missing-file.js')}'`);
  });

  it('a script that throws at start gives its error line, not a stack frame', () => {
    expect(meaningfulStderrLine(crash('throws.js', 'throw new Error("boom at start");\n'))).toBe('Error: boom at start');
  });

  it('a syntax error gives the SyntaxError line, not the caret or the source line', () => {
    expect(meaningfulStderrLine(crash('syntax.js', 'const x = ;\n'))).toMatch(/^SyntaxError: Unexpected token/);
  });

  it('a missing package of an ES module gives the ERR_MODULE_NOT_FOUND line', () => {
    expect(meaningfulStderrLine(crash('imports.mjs', 'import "no-such-package-xyz";\n'))).toMatch(/^Error \[ERR_MODULE_NOT_FOUND\]: Cannot find package 'no-such-package-xyz'/);
  });

  it('an unhandled rejection gives the TypeError line', () => {
    expect(meaningfulStderrLine(crash('rejects.js', 'Promise.reject(new TypeError("bad thing"));\n'))).toBe('TypeError: bad thing');
  });

  it('a thrown string (no Error) falls back to the last line that is neither a hint nor the trailer', () => {
    expect(meaningfulStderrLine(crash('string.js', 'throw "a plain string";\n'))).toBe('a plain string');
  });

  it('a program that writes its own `fatal:` line and exits gives that line', () => {
    expect(meaningfulStderrLine(crash('fatal.js', 'process.stderr.write("starting\\nfatal: config missing\\n"); process.exit(3);\n'))).toBe('fatal: config missing');
  });
});

describe('meaningfulStderrLine on other outputs', () => {
  it('a Python traceback gives the exception line, not "Traceback" or a frame', () => {
    const py = 'Traceback (most recent call last):\n  File "/srv/x/server.py", line 1, in <module>\n    import nope\nModuleNotFoundError: No module named \'nope\'\n';
    expect(meaningfulStderrLine(py)).toBe("ModuleNotFoundError: No module named 'nope'");
  });

  it('no output, or only noise, is undefined; a long line is kept for the scrubber and cut only as it is shown', () => {
    expect(meaningfulStderrLine('')).toBeUndefined();
    expect(meaningfulStderrLine('\n    at x (y.js:1:1)\n\nNode.js v20.0.0\n')).toBeUndefined();
    expect(meaningfulStderrLine(`Error: ${'x'.repeat(5000)}`)!.length).toBe(STDERR_LINE_KEPT_CHARS);
    expect(shownStderrLine(`Error: ${'x'.repeat(1000)}`, (t) => t).length).toBe(STDERR_LINE_MAX_CHARS);
  });

  it('a secret running across the cut is scrubbed before the line is cut (regression: its first characters were shown)', () => {
    const secret = 'stderr-secret-5d1e9a0c';
    const line = meaningfulStderrLine(`Error: ${'x'.repeat(285)} ${secret} and more`)!;
    const shown = shownStderrLine(line, (t) => new Scrubber([secret]).text(t));
    expect(shown.length).toBeLessThanOrEqual(STDERR_LINE_MAX_CHARS);
    expect(shown).not.toContain(secret.slice(0, 6));
  });

  it('isErrorLine: frames and ordinary chatter are not errors', () => {
    expect(isErrorLine('    at Module._load (node:internal/modules/cjs/loader:1038:27)')).toBe(false);
    expect(isErrorLine('listening on stdio')).toBe(false);
    expect(isErrorLine('error: unknown option --x')).toBe(true);
    expect(isErrorLine('error[E0433]: failed to resolve')).toBe(true);
    expect(isErrorLine('panic: runtime error: index out of range')).toBe(true);
  });
});

describe('withoutHostPaths', () => {
  it('cuts absolute POSIX, file: and Windows paths to their last segment; relative ones and URLs stay', () => {
    expect(withoutHostPaths("Error: Cannot find module '/home/me/srv/missing-file.js'")).toBe("Error: Cannot find module '…/missing-file.js'");
    expect(withoutHostPaths('imported from file:///home/me/a.mjs')).toBe('imported from …/a.mjs');
    expect(withoutHostPaths('at C:\\Users\\me\\x.js')).toBe('at …/x.js');
    expect(withoutHostPaths('see ./rel/x.js and https://host/a/b and node:internal/x')).toBe('see ./rel/x.js and https://host/a/b and node:internal/x');
  });
});
