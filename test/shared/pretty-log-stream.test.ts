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
