import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PATTERN, REDACTED, redact, Scrubber } from '../../src/shared/scrub.js';
import { AnchorScanner, BYTE_SCAN_MIN_CHARS, BYTE_SCAN_STEP, BYTE_TABLE_MAX_STATES, replaceAtStarts, type Anchor } from '../../src/shared/scrub-scan.js';
import { LAZY_STRING_MIN_BYTES, parseResponseLine, rawJsonString } from '../../src/wire/raw-json.js';
import { resultOf } from '../support/messages.js';

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

  const walkOf = (scanner: AnchorScanner) =>
    (scanner as unknown as { walk(t: string, f: number, to: number, h: (i: number, at: number) => void): boolean }).walk.bind(scanner);
  const hasByteTable = (scanner: AnchorScanner) => (scanner as unknown as { wide: boolean }).wide;

  /**
   * The anchors, or with them enough others (`q…z`, never in the tests' texts) that the scanner
   * has more than {@link BYTE_TABLE_MAX_STATES} states: no byte table, long texts walked through the folded one.
   */
  const withStates = (anchors: Anchor[], many: boolean): Anchor[] =>
    many ? [...anchors, ...Array.from({ length: BYTE_TABLE_MAX_STATES }, (_, i) => ({ text: `q${i.toString(36)}z`, lead: 'flag' as const, caseSensitive: true }))] : anchors;
  const TABLES = [
    ['with its byte table', false],
    ['without one (too many states)', true],
  ] as const;

  it('a scanner keeps a byte table up to BYTE_TABLE_MAX_STATES states, none past it, and none when its anchors are not all ASCII', () => {
    expect(hasByteTable(new AnchorScanner([{ text: 'password', lead: 'name' }]))).toBe(true);
    expect(hasByteTable(new AnchorScanner(withStates([{ text: 'password', lead: 'name' }], true)))).toBe(false);
    expect(hasByteTable(new AnchorScanner([{ text: 'pässword', lead: 'name' }]))).toBe(false);
  });

  it.each(TABLES)('property: a text past BYTE_SCAN_MIN_CHARS (walked as bytes) gives exactly the hits of the character walk, and occursIn says whether there are any, %s', (_name, many) => {
    // Characters past U+00FF whose low byte is an anchor's letter ('š' → a, 'Ł' → A, '本' → ',', '╟' → b): bytes find false occurrences there.
    const alphabet = fc.constantFrom('a', 'b', 'A', 'B', '-', '_', '.', '/', ' ', 'é', '😀', '\u0161', '\u0141', '\u672c', '\u2562');
    const word = fc.array(fc.constantFrom('a', 'b', 'A', 'B', '-', '_', '.', '/', ','), { minLength: 1, maxLength: 5 }).map((cs) => cs.join(''));
    const anchors = fc.array(fc.record({ text: word, caseSensitive: fc.boolean() }), { minLength: 1, maxLength: 8 });
    const filler = 'x'.repeat(BYTE_SCAN_MIN_CHARS);
    fc.assert(
      fc.property(anchors, fc.array(fc.tuple(fc.nat({ max: 40 }), fc.array(alphabet, { maxLength: 12 })), { maxLength: 12 }), (set, pieces) => {
        // Gaps up to 40 × 1,000 characters: pieces land on either side of the byte scan's steps and halves.
        const text = filler + pieces.map(([gap, chars]) => 'x'.repeat(gap * 1000) + chars.join('')).join('');
        const scanner = new AnchorScanner(withStates(set.map((a) => ({ text: a.text, lead: 'none' as const, caseSensitive: a.caseSensitive })), many));
        expect(hasByteTable(scanner)).toBe(!many);
        const asBytes: string[] = [];
        scanner.scan(text, (i, at) => asBytes.push(`${i}@${at}`));
        const walked: string[] = [];
        walkOf(scanner)(text, 0, text.length, (i, at) => walked.push(`${i}@${at}`));
        expect(asBytes).toEqual(walked);
        expect(scanner.occursIn(text)).toBe(walked.length > 0);
      }),
      { numRuns: 300 },
    );
  });

  it.each(TABLES)('finds an occurrence at every place around the seams of a byte scan (steps, and the walks of occursIn), %s', (_name, many) => {
    const scanner = new AnchorScanner(
      withStates(
        [
          { text: 'password', lead: 'name' },
          { text: 'SK', lead: 'none', caseSensitive: true },
        ],
        many,
      ),
    );
    const length = 3 * BYTE_SCAN_STEP;
    // scan's steps start at multiples of BYTE_SCAN_STEP; occursIn's every BYTE_SCAN_STEP − 7 (the
    // longest anchor, 8, less one, here and padded alike). Within a step, its walks start at each
    // quarter (four walks, the byte table) or at the middle (two), 7 bytes early.
    const overlap = 'password'.length - 1;
    const seams = [1, 2].map((k) => k * BYTE_SCAN_STEP);
    const parts = many ? [1 / 2] : [1 / 4, 1 / 2, 3 / 4];
    for (let k = 0; k < 3; k++) {
      const start = k * (BYTE_SCAN_STEP - overlap);
      seams.push(start, start + BYTE_SCAN_STEP);
      for (const part of parts) seams.push(start + BYTE_SCAN_STEP * part - overlap, start + BYTE_SCAN_STEP * part);
    }
    for (const seam of seams) {
      for (let at = Math.max(0, seam - 10); at <= seam + 3; at++) {
        for (const [word, index] of [['PassWord', 0], ['SK', 1]] as const) {
          const text = 'x'.repeat(at) + word + 'x'.repeat(length - at - word.length);
          const hits: string[] = [];
          scanner.scan(text, (i, p) => hits.push(`${i}@${p}`));
          expect(hits, `${word} at ${at}`).toEqual([`${index}@${at}`]);
          expect(scanner.occursIn(text), `${word} at ${at}`).toBe(true);
          // As the case-sensitive anchor is not written, nothing.
          if (index === 1) expect(scanner.occursIn(text.toLowerCase())).toBe(false);
        }
      }
    }
  });

  it('with the byte table: an occurrence in the last bytes of a step whose length is no multiple of four (the last walk runs on past its quarter), and in a step too short for four walks', () => {
    const scanner = new AnchorScanner([
      { text: 'password', lead: 'name' },
      { text: 'SK', lead: 'none', caseSensitive: true },
    ]);
    expect(hasByteTable(scanner)).toBe(true);
    // One step of 4,099 bytes: four walks of a quarter (1,024) and 7 bytes, then bytes 4,096–4,098 by the last alone.
    for (const pad of [4096, 4097]) {
      expect(scanner.occursIn('x'.repeat(pad) + 'SK' + 'x'.repeat(4097 - pad)), `SK at ${pad}`).toBe(true);
      expect(scanner.occursIn('x'.repeat(pad) + 'Sk' + 'x'.repeat(4097 - pad))).toBe(false);
    }
    // An anchor of 3,002 characters makes the overlap longer than a quarter of the 5,000-character text: one walk.
    const long = 'k'.repeat(3000) + 'ey';
    const withLong = new AnchorScanner([{ text: long, lead: 'flag' }]);
    expect(hasByteTable(withLong)).toBe(true);
    for (const at of [0, 1000, 1998]) {
      const text = 'x'.repeat(at) + long + 'x'.repeat(5000 - at - long.length);
      expect(withLong.occursIn(text), `at ${at}`).toBe(true);
      expect(withLong.occursIn(text.replace('ey', 'ez'))).toBe(false);
    }
  });

  it('an anchor longer than a byte scan step is still found (walked character by character)', () => {
    const long = 'k'.repeat(BYTE_SCAN_STEP) + 'ey';
    const scanner = new AnchorScanner([{ text: long, lead: 'flag', caseSensitive: true }]);
    const at = BYTE_SCAN_STEP - 100;
    const text = 'x'.repeat(at) + long + 'x'.repeat(BYTE_SCAN_STEP);
    expect(scanner.occursIn(text)).toBe(true);
    const hits: number[] = [];
    scanner.scan(text, (_i, p) => hits.push(p));
    expect(hits).toEqual([at]);
  });

  it('an anchor holding U+007F matches any non-ASCII character there, in a long text as in a short one', () => {
    const scanner = new AnchorScanner([{ text: 'a\x7f', lead: 'none' }]);
    for (const ch of ['\x7f', 'é', 'š', 'ſ']) {
      for (const text of [`a${ch}`, 'x'.repeat(BYTE_SCAN_MIN_CHARS) + `a${ch}`]) {
        const hits: number[] = [];
        scanner.scan(text, (_i, at) => hits.push(at));
        expect(hits, JSON.stringify(ch)).toEqual([text.length - 2]);
        expect(scanner.occursIn(text)).toBe(true);
      }
    }
  });

  it('a scanner takes some 200,000 anchors (the longest one found without a spread of them all)', () => {
    const anchors = Array.from({ length: 200_000 }, (_, i) => ({ text: `k${i.toString(36)}`, lead: 'flag' as const, caseSensitive: true }));
    const scanner = new AnchorScanner(anchors);
    expect(scanner.occursIn('x'.repeat(BYTE_SCAN_MIN_CHARS) + 'k4c91')).toBe(true);
  });

  it('a character past U+00FF whose low byte spells an anchor is no occurrence, in bytes as in characters', () => {
    const scanner = new AnchorScanner([{ text: 'ab', lead: 'none' }]);
    const text = 'x'.repeat(BYTE_SCAN_MIN_CHARS) + '\u0161\u0162' + 'x'.repeat(10) + 'aB';
    const hits: number[] = [];
    scanner.scan(text, (_i, at) => hits.push(at));
    expect(hits).toEqual([BYTE_SCAN_MIN_CHARS + 12]);
    expect(scanner.occursIn(text.slice(0, -2))).toBe(false);
  });

  it('a hit may scan another text, with the same scanner or another (it takes its own buffer)', () => {
    const scanner = new AnchorScanner([{ text: 'key', lead: 'none' }]);
    const text = 'x'.repeat(BYTE_SCAN_STEP - 2) + 'key' + 'x'.repeat(BYTE_SCAN_STEP) + 'KEY';
    const hits: number[] = [];
    // A first scan leaves the module's one buffer free again.
    expect(scanner.occursIn(text)).toBe(true);
    scanner.scan(text, (_i, at) => {
      hits.push(at);
      // Fills a buffer with `key`s: had it been the outer scan's, the rest of its step would be read as `key`s too.
      expect(scanner.occursIn('key'.repeat(BYTE_SCAN_STEP))).toBe(true);
    });
    expect(hits).toEqual([BYTE_SCAN_STEP - 2, 2 * BYTE_SCAN_STEP + 1]);
  });

  it('a text with a non-ASCII anchor is walked character by character (bytes would not find every place it folds to)', () => {
    const scanner = new AnchorScanner([{ text: 'sécret', lead: 'flag', caseSensitive: true }]);
    const hits: number[] = [];
    scanner.scan('x'.repeat(BYTE_SCAN_MIN_CHARS) + 'sécret', (_i, at) => hits.push(at));
    expect(hits).toEqual([BYTE_SCAN_MIN_CHARS]);
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

  it('property: equals the plain scrub on long texts too (past BYTE_SCAN_MIN_CHARS), secrets planted anywhere', () => {
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

describe('a large JSON string told clean from its bytes (issue 19: Scrubber.leavesJsonString)', () => {
  const prose = 'The quick brown fox jumps over the lazy dog; "quotes", key_name=value pairs and e-mail@example.org.\n';
  /** `text` written as a JSON string's inside, each character as `how` picks (as JSON.stringify, as \uXXXX, `/` as `\/`). */
  const encode = (text: string, how: (i: number) => number) =>
    [...text]
      .map((ch, i) => {
        const h = how(i);
        if (ch.length === 1 && h === 1) return `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`;
        if (ch === '/' && h === 2) return '\\/';
        return JSON.stringify(ch).slice(1, -1);
      })
      .join('');
  /** The text block of a response line carrying `inside` as its text, parsed by its parts: its text and bytes. */
  const held = (inside: string) => {
    const parsed = parseResponseLine(Buffer.from(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"${inside}"}]}}`));
    const block = resultOf<{ content: Array<{ text: string }> }>(parsed).content[0]!;
    return { raw: rawJsonString(block, 'text')!, text: () => block.text };
  };
  const bulk = prose.repeat(Math.ceil(LAZY_STRING_MIN_BYTES / prose.length));

  it('clean prose with escaped quotes and newlines is told clean without being read; a secret anywhere is not', () => {
    const scrubber = new Scrubber(['supersecretvalue123']);
    const { raw } = held(encode(bulk, () => 0));
    expect(scrubber.leavesJsonString(raw.bytes, raw.escaped)).toBe(true);
    for (const secret of ['AKIA' + 'ABCDEFGHIJKLMNOP', 'password=hunter22', 'supersecretvalue123', 'Bearer abcdefgh12345']) {
      const { raw: dirty, text } = held(encode(bulk + ' ' + secret + ' ' + bulk, () => 0));
      expect(scrubber.leavesJsonString(dirty.bytes, dirty.escaped)).toBe(false);
      expect(scrubber.text(text())).not.toContain(secret);
    }
  });

  it('an escape standing for a character an anchor holds leaves it undecided: AKIA behind \\u0041, a URL behind \\/', () => {
    const scrubber = new Scrubber();
    const key = 'AKIA' + 'ABCDEFGHIJKLMNOP';
    const hidden = held(encode(bulk + key, (i) => (i === bulk.length ? 1 : 0)));
    expect(hidden.raw.bytes.includes('KIAABCD')).toBe(true);
    expect(hidden.raw.bytes.includes(key)).toBe(false);
    expect(scrubber.leavesJsonString(hidden.raw.bytes, hidden.raw.escaped)).toBe(false);
    expect(scrubber.text(hidden.text())).toContain(REDACTED);
    const url = held(encode(bulk + 'https://user:hunter2@example.com/x', () => 2));
    expect(url.raw.bytes.includes('://')).toBe(false);
    expect(scrubber.leavesJsonString(url.raw.bytes, url.raw.escaped)).toBe(false);
    expect(scrubber.text(url.text())).not.toContain('hunter2');
  });

  it('property: told clean from the bytes means the scrub leaves the text as it is, whatever the escapes', () => {
    const secrets = ['supersecretvalue123', 'p@ss w0rd"x'];
    const scrubbers = [new Scrubber(secrets), new Scrubber()];
    const piece = fc.oneof(fc.constantFrom(...PLANTED), fc.constantFrom(...NOISE), fc.constantFrom(...PLANTED).map((p) => p.toUpperCase()));
    let told = 0;
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat({ max: 3 }), piece), { maxLength: 6 }), fc.array(fc.constantFrom(0, 0, 0, 0, 1, 2), { minLength: 64, maxLength: 64 }), (pieces, hows) => {
        const text = bulk + pieces.map(([n, p]) => prose.repeat(n) + p).join('');
        const { raw, text: read } = held(encode(text, (i) => (i < bulk.length ? 0 : hows[i % 64]!)));
        expect(read()).toBe(text);
        for (const scrubber of scrubbers) {
          if (!scrubber.leavesJsonString(raw.bytes, raw.escaped)) continue;
          told++;
          expect(scrubber.text(text)).toBe(text);
        }
      }),
      { numRuns: 400 },
    );
    // Not vacuous: many texts were told clean from their bytes. Most generated texts hold an anchor,
    // so only some are: 16-34 of 150 runs over 25 seeds, which once fell to 20 (a failed bound); at
    // 400 runs the count stays far above it.
    expect(told).toBeGreaterThan(20);
    // 400 large texts: 6-14 s alone on 2 cores, past 30 s beside other work (a CI run timed out so).
  }, 120_000);
});
