import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PATTERN, REDACTED, redact, Scrubber } from '../../src/shared/scrub.js';
import { AnchorScanner, replaceAtStarts, SKIP_MIN_CHARS } from '../../src/shared/scrub-scan.js';

/**
 * The one-pass scrub (scrub-scan.ts) must give exactly what the plain two-regex scrub gives:
 * the exact secrets replaced first, then `text.replace(PATTERN, …)` over the whole text.
 */
function reference(text: string, secrets: readonly string[]): string {
  if (text.length < 4) return text;
  let out = text;
  const spellings = new Set<string>();
  for (const s of secrets) {
    if (s.length < 4) continue;
    spellings.add(s);
    const json = JSON.stringify(s).slice(1, -1);
    if (json.length >= 4) spellings.add(json);
    const url = encodeURIComponent(s);
    if (url.length >= 4) spellings.add(url);
  }
  if (spellings.size) {
    const parts = [...spellings].sort((a, b) => b.length - a.length).map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
    out = out.replace(new RegExp(parts.join('|'), 'g'), REDACTED);
  }
  const global = new RegExp(PATTERN.source, 'g');
  return out.replace(global, (match: string, ...rest: unknown[]) => redact(match, rest[rest.length - 1] as Record<string, string | undefined>));
}

const alnum = (n: number) => 'aB3dE5gH7j'.repeat(Math.ceil(n / 10)).slice(0, n);
/** A planted example of every field pattern and value shape, plus near misses. */
const PLANTED = [
  'password=hunter22',
  'PassWord: "two words"',
  '"api_key": "abc\\"def"',
  '"db-Passcode" : 123456',
  'max_tokens=100',
  'token: 12',
  'token=abcdefgh',
  'X-Api-Key: abcd1234',
  'Authorization: Bearer xyz12345678',
  'MY_SESSION-ID=abcdef',
  'client-secret = "q w e"',
  'private_key=\'k\'',
  'accesskeys=AAAAAAA',
  'signature:zzzzzzz',
  '-a-b-cookie=abcdefg',
  '-----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY-----',
  '-----BEGIN PUBLIC KEY-----',
  'https://user:hunter2@example.com/x',
  'postgres://admin:pa:ss@db/x',
  'redis://:nouser@host',
  'ftp://us\u00a0er:pw@h',
  'AKIA' + 'ABCDEFGHIJKLMNOP',
  'ASIA' + 'ABCDEFGHIJKLMNO',
  'ghp_' + alnum(36),
  'github_pat_' + alnum(22),
  'xoxb-1234567890-abc',
  'xapp-1-ABCDEFGHIJ',
  'https://hooks.slack.com/services/T000/B000/XXXX',
  'eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSM',
  'Bearer abcdefgh12345',
  'Basic dXNlcjpwYXNz',
  'Token abcdefghij',
  'sk-ant-' + alnum(16),
  'sk_live_' + alnum(12),
  'pk_test_' + alnum(10),
  'whsec_' + alnum(20),
  'AIza' + alnum(35),
  'ya29.' + alnum(20),
  'SG.' + alnum(16) + '.' + alnum(16),
  'npm_' + alnum(36),
  'glpat-' + alnum(20),
  'hf_' + alnum(30),
  'SK' + 'abcdef0123456789'.repeat(2),
  'task ask SKIP sk- risk',
  'supersecretvalue123',
  'p@ss w0rd"x',
  'p%40ss%20w0rd%22x',
  'p@ss w0rd\\"x',
];
const NOISE = [' ', '\n', '"', "'", '=', ':', '-', '_', '@', '/', '://', ',', '\u2028', '\u0085', '\u00e9', '😀', 'the', 'Key', 'pass', 'tok', 'en', 'word'];

