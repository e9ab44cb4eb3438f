/**
 * printableLogLine: what the pretty log stream formats of a JSON log line (shared/pretty-log-stream.ts).
 */
import { describe, expect, it } from 'vitest';
import { printableLogLine } from '../../src/shared/pretty-log-stream.js';

describe('printableLogLine', () => {
  it('escapes every string at any depth, field names too, and leaves other values as they are', () => {
    const line = JSON.stringify({ level: 40, msg: 'stray\u202e', line: 'a\u009b2J\u001b]52;c;x\u0007', nested: { 'k\u200b': ['\u2028', 3, null, true] } }) + '\n';
    expect(printableLogLine(line)).toEqual({ level: 40, msg: 'stray\\u202e', line: 'a\\x9b2J\\x1b]52;c;x\\x07', nested: { 'k\\u200b': ['\\u2028', 3, null, true] } });
  });

  it('keeps a "__proto__" field a field of its own: the prototype of what it returns is untouched', () => {
    const log = printableLogLine('{"__proto__": {"polluted": "yes"}, "msg": "m"}\n') as Record<string, unknown>;
    expect(Object.getPrototypeOf(log)).toBe(Object.prototype);
    expect(Object.keys(log)).toEqual(['__proto__', 'msg']);
    expect((log as { polluted?: string }).polluted).toBeUndefined();
  });

  it('a line that is not JSON is escaped whole, without its newline', () => {
    expect(printableLogLine('not json \u009b\u202e\n')).toBe('not json \\x9b\\u202e');
  });
});

describe('pretty log stream: an error stack', () => {
  it('keeps the lines of a stack (each escaped on its own), so pino-pretty shows it a frame a line (regression: the whole stack on one line, its newlines shown as \\n)', async () => {
    const { prettyFactory } = await import('pino-pretty');
    const format = prettyFactory({ colorize: false, translateTime: 'SYS:HH:MM:ss.l', ignore: 'name' });
    const err = { type: 'Error', message: 'boom\u202e', stack: 'Error: boom\u202e\u009b2J\r\n    at one (a.js:1:1)\n    at two (b.js:2:2)' };
    const line = JSON.stringify({ level: 50, time: 0, msg: 'failed', err }) + '\n';
    expect((printableLogLine(line) as { err: { stack: string } }).err.stack).toBe('Error: boom\\u202e\\x9b2J\\r\n    at one (a.js:1:1)\n    at two (b.js:2:2)');
    const shown = format(printableLogLine(line)).split('\n');
    expect(shown.some((l) => /^\s+at one \(a\.js:1:1\)$/.test(l))).toBe(true);
    expect(shown.some((l) => /^\s+at two \(b\.js:2:2\)$/.test(l))).toBe(true);
    // An error logged as the log itself (`logger.error(err)`): its stack is shown a frame a line too.
    const top = JSON.stringify({ level: 50, time: 0, msg: 'boom', type: 'Error', stack: 'Error: boom\n    at one (a.js:1:1)' }) + '\n';
    expect(format(printableLogLine(top)).split('\n').some((l) => /^\s+at one \(a\.js:1:1\)$/.test(l))).toBe(true);
  });
});
