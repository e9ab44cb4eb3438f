/**
 * Estate pieces masked in a window (src/builtins/estate/redacted-bytes.ts) and the scrubber's
 * `redactions` under them: whatever bounds a reader picks, a piece shows no part of a secret;
 * multi-byte text and binary files alike.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lossyUtf8, maskedBytes, maskedText, redactedBytes, scrubMargin, secretLines, SCRUB_MARGIN_BYTES } from '../../src/builtins/estate/redacted-bytes.js';
import { REDACTED, Scrubber } from '../../src/shared/scrub.js';

/** Characters of the exact secret below, none of them in the noise the texts are made of (nor in `[REDACTED]` but for W). */
const SECRET = 'QZXW9876QZXW5432';
const SECRET_CHARS = /[QZX9876542]/;

describe('Scrubber.redactions', () => {
  const scrubber = new Scrubber([SECRET]);

  it('marks what text() redacts, in the text as given: an exact secret whole, a field its value, a shape whole', () => {
    const text = `a ${SECRET} b password=hunter2hunter2 c AKIAIOSFODNN7EXAMPLE d`;
    const ranges = scrubber.redactions(text);
    expect(ranges.map(([from, to]) => text.slice(from, to))).toEqual([SECRET, 'hunter2hunter2', 'AKIAIOSFODNN7EXAMPLE']);
    expect(scrubber.redactions('nothing secret here')).toEqual([]);
    expect(scrubber.redactions('abc')).toEqual([]);
  });

  it('a field whose value is an exact secret: one range, in the text as given (not in the scrubbed text)', () => {
    const text = `x token=${SECRET} y`;
    expect(scrubber.redactions(text).map(([from, to]) => text.slice(from, to))).toEqual([SECRET]);
    const after = `${SECRET}${SECRET} api_key: "sk-live-0123456789abcdefghij"`;
    const ranges = scrubber.redactions(after);
    expect(ranges[0]).toEqual([0, 2 * SECRET.length]);
    expect(after.slice(...ranges[1]!)).toContain('sk-live-0123456789abcdefghij');
  });

  it('property: text with its ranges masked holds no character of the secret, and no range means text() changes nothing', () => {
    const piece = fc.oneof(
      fc.constant(SECRET),
      fc.constant(`token=${SECRET}`),
      fc.constant('password: hunterhunter'),
      fc.stringMatching(/^[a-m ,.\n"=:]{0,12}$/),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const text = pieces.join('');
        const ranges = scrubber.redactions(text);
        let masked = '';
        let at = 0;
        for (const [from, to] of ranges) {
          expect(from).toBeGreaterThanOrEqual(at);
          masked += text.slice(at, from) + REDACTED;
          at = to;
        }
        masked += text.slice(at);
        expect(masked).not.toMatch(SECRET_CHARS);
        expect(scrubber.text(masked)).toBe(masked);
        expect(ranges.length === 0).toBe(scrubber.text(text) === text);
      }),
      { numRuns: 400 },
    );
  });
});