describe('one-pass scrubbing (scrub-scan)', () => {
  it('finds every anchor occurrence, in any case, as the automaton promises', () => {
    const scanner = new AnchorScanner([
      { text: 'he', lead: 'none' },
      { text: 'she', lead: 'none' },
      { text: 'hers', lead: 'none' },
      { text: 'His', lead: 'none', caseSensitive: true },
    ]);
    const hits: string[] = [];
    scanner.scan('uSHErs his His', (i, at) => hits.push(`${i}@${at}`));
    expect(hits).toEqual(['1@1', '0@2', '2@2', '3@11']);
  });

  it('property: reports exactly the occurrences a naive search finds, for any anchor set (the automaton built row by row)', () => {
    const alphabet = fc.constantFrom('a', 'b', 'A', 'B', '-', '_', 'é', '😀');
    const word = fc.array(alphabet, { minLength: 1, maxLength: 5 }).map((cs) => cs.join(''));
    const anchors = fc.array(fc.record({ text: word, caseSensitive: fc.boolean() }), { minLength: 1, maxLength: 12 });
    const fold = (t: string) => [...t].map((ch) => (ch.length === 1 && ch.charCodeAt(0) < 128 ? ch.toLowerCase() : ch.length === 1 ? '\u007f' : '\u007f\u007f')).join('');
    fc.assert(
      fc.property(anchors, fc.array(alphabet, { maxLength: 40 }), (set, chars) => {
        const text = chars.join('');
        const scanner = new AnchorScanner(set.map((a) => ({ text: a.text, lead: 'none' as const, caseSensitive: a.caseSensitive })));
        const hits: string[] = [];
        scanner.scan(text, (i, at) => hits.push(`${i}@${at}`));
        // Naive: every end position, in order; at one position the anchors in the automaton's output order are not
        // specified, so compare as sorted sets per position.
        const expected: string[] = [];
        const folded = fold(text);
        for (let end = 0; end < text.length; end++) {
          set.forEach((a, i) => {
            const start = end - a.text.length + 1;
            if (start < 0) return;
            const found = a.caseSensitive ? text.slice(start, end + 1) === a.text : folded.slice(start, end + 1) === fold(a.text);
            if (found) expected.push(`${i}@${start}`);
          });
        }
        expect([...hits].sort()).toEqual([...expected].sort());
      }),
      { numRuns: 2000 },
    );
  });

  it('property: a text past SKIP_MIN_CHARS (the skip expression, then the automaton) gives exactly the hits of the automaton alone', () => {
    const alphabet = fc.constantFrom('a', 'b', 'A', 'B', '-', '_', '.', '/', ' ', 'é', '😀');
    const word = fc.array(fc.constantFrom('a', 'b', 'A', 'B', '-', '_', '.', '/'), { minLength: 1, maxLength: 5 }).map((cs) => cs.join(''));
    const anchors = fc.array(fc.record({ text: word, caseSensitive: fc.boolean() }), { minLength: 1, maxLength: 8 });
    const filler = 'x'.repeat(SKIP_MIN_CHARS);
    fc.assert(
      fc.property(anchors, fc.array(fc.tuple(fc.nat({ max: 3 }), fc.array(alphabet, { maxLength: 12 })), { maxLength: 12 }), (set, pieces) => {
        // Stretches with no anchor between the pieces, so the expression has places to skip.
        const text = filler + pieces.map(([gap, chars]) => 'x'.repeat(gap * 500) + chars.join('')).join('');
        const scanner = new AnchorScanner(set.map((a) => ({ text: a.text, lead: 'none' as const, caseSensitive: a.caseSensitive })));
        const skipped: string[] = [];
        scanner.scan(text, (i, at) => skipped.push(`${i}@${at}`));
        // The same scanner over the same text in pieces shorter than SKIP_MIN_CHARS is walked character by character.
        const walked: string[] = [];
        scanner.scan(text.slice(0, SKIP_MIN_CHARS - 1), () => undefined);
        (scanner as unknown as { walk(t: string, f: number, to: number, h: (i: number, at: number) => void): number }).walk(text, 0, text.length, (i, at) => walked.push(`${i}@${at}`));
        expect(skipped).toEqual(walked);
      }),
      { numRuns: 300 },
    );
  });

  it('a text with a non-ASCII anchor is walked character by character (the expression would not find every place it folds to)', () => {
    const scanner = new AnchorScanner([{ text: 'sécret', lead: 'flag', caseSensitive: true }]);
    const hits: number[] = [];
    scanner.scan('x'.repeat(SKIP_MIN_CHARS) + 'sécret', (_i, at) => hits.push(at));
    expect(hits).toEqual([SKIP_MIN_CHARS]);
  });

  it('replaceAtStarts equals a global replace when the starts cover every match', () => {
    const text = 'a1 b22 c333 d4444';
    const starts = [0, 3, 7, 12];
    expect(replaceAtStarts(text, /[a-z]\d+/y, starts, (m) => `<${m}>`)).toBe(text.replace(/[a-z]\d+/g, (m) => `<${m}>`));
    expect(replaceAtStarts(text, /[a-z]\d+/y, [], (m) => m)).toBe(text);
  });

  it('property: equals the plain scrub on texts full of planted secrets and near misses', () => {
    const secrets = ['supersecretvalue123', 'p@ss w0rd"x'];
    const scrubber = new Scrubber(secrets);
    const bare = new Scrubber();
    const piece = fc.oneof(
      fc.constantFrom(...PLANTED),
      fc.constantFrom(...NOISE),
      fc.string({ maxLength: 6 }),
      fc.constantFrom(...PLANTED).map((p) => p.toUpperCase()),
      fc.constantFrom(...PLANTED).map((p) => p.slice(0, Math.max(1, p.length - 3))),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 24 }), (pieces) => {
        const text = pieces.join('');
        expect(scrubber.text(text)).toBe(reference(text, secrets));
        expect(bare.text(text)).toBe(reference(text, []));
      }),
      { numRuns: 3000 },
    );
  });

  it('property: equals the plain scrub on long texts too (past SKIP_MIN_CHARS), secrets planted anywhere', () => {
    const secrets = ['supersecretvalue123', 'p@ss w0rd"x'];
    const scrubber = new Scrubber(secrets);
    const bare = new Scrubber();
    const prose = 'The quick brown fox jumps over the lazy dog; key_name=value pairs and e-mail@example.org. ';
    const piece = fc.oneof(fc.constantFrom(...PLANTED), fc.constantFrom(...NOISE), fc.constantFrom(...PLANTED).map((p) => p.toUpperCase()));
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat({ max: 80 }), piece), { maxLength: 10 }), (pieces) => {
        const text = prose.repeat(50) + pieces.map(([n, p]) => prose.repeat(n) + p).join('');
        expect(scrubber.text(text)).toBe(reference(text, secrets));
        expect(bare.text(text)).toBe(reference(text, []));
      }),
      { numRuns: 200 },
    );
  });

  it('leaves a large text with no anchor as the very same string', () => {
    const text = 'The quick brown fox jumps over the lazy dog; key_name=value pairs. '.repeat(20_000);
    expect(new Scrubber().text(text)).toBe(text);
  });
});
