import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isCredentialField, MAX_DEPTH, REDACTED, Scrubber } from '../../src/shared/scrub.js';

const s = new Scrubber(['exact-Secret-9f8e7d', 'p@ss/wörd"quote']);

describe('Scrubber.text', () => {
  it.each([
    ['AWS access key', 'key AKIAIOSFODNN7EXAMPLE here'],
    ['GitHub token', 'ghp_' + 'a'.repeat(36)],
    ['GitHub fine-grained', 'github_pat_' + 'A1'.repeat(20)],
    ['Slack bot token', 'xoxb-1234567890-abcdefghij'],
    ['JWT', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U'],
    ['Bearer', 'sent Bearer abcdefgh12345678'],
    ['OpenAI key', 'sk-proj-abcdefghijklmnop1234'],
    ['Anthropic key', 'sk-ant-api03-abcdefghijklmnop'],
    ['Stripe key', 'sk_live_abcdefghij1234'],
    ['Google API key', 'AIza' + 'b'.repeat(35)],
    ['npm token', 'npm_' + 'c'.repeat(36)],
    ['GitLab token', 'glpat-' + 'd'.repeat(20)],
    ['Hugging Face token', 'hf_' + 'e'.repeat(34)],
    ['PEM private key', '-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----'],
  ])('redacts a %s', (_label, secret) => {
    const out = s.text(`before ${secret} after`);
    expect(out).toContain(REDACTED);
    expect(out).toContain('before');
    const core = secret.replace(/^(key |sent )/, '').replace(/ here$/, '');
    expect(out).not.toContain(core);
  });

  it('redacts a PEM private key cut before its END line (a head of the file, a page): its whole body, in text and in JSON text', () => {
    const body = 'MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn\n/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n';
    const cutKey = `-----BEGIN RSA PRIVATE KEY-----\n${body}`;
    for (const text of [`head:\n${cutKey}`, JSON.stringify({ content: `head:\n${cutKey}` }), `x ${cutKey.slice(0, -9)}`]) {
      const out = s.text(text);
      expect(out, text).toContain(REDACTED);
      expect(out, text).not.toContain('MIIEow');
      expect(out, text).not.toContain('ygWyF8');
    }
    // A whole key is still one match and the text after it stays.
    expect(s.text(`a -----BEGIN PRIVATE KEY-----\n${body}-----END PRIVATE KEY----- (rotated)`)).toBe(`a ${REDACTED} (rotated)`);
    // A cut encrypted key: its header lines are taken too.
    expect(s.text(`-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F1A\n\n${body}`)).toBe(REDACTED);
  });

  it('redacts exact secrets anywhere, also JSON-escaped and URL-encoded', () => {
    expect(s.text('xxexact-Secret-9f8e7dyy')).toBe(`xx${REDACTED}yy`);
    expect(s.text(JSON.stringify({ v: 'p@ss/wörd"quote' }))).not.toContain('quote');
    expect(s.text(`https://h/?q=${encodeURIComponent('p@ss/wörd"quote')}`)).toBe(`https://h/?q=${REDACTED}`);
  });

  it('redacts credential-named fields in JSON text and plain text, any case, keeping the name', () => {
    expect(s.text('{"Password": "hunter22", "user": "bob"}')).toBe(`{"Password": "${REDACTED}", "user": "bob"}`);
    expect(s.text('{"X-Api-Key":"k-123456"}')).toBe(`{"X-Api-Key":"${REDACTED}"}`);
    expect(s.text('"db_password": 123456')).toBe(`"db_password": "${REDACTED}"`);
    expect(s.text('DB_PASSWORD=hunter22 next')).toBe(`DB_PASSWORD=${REDACTED} next`);
    expect(s.text("password: 'two words'")).toBe(`password: ${REDACTED}`);
    expect(s.text('Authorization: Bearer abc.def-ghi')).toBe(`Authorization: ${REDACTED}`);
    expect(s.text('GET /cb?access_token=abcd1234&state=x')).toBe(`GET /cb?access_token=${REDACTED}&state=x`);
    expect(s.text('postgres://app:s3cr3t-pw@db:5432/x')).toBe(`postgres://app:${REDACTED}@db:5432/x`);
  });

  it('leaves counts and ordinary prose alone', () => {
    for (const t of ['max_tokens: 1000', 'token=123', '"max_tokens": 4096', '"MAX_TOKENS": "1000"', 'the token bucket refills', 'see https://example.com/a/b', 'a password field']) {
      expect(s.text(t)).toBe(t);
    }
    expect(s.value({ max_tokens: '1000', api_key: 'k3y-abcd', pin: '1234' })).toEqual({ max_tokens: '1000', api_key: REDACTED, pin: REDACTED });
  });

  it('returns the same string when nothing matched', () => {
    const t = 'nothing to see here';
    expect(s.text(t)).toBe(t);
    expect(s.has(t)).toBe(false);
    expect(s.has('password=hunter22')).toBe(true);
  });

  it('redacts every value of a flat array under a credential name in JSON text (regression: all were kept)', () => {
    expect(s.text('{"password": [123456, "hunter22", ""]}')).toBe(`{"password": ["${REDACTED}", "${REDACTED}", ""]}`);
    expect(s.text('{"api_keys": ["k-123456", 42]}')).toBe(`{"api_keys": ["${REDACTED}", 42]}`);
    // The bare "pin" and "pwd" are object fields only (Scrubber.value): as text anchors they would
    // wake the patterns in every "mapping"; a count under a token name stays.
    for (const t of ['pin the version', 'pinned: 1234', 'pin=1234', '{"pin": 1234}', '{"spin": 3}', '"max_tokens": [100]', '{"token": [1000]}', '{"pwd_hint": "x"}']) {
      expect(s.text(t)).toBe(t);
    }
    expect(s.value({ pin: [1234], pwd: 'hunter22' })).toEqual({ pin: [REDACTED], pwd: REDACTED });
  });

  it('an array that never closes costs one pass, not one per space (regression: 200,000 spaces after `"password": [` took 107 s)', () => {
    for (const t of ['"password": [' + ' '.repeat(200_000), '"api_key":[' + '\n'.repeat(200_000), '"password": [1' + ' '.repeat(200_000)]) {
      expect(s.text(t)).toBe(t);
    }
  });

  it('an exact secret is redacted whole even when a shape could take part of it', () => {
    const scrubber = new Scrubber(['canary-7f3a9c']);
    const out = scrubber.text('AIza' + 'x'.repeat(29) + 'canary-7f3a9c');
    expect(out).not.toContain('7f3a9c');
  });
});

describe('Scrubber.value', () => {
  it('redacts credential-named fields and everything inside credential-named objects and arrays', () => {
    const out = s.value({
      user: 'bob',
      apiKey: 'k1',
      nested: { Authorization: 'Basic xyz', list: ['exact-Secret-9f8e7d'] },
      credentials: { user: 'bob', pass: 'x' },
      secrets: ['a', 'b'],
      max_tokens: 100,
      pin: 1234,
      empty_password: '',
    });
    expect(out).toEqual({
      user: 'bob',
      apiKey: REDACTED,
      nested: { Authorization: REDACTED, list: [REDACTED] },
      credentials: { user: REDACTED, pass: REDACTED },
      secrets: [REDACTED, REDACTED],
      max_tokens: 100,
      pin: REDACTED,
      empty_password: '',
    });
  });

  it('redacts numbers inside a password-like object or array, as under the name itself; counts inside a token-like one survive', () => {
    const out = s.value({ pin: [1234], password: { value: 987654 }, db_passwords: [[55555]], secret: { nested: { n: 7 } }, token: [42], max_tokens: [100] });
    expect(out).toEqual({ pin: [REDACTED], password: { value: REDACTED }, db_passwords: [[REDACTED]], secret: { nested: { n: REDACTED } }, token: [42], max_tokens: [100] });
  });

  it('scrubs object keys', () => {
    expect(s.value({ 'ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa': 1 })).toEqual({ [REDACTED]: 1 });
  });

  it('returns the same reference when nothing changed, and never modifies its input', () => {
    const clean = { a: [1, 'two', { three: true }], b: null };
    expect(s.value(clean)).toBe(clean);
    const dirty = { a: { password: 'x1234' }, b: [1] };
    const out = s.value(dirty);
    expect(dirty.a.password).toBe('x1234');
    expect(out.b).toBe(dirty.b);
  });

  it('replaces nesting deeper than MAX_DEPTH (fail closed)', () => {
    let deep: unknown = 'exact-Secret-9f8e7d';
    for (let i = 0; i < MAX_DEPTH + 5; i++) deep = { d: deep };
    expect(JSON.stringify(s.value(deep))).not.toContain('exact-Secret');
  });

  it('scrubs Error messages and stacks', () => {
    const out = s.value({ err: new Error('failed with exact-Secret-9f8e7d') }) as { err: { message: string } };
    expect(out.err.message).toBe(`failed with ${REDACTED}`);
  });
});

describe('isCredentialField', () => {
  it('names credentials, not counts or keys in general', () => {
    for (const n of ['password', 'X-Api-Key', 'client_secret', 'Set-Cookie', 'access_token', 'auth', 'privateKey']) expect(isCredentialField(n)).toBe(true);
    for (const n of ['key', 'token_type', 'tokenizer', 'name', 'monkey']) expect(isCredentialField(n)).toBe(false);
  });
});

describe('property: no planted secret survives', () => {
  const canary = 'cAnArY-0b7e41f2';
  const scrubber = new Scrubber([canary]);
  // An exact secret is found inside anything; a value shape is a token, so it stands between separators.
  const sep = fc.constantFrom(' ', '\n', '"', ',', '(', ')', '=', '/');
  const shape = fc.constantFrom('ghp_' + 'Z'.repeat(36), 'AKIA' + 'Q'.repeat(16), 'xoxb-' + '9'.repeat(12), `Bearer ${'t'.repeat(20)}`);
  const planted = fc.oneof(
    fc.tuple(fc.string(), fc.string()).map(([a, b]) => ({ text: `${a}${canary}${b}`, secret: canary })),
    fc.tuple(fc.string(), sep, shape, sep, fc.string()).map(([a, l, secret, r, b]) => ({ text: `${a}${l}${secret}${r}${b}`, secret })),
  );

  it('in text, whatever surrounds it', () => {
    fc.assert(
      fc.property(planted, ({ text, secret }) => {
        const core = secret.startsWith('Bearer ') ? secret.slice(7) : secret;
        expect(scrubber.text(text)).not.toContain(core);
      }),
      { numRuns: 500 },
    );
  });

  it('anywhere in a JSON value, and in its serialisation', () => {
    const tree = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        fc.string(),
        planted.map((p) => p.text),
        fc.integer(),
        fc.array(tie('node'), { maxLength: 4 }),
        fc.dictionary(fc.oneof(fc.string(), fc.constant(canary)), tie('node'), { maxKeys: 4 }),
      ),
    })).node;
    fc.assert(
      fc.property(tree, (value) => {
        const out = JSON.stringify(scrubber.value(value)) ?? '';
        expect(out).not.toContain(canary);
        expect(scrubber.text(JSON.stringify(value) ?? '')).not.toContain(canary);
      }),
      { numRuns: 300 },
    );
  });
});