describe('Scrubber.redactions: a range is the secret, whatever characters it has', () => {
  const scrubber = new Scrubber([SECRET]);
  const mask = (text: string) => {
    let out = '';
    let at = 0;
    for (const [from, to] of scrubber.redactions(text)) {
      out += text.slice(at, from) + REDACTED;
      at = to;
    }
    return out + text.slice(at);
  };

  it("a value's first or last characters equal to those of [REDACTED] were left out of its range, and shown", () => {
    // Found by comparing the match with its replacement: "[" and "]" (or "[REDACTED]" whole) were common to both.
    expect(mask('password=[abc]xyz]')).toBe(`password=${REDACTED}`);
    expect(mask('password=hunter2]')).toBe(`password=${REDACTED}`);
    expect(mask('"password": "pass]"')).toBe(`"password": "${REDACTED}"`);
    expect(mask('"token": "[REDACTED]x"')).toBe(`"token": "${REDACTED}"`);
    expect(mask('https://user:[pw]@host')).toBe(`https://user:${REDACTED}@host`);
    expect(mask('"password": ["x]", "y"]')).toBe(`"password": [${REDACTED}]`);
    // Counts in a token array are not secrets; strings around them are (one range, first to last).
    expect(mask('"api_keys": [3, "k]", 4]')).toBe(`"api_keys": [3, ${REDACTED}, 4]`);
  });

  it('property: masking the ranges leaves no character of a value, and nothing text() would still redact', () => {
    // Values of [, ], Q, Z, X and 9 only; the noise and the names have none of them.
    // Not all 9s: "9999" under "token" is a count, no secret.
    const value = fc.stringMatching(/^[[\]QZX9]{4,12}$/).filter((v) => /[^9]/.test(v));
    const field = fc.oneof(
      value.map((v) => `password=${v}`),
      value.map((v) => `"token": "${v}"`),
      value.map((v) => `"api_keys": ["${v}", 12]`),
      value.map((v) => `https://u:${v}@h`),
      fc.constant(SECRET),
    );
    fc.assert(
      fc.property(fc.array(fc.oneof(field, fc.stringMatching(/^[a-m \n]{0,12}$/)), { maxLength: 8 }), (parts) => {
        const text = parts.join(' ');
        const masked = mask(text);
        // The array's own brackets set aside.
        expect(masked.replaceAll(REDACTED, '').replaceAll('": [', '').replaceAll(', 12]', '')).not.toMatch(/[[\]QZX9]/);
        expect(scrubber.text(masked)).toBe(masked);
      }),
      { numRuns: 500 },
    );
  });
});