describe('a secret in the other spellings JSON and URL writers use (found by a review subagent)', () => {
  const SLASHED = 'Zq8/rT4+kL2/vN6xW0pQ3yH5';
  const ACCENTED = 'päss<w>0rd-xyz-😀';
  const s = new Scrubber([SLASHED, ACCENTED]);

  it('"/" escaped as "\\/" (PHP json_encode)', () => {
    expect(s.text(`{"seen":"${SLASHED.replaceAll('/', '\\/')}"}`)).toBe(`{"seen":"${REDACTED}"}`);
  });

  it('\\uXXXX escapes, lower- and upper-case: every non-ASCII character (Python ensure_ascii), <>& (Go), both', () => {
    const escape = (text: string, which: (c: number) => boolean, upper: boolean) =>
      [...text]
        .map((ch) => (which(ch.charCodeAt(0)) ? [...Array(ch.length).keys()].map((i) => `\\u${ch.charCodeAt(i).toString(16).padStart(4, '0')}`).join('') : ch))
        .join('')
        .replace(/\\u[0-9a-f]{4}/g, (e) => (upper ? `\\u${e.slice(2).toUpperCase()}` : e));
    for (const which of [(c: number) => c > 0x7e, (c: number) => '<>&'.includes(String.fromCharCode(c)), (c: number) => c > 0x7e || '<>&'.includes(String.fromCharCode(c))]) {
      for (const upper of [false, true]) {
        const written = escape(ACCENTED, which, upper);
        expect(written).not.toBe(ACCENTED);
        expect(s.text(`a ${written} b`)).toBe(`a ${REDACTED} b`);
      }
    }
  });

  it('percent-encoded in lower-case hex as well as upper', () => {
    expect(s.text(encodeURIComponent(SLASHED))).toBe(REDACTED);
    expect(s.text(encodeURIComponent(SLASHED).replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()))).toBe(REDACTED);
  });
});