describe('estate pieces masked in their window', () => {
  const scrubber = new Scrubber([SECRET, 'pässwörd-ünïcode']);

  it('property: no piece of a file, whatever its bounds, shows a character of the secret (text and base64 alike)', () => {
    const body = fc.array(fc.oneof(fc.constant(SECRET), fc.stringMatching(/^[a-m \n]{0,40}$/)), { minLength: 1, maxLength: 10 });
    fc.assert(
      fc.property(body, fc.nat(), fc.nat(), (parts, a, b) => {
        const file = Buffer.from(parts.join(''));
        const from = a % (file.length + 1);
        const to = from + (b % (file.length - from + 1));
        const ranges = redactedBytes(scrubber, file);
        expect(maskedText(file, from, to, ranges).replaceAll(REDACTED, '')).not.toMatch(SECRET_CHARS);
        expect(maskedBytes(file, from, to, ranges).toString('latin1').replaceAll(/[[\]REDACT]/g, '')).not.toMatch(SECRET_CHARS);
        expect(maskedBytes(file, from, to, ranges)).toHaveLength(to - from);
      }),
      { numRuns: 500 },
    );
  });

  it('a secret spelled with characters past ASCII is found in the UTF-8 text, widened to whole characters', () => {
    const file = Buffer.from('é before pässwörd-ünïcode after ü');
    const ranges = redactedBytes(scrubber, file);
    expect(ranges).toHaveLength(1);
    expect(file.toString('utf8', ...ranges[0]!)).toBe('pässwörd-ünïcode');
    // A piece that starts inside "ä" (a cut character) and ends inside "ü".
    const start = file.indexOf('ä') + 1;
    expect(maskedText(file, start, file.indexOf('ü', start) + 1, ranges)).toBe(REDACTED);
    // The window cut inside a character at either end still finds it.
    expect(redactedBytes(scrubber, file.subarray(1, file.length - 1))).toEqual([[ranges[0]![0] - 1, ranges[0]![1] - 1]]);
  });

  it('keepLines: a masked part that ran over lines leaves their breaks, so the lines after it keep their numbers', () => {
    const pem = `-----BEGIN PRIVATE KEY-----\nMIIEow\nAAKCAQ\n-----END PRIVATE KEY-----`;
    const file = Buffer.from(`zero\n${pem}\nfive needle\n`);
    const ranges = redactedBytes(new Scrubber(), file);
    expect(maskedText(file, 0, file.length, ranges)).toBe(`zero\n${REDACTED}\nfive needle\n`);
    const kept = maskedText(file, 0, file.length, ranges, true);
    expect(kept).toBe(`zero\n${REDACTED}\n\n\n\nfive needle\n`);
    expect(kept.split('\n').indexOf('five needle')).toBe(file.toString().split('\n').indexOf('five needle'));
  });

  it('a window that is not valid UTF-8 (a Latin-1 byte, no NUL) is still read as text: a secret spelled past ASCII is found', () => {
    // The UTF-8 reading was dropped for the whole window; the Latin-1 one sees neither the secret
    // (its "ä" is two bytes) nor the value after "password=" ("à" is C3 A0, and A0 a space there).
    const text = 'key: pässwörd-ünïcode\npassword=àbcdefghij\n';
    const file = Buffer.concat([Buffer.from('caf\xe9 in Latin-1\n', 'latin1'), Buffer.from(text)]);
    const ranges = redactedBytes(scrubber, file);
    expect(ranges.map(([from, to]) => file.toString('utf8', from, to))).toEqual(['pässwörd-ünïcode', 'àbcdefghij']);
    // Read three bytes at a time, the pieces tell nothing of either.
    let pieces = '';
    for (let at = 0; at < file.length; at += 3) pieces += maskedText(file, at, Math.min(at + 3, file.length), ranges);
    expect(pieces).not.toContain('sswö');
    expect(pieces).not.toContain('bcde');
  });

  it('property: lossyUtf8 decodes as Buffer.toString does, each code unit mapped to the bytes it came from', () => {
    const bytes = fc.array(fc.oneof(fc.integer({ min: 0, max: 255 }), fc.constantFrom(0xc3, 0xa4, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80, 0xed, 0xa0)), { maxLength: 40 });
    fc.assert(
      fc.property(bytes, (list) => {
        const buffer = Buffer.from(list);
        const { text, starts } = lossyUtf8(buffer);
        expect(text).toBe(buffer.toString('utf8'));
        expect(starts).toHaveLength(text.length + 1);
        expect(starts[text.length]).toBe(buffer.length);
        for (let i = 0; i < text.length; i++) {
          expect(starts[i]).toBeLessThanOrEqual(starts[i + 1]!);
          const pair = text.charCodeAt(i) >= 0xd800 && text.charCodeAt(i) < 0xdc00;
          const char = pair ? text.slice(i, i + 2) : text[i]!;
          const to = pair ? starts[i + 2]! : starts[i + 1]!;
          if (char !== '\ufffd') expect(buffer.subarray(starts[i]!, to).toString('utf8')).toBe(char);
          if (pair) i++;
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('binary files: an ASCII secret among other bytes is found, its bytes overwritten and the length kept', () => {
    const file = Buffer.concat([Buffer.from([0, 1, 0xff, 0xfe]), Buffer.from(SECRET), Buffer.from([0, 0x80, 7])]);
    const ranges = redactedBytes(scrubber, file);
    expect(ranges).toEqual([[4, 4 + SECRET.length]]);
    const masked = maskedBytes(file, 0, file.length, ranges);
    expect(masked.toString('latin1')).not.toContain(SECRET.slice(0, 4));
    expect(masked.subarray(4, 4 + REDACTED.length).toString()).toBe(REDACTED);
    expect([...masked.subarray(0, 4)]).toEqual([0, 1, 0xff, 0xfe]);
  });

  it('the margin is at least three bytes for each unit of the longest exact secret', () => {
    expect(scrubMargin(new Scrubber())).toBe(SCRUB_MARGIN_BYTES);
    expect(scrubMargin(new Scrubber(['k'.repeat(2000)]))).toBe(6000);
  });
});

describe('secretLines', () => {
  it('names every line a redaction touches, one running over several lines included, counted as applyUnifiedDiff splits them', () => {
    const scrubber = new Scrubber([SECRET, `${SECRET}\nline two of it`]);
    const text = `zero\n${SECRET} one\ntwo\nthree ${SECRET}\nline two of it\nfive\n${SECRET}`;
    expect([...secretLines(scrubber, text)].sort()).toEqual([1, 3, 4, 6]);
    // Line 3's newline is inside the secret that goes on on line 4: nothing may go between them.
    expect([...secretLines(scrubber, text).joined]).toEqual([3]);
    expect([...secretLines(scrubber, 'no secret\nhere\n')]).toEqual([]);
    expect([...secretLines(scrubber, undefined)]).toEqual([]);
  });
});