describe('text carried as base64 media (found by a review subagent: an SVG passed unscrubbed)', () => {
  const secret = 'zq-SEKRIT-value-42';
  const scrubber = new Scrubber([secret]);
  const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
  const svg = `<svg xmlns="http://www.w3.org/2000/svg"><text>${secret}</text></svg>`;
  const decoded = (data: string) => Buffer.from(data, 'base64').toString('utf8');

  it('an image or audio block of a textual type (SVG, XML, JSON, text) is decoded and scrubbed; binary media is left alone', () => {
    const out = scrubber.media({ type: 'image', mimeType: 'image/svg+xml', data: b64(svg) }) as { data: string };
    expect(decoded(out.data)).toBe(svg.replace(secret, REDACTED));
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, ...Buffer.from(secret)]).toString('base64');
    const image = { type: 'image', mimeType: 'image/png', data: png };
    expect(scrubber.media(image)).toBe(image);
    // A binary type is left alone even when its bytes happen to be text: it is not judged by its bytes.
    const wav = { type: 'audio', mimeType: 'audio/wav', data: b64(`RIFF ${secret}`) };
    expect(scrubber.media(wav)).toBe(wav);
    const json = scrubber.media({ type: 'audio', mimeType: 'application/ld+json; charset=utf-8', data: b64(`{"k":"${secret}"}`) }) as { data: string };
    expect(decoded(json.data)).not.toContain(secret);
  });

  it('a base64 data: URI of a textual type (a tool icon) is decoded and scrubbed in definitions and values; other data: URIs are text', () => {
    const icon = `data:image/svg+xml;base64,${b64(svg)}`;
    const tool = { name: 't', icons: [{ src: icon, mimeType: 'image/svg+xml' }], inputSchema: { type: 'object' } };
    const scrubbed = scrubber.strings(tool);
    const src = scrubbed.icons[0]!.src;
    expect(src.startsWith('data:image/svg+xml;base64,')).toBe(true);
    expect(decoded(src.slice('data:image/svg+xml;base64,'.length))).toBe(svg.replace(secret, REDACTED));
    expect((scrubber.value({ link: icon }) as { link: string }).link).not.toBe(icon);
    const png = `data:image/png;base64,${Buffer.from([0x89, 0x50, ...Buffer.from(secret)]).toString('base64')}`;
    expect(scrubber.strings({ src: png })).toEqual({ src: png });
    // Unchanged when clean: the same references.
    const clean = { icons: [{ src: `data:image/svg+xml;base64,${b64('<svg/>')}` }] };
    expect(scrubber.strings(clean)).toBe(clean);
    // The scheme in any case.
    const upper = (scrubber.value({ src: `DATA:image/svg+xml;base64,${b64(svg)}` }) as { src: string }).src;
    expect(decoded(upper.slice(upper.indexOf(',') + 1))).toBe(svg.replace(secret, REDACTED));
  });

  it('a media type of a huge run of spaces is no catastrophe for the expression (200,000 spaces took minutes to judge; a test timeout catches it)', () => {
    const spaces = ' '.repeat(200_000);
    const uri = `data:${spaces};base64,QQ==`;
    expect(scrubber.value({ text: uri })).toEqual({ text: uri });
    const block = { type: 'image', mimeType: `${spaces}x`, data: b64('plain') };
    expect(scrubber.media(block)).toBe(block);
  });
});

describe('Scrubber.cutText (text cut before a secret it held was known)', () => {
  const secret = 'Zq9-later-secret-77';

  it('drops the start of a secret that runs across a cut, at every cut; a whole secret is redacted as text() does (regression: a status line kept before a reload showed it)', () => {
    const scrubber = new Scrubber();
    const kept = `a ${secret.slice(0, 9)}… and b ${secret.slice(0, 3)}… and ${secret} whole`;
    expect(scrubber.cutText(kept)).toBe(kept);
    scrubber.addSecrets([secret]);
    expect(scrubber.text(kept)).toContain(secret.slice(0, 9));
    expect(scrubber.cutText(kept)).toBe(`a … and b … and ${REDACTED} whole`);
  });

  it('leaves text with no cut, or no secret start before a cut, as it is (the same string)', () => {
    const scrubber = new Scrubber([secret]);
    for (const text of ['nothing cut here', 'cut here, nothing of it… x', `${secret.slice(1, 8)}…`]) expect(scrubber.cutText(text)).toBe(text);
  });
});
