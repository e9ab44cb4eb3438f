/**
 * The estate tools' behaviour inside the root: bounds (`estate.maxBytes`, `estate.maxResults`),
 * truncation notes, paging, search, and the proposal life cycle (nothing written on propose;
 * apply checks the base; the record carries the proposal).
 */
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RouterOutcome } from '../../src/router/index.js';
import { Scrubber } from '../../src/shared/scrub.js';
import { firstText, makeEstate, type EstateFixture } from './estate-support.js';

let estate: EstateFixture;
beforeEach(() => {
  estate = makeEstate({ maxBytes: 8, maxResults: 3 });
});
afterEach(async () => {
  await estate.close();
});

function ok(outcome: RouterOutcome) {
  if (outcome.outcome !== 'ok') throw new Error(`expected ok, got ${JSON.stringify(outcome)}`);
  return outcome.result;
}
const structured = (outcome: RouterOutcome) => ok(outcome).structuredContent as Record<string, any>;

describe('estate__read_file', () => {
  it('reads at most estate.maxBytes, says it truncated, and gives the offset to read on from', async () => {
    const result = ok(await estate.run('estate__read_file', { path: 'a.txt' }));
    expect(firstText(result)).toBe('alpha li');
    expect((result.content[1] as { text: string }).text).toMatch(/truncated: bytes 0-8 of 23 returned; read on with offset 8/);
    expect(result.structuredContent).toEqual({ path: 'a.txt', offset: 0, bytes: 8, size: 23, encoding: 'utf8', truncated: true, nextOffset: 8 });
    const rest = ok(await estate.run('estate__read_file', { path: 'a.txt', offset: 16, length: 100 }));
    expect(firstText(rest)).toBe('d line\n');
    expect(rest.structuredContent).toMatchObject({ truncated: false, bytes: 7 });
    expect(rest.content).toHaveLength(1);
  });

  it('never cuts a UTF-8 character in half, and returns a file with NUL bytes as base64', async () => {
    writeFileSync(join(estate.root, 'u.txt'), 'abcdeé€x');
    const first = ok(await estate.run('estate__read_file', { path: 'u.txt' }));
    expect(firstText(first)).toBe('abcdeé'); // 7 bytes: the 3-byte € would not fit in 8
    expect(first.structuredContent).toMatchObject({ bytes: 7, nextOffset: 7 });
    writeFileSync(join(estate.root, 'bin'), Buffer.from([0, 1, 2, 255]));
    expect(structured(await estate.run('estate__read_file', { path: 'bin' }))).toMatchObject({ encoding: 'base64' });
    expect(firstText(ok(await estate.run('estate__read_file', { path: 'bin' })))).toBe('AAEC/w==');
  });

  it('a piece shorter than the character it starts: given as it is, so paging moves on (it answered 0 bytes and nextOffset = offset)', async () => {
    writeFileSync(join(estate.root, 'w.txt'), '€uro');
    const first = ok(await estate.run('estate__read_file', { path: 'w.txt', length: 1 }));
    expect(first.structuredContent).toMatchObject({ bytes: 1, nextOffset: 1 });
    expect(firstText(first)).toBe('\ufffd');
    let offset = 0;
    let reads = 0;
    for (; offset < 6 && reads < 10; reads++) offset = (structured(await estate.run('estate__read_file', { path: 'w.txt', offset, length: 2 })).nextOffset as number | undefined) ?? 6;
    expect(reads).toBeLessThan(10);
  });

  it('a folder, a missing file and a bad offset are the tool’s own failures', async () => {
    expect(await estate.run('estate__read_file', { path: 'sub' })).toMatchObject({ outcome: 'error', code: 'handler_error', message: 'the estate path names a folder, not a file' });
    expect(await estate.run('estate__read_file', { path: 'nope.txt' })).toMatchObject({ outcome: 'error', message: 'no such file or folder in the estate' });
    expect(await estate.run('estate__read_file', { path: 'a.txt', offset: -1 })).toMatchObject({ outcome: 'error', code: 'invalid_arguments' });
  });
});

describe('estate__list_dir', () => {
  it('lists sorted entries with types, at most estate.maxResults per page', async () => {
    const first = structured(await estate.run('estate__list_dir', {}));
    expect(first.entries).toEqual([
      { name: '%2e%2e%2fcanary.txt', type: 'file', size: 29 },
      { name: 'a.txt', type: 'file', size: 23 },
      { name: 'abs-link', type: 'symlink' },
    ]);
    expect(first).toMatchObject({ path: '.', total: 11, truncated: true, nextOffset: 3 });
    const names: string[] = [];
    let offset: number | undefined = 0;
    while (offset !== undefined) {
      const page = structured(await estate.run('estate__list_dir', { path: '.', offset }));
      names.push(...page.entries.map((e: { name: string }) => e.name));
      offset = page.nextOffset;
    }
    expect(names).toEqual(['%2e%2e%2fcanary.txt', 'a.txt', 'abs-link', 'dangling', 'fifo', 'link-canary', 'link-in', 'link-out', 'link-sub', 'loop', 'sub']);
    const fifo = structured(await estate.run('estate__list_dir', { offset: 4 })).entries[0];
    expect(fifo).toEqual({ name: 'fifo', type: 'other' });
  });
});

describe('estate__search', () => {
  it('scans only the first estate.maxBytes of each file', async () => {
    // maxBytes is 8 here: "alpha li" is all that is scanned of a.txt.
    expect(structured(await estate.run('estate__search', { query: 'alpha' })).hits).toHaveLength(1);
    expect(structured(await estate.run('estate__search', { query: 'second' })).hits).toEqual([]);
  });

  it('a file cut at estate.maxBytes was reported as truncated: false; now truncated: true with filesCut', async () => {
    // maxBytes is 8: a.txt (23 bytes) is cut, sub/b.txt (6 bytes) is not.
    expect(structured(await estate.run('estate__search', { query: 'bravo', path: 'sub' }))).toMatchObject({ truncated: false, filesCut: 0, hits: [{ path: 'sub/b.txt' }] });
    const cut = structured(await estate.run('estate__search', { query: 'alpha', path: 'a.txt' }));
    expect(cut).toMatchObject({ truncated: true, filesCut: 1, filesScanned: 1 });
    expect(cut.hits).toHaveLength(1);
    expect(structured(await estate.run('estate__search', { query: 'second', path: 'a.txt' }))).toMatchObject({ hits: [], truncated: true, filesCut: 1 });
  });

  it('finds literal text case-insensitively, without following symlinks, bounded by estate.maxResults', async () => {
    await estate.close();
    estate = makeEstate({ maxBytes: 1024, maxResults: 3 });
    const found = structured(await estate.run('estate__search', { query: 'LINE' }));
    expect(found.hits).toEqual([
      { path: 'a.txt', line: 1, text: 'alpha line' },
      { path: 'a.txt', line: 2, text: 'second line' },
    ]);
    expect(found.truncated).toBe(false);
    expect(found.filesCut).toBe(0);
    expect(structured(await estate.run('estate__search', { query: 'LINE', caseSensitive: true })).hits).toEqual([]);
    // bravo is in sub/b.txt only; link-sub (a symlink to sub) is not walked.
    expect(structured(await estate.run('estate__search', { query: 'bravo' })).hits).toEqual([{ path: 'sub/b.txt', line: 1, text: 'bravo' }]);
    writeFileSync(join(estate.root, 'many.txt'), 'x\nx\nx\nx\nx\n');
    const many = structured(await estate.run('estate__search', { query: 'x', path: 'many.txt' }));
    expect(many.hits).toHaveLength(3);
    expect(many.truncated).toBe(true);
  });
});

describe("estate__search: a long line's excerpt is cut from the line scrubbed whole", () => {
  /** A secret the scrubber knows exactly (an upstream's env value, say), written into an estate file. */
  const secret = 'Zt9-estate-exact-secret-value';
  const scrubber = new Scrubber([secret]);
  /** The hit's text, and the whole result as the scrub stage passes it on. */
  async function hit(line: string): Promise<{ text: string; shown: string }> {
    await estate.close();
    estate = makeEstate({ maxBytes: 4096, maxResults: 3, scrubber });
    writeFileSync(join(estate.root, 'long.txt'), `${line}\n`);
    const result = ok(await estate.run('estate__search', { query: 'needle', path: 'long.txt' }));
    const hits = (result.structuredContent as { hits: { text: string }[] }).hits;
    expect(hits).toHaveLength(1);
    return { text: hits[0]!.text, shown: JSON.stringify(scrubber.value(result)) };
  }

  it('a secret across the end of the excerpt: none of its first characters are shown', async () => {
    // The match at 100: the excerpt is characters 60 to 260; the secret starts 8 before its end.
    // Scrubbed first, the line is shorter there: the excerpt ends inside the secret's [REDACTED].
    const { text, shown } = await hit(`${'y'.repeat(100)}NEEDLE${'z'.repeat(146)}${secret} and more ${'w'.repeat(50)}`);
    expect(text).toContain('NEEDLE');
    expect(shown).not.toContain(secret.slice(0, 6));
    expect(text).toContain('EDACTE');
  });

  it('a secret across the start of the excerpt: none of its last characters are shown', async () => {
    // The match at 200: the excerpt starts at 160; the secret ends 8 after that. Scrubbed first,
    // the match is at 181 and the excerpt starts inside the secret's [REDACTED].
    const { text, shown } = await hit(`${'y'.repeat(139)}${secret}${'z'.repeat(32)}NEEDLE${'w'.repeat(300)}`);
    expect(text).toContain('NEEDLE');
    expect(shown).not.toContain(secret.slice(-6));
    expect(text).toContain('EDACTE');
  });
});

describe('estate__search over masked text', () => {
  it('a hit after a PEM key (masked over five lines) keeps its own line number', async () => {
    await estate.close();
    estate = makeEstate({ maxBytes: 4096 });
    writeFileSync(join(estate.root, 'key.txt'), 'zero\n-----BEGIN PRIVATE KEY-----\nMIIEow\nAAKCAQ\n-----END PRIVATE KEY-----\nthe needle\n');
    const found = structured(await estate.run('estate__search', { query: 'needle', path: 'key.txt' }));
    expect(found.hits).toEqual([{ path: 'key.txt', line: 6, text: 'the needle' }]);
    expect(structured(await estate.run('estate__search', { query: 'MIIE', path: 'key.txt' })).hits).toEqual([]);
  });
});

describe('estate__stat', () => {
  it('describes files and folders', async () => {
    expect(structured(await estate.run('estate__stat', { path: 'sub/b.txt' }))).toMatchObject({ path: 'sub/b.txt', type: 'file', size: 6 });
    expect(structured(await estate.run('estate__stat', { path: 'sub/' }))).toMatchObject({ path: 'sub', type: 'dir' });
  });
});

describe('estate proposals', () => {
  it('propose writes nothing to the estate; apply writes it; a second apply is refused', async () => {
    const proposed = structured(await estate.run('estate__propose_change', { path: 'sub/new.txt', content: 'fresh\n', rationale: 'add a file' }));
    expect(proposed).toMatchObject({ path: 'sub/new.txt', kind: 'content', status: 'pending' });
    expect(proposed).not.toHaveProperty('baseSha256');
    expect(estate.lastNotes().proposal).toEqual({ id: proposed.id, action: 'proposed', path: 'sub/new.txt' });
    expect(existsSync(join(estate.root, 'sub/new.txt'))).toBe(false);

    const listed = structured(await estate.run('estate__list_proposals', { status: 'pending' })).proposals;
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ id: proposed.id, path: 'sub/new.txt', rationale: 'add a file', principal: 'local', bodyBytes: 6 });
    expect(listed[0]).not.toHaveProperty('body');
    expect(listed[0]).not.toHaveProperty('sessionId');
    expect(listed[0]).not.toHaveProperty('baseSha256');

    const applied = structured(await estate.run('estate__apply_proposal', { id: proposed.id }));
    expect(applied).toMatchObject({ id: proposed.id, status: 'applied', bytes: 6 });
    expect(applied).not.toHaveProperty('sha256');
    expect(estate.lastNotes().proposal).toEqual({ id: proposed.id, action: 'applied', path: 'sub/new.txt' });
    expect(readFileSync(join(estate.root, 'sub/new.txt'), 'utf8')).toBe('fresh\n');
    expect(await estate.run('estate__apply_proposal', { id: proposed.id })).toMatchObject({ outcome: 'error', message: expect.stringMatching(/already applied/) });
    expect(structured(await estate.run('estate__list_proposals', { status: 'pending' })).proposals).toEqual([]);
  });

  it('a unified diff is checked when proposed and applied to the file; a file changed since is refused and left alone', async () => {
    const diff = ['--- a/a.txt', '+++ b/a.txt', '@@ -1,2 +1,2 @@', ' alpha line', '-second line', '+second line, edited', ''].join('\n');
    const proposed = structured(await estate.run('estate__propose_change', { path: 'a.txt', unifiedDiff: diff, rationale: 'edit' }));
    expect(proposed.kind).toBe('diff');
    const stale = structured(await estate.run('estate__propose_change', { path: 'a.txt', unifiedDiff: diff, rationale: 'edit again' }));
    ok(await estate.run('estate__apply_proposal', { id: proposed.id }));
    expect(readFileSync(join(estate.root, 'a.txt'), 'utf8')).toBe('alpha line\nsecond line, edited\n');
    const refused = await estate.run('estate__apply_proposal', { id: stale.id });
    expect(refused).toMatchObject({ outcome: 'error', message: expect.stringMatching(/the file changed since the proposal was made/) });
    expect(readFileSync(join(estate.root, 'a.txt'), 'utf8')).toBe('alpha line\nsecond line, edited\n');
    const bad = await estate.run('estate__propose_change', { path: 'a.txt', unifiedDiff: '@@ -1,1 +1,1 @@\n-not there\n+x\n', rationale: 'r' });
    expect(bad).toMatchObject({ outcome: 'error', message: expect.stringMatching(/hunk 1 .* does not match/) });
  });

  it('a diff never confirms a guess at a secret: one matching a line that holds one is refused as one that does not match; no digest of a file is shown', async () => {
    await estate.close();
    const token = 'estate-unit-exact-token-5b21';
    estate = makeEstate({ scrubber: new Scrubber([token]) });
    writeFileSync(join(estate.root, '.env'), `NAME=demo\nAPI_TOKEN=${token}\nDB_PASSWORD=hunterhunter\nPORT=8080\n`);
    const diffAt = (line: number, old: string, next: string) => ['--- a/.env', '+++ b/.env', `@@ -${line},1 +${line},1 @@`, `-${old}`, `+${next}`, ''].join('\n');
    const refusal = (line: number) => ({ outcome: 'error', message: `hunk 1 (at line ${line}) does not match the file` });
    for (const [line, right, wrong] of [
      [2, `API_TOKEN=${token}`, 'API_TOKEN=estate-unit-exact-token-0000'],
      [3, 'DB_PASSWORD=hunterhunter', 'DB_PASSWORD=hunter2'],
    ] as const) {
      // The right guess and a wrong one answer alike.
      expect(await estate.run('estate__propose_change', { path: '.env', unifiedDiff: diffAt(line, right, 'X=1'), rationale: 'r' }), right).toMatchObject(refusal(line));
      expect(await estate.run('estate__propose_change', { path: '.env', unifiedDiff: diffAt(line, wrong, 'X=1'), rationale: 'r' }), wrong).toMatchObject(refusal(line));
    }
    // A line with no secret in it is changed as ever, the others kept as they are.
    const proposed = structured(await estate.run('estate__propose_change', { path: '.env', unifiedDiff: diffAt(4, 'PORT=8080', 'PORT=9090'), rationale: 'port' }));
    expect(proposed).not.toHaveProperty('baseSha256');
    expect(structured(await estate.run('estate__list_proposals', {})).proposals[0]).not.toHaveProperty('baseSha256');
    const applied = structured(await estate.run('estate__apply_proposal', { id: proposed.id }));
    expect(applied).not.toHaveProperty('sha256');
    expect(readFileSync(join(estate.root, '.env'), 'utf8')).toBe(`NAME=demo\nAPI_TOKEN=${token}\nDB_PASSWORD=hunterhunter\nPORT=9090\n`);
  });

  it('a diff may not insert a line between two lines of one secret (an END line inside a PEM key unmasked the rest of it)', async () => {
    await estate.close();
    estate = makeEstate({ scrubber: new Scrubber() });
    const key = '-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nsecondKeyLineZZ\nthirdKeyLineQQ\n-----END RSA PRIVATE KEY-----';
    writeFileSync(join(estate.root, 'k.pem'), `one\n${key}\nlast\n`);
    const insertAfter = (line: number) => [`@@ -${line},0 +${line + 1},1 @@`, '+-----END RSA PRIVATE KEY-----', ''].join('\n');
    for (const line of [2, 3, 4, 5]) {
      expect(await estate.run('estate__propose_change', { path: 'k.pem', unifiedDiff: insertAfter(line), rationale: 'r' }), `after line ${line}`).toMatchObject({
        outcome: 'error',
        message: `hunk 1 (at line ${line}) does not match the file`,
      });
    }
    // Before the key and after it, a line goes in as ever; the key is still masked whole.
    for (const line of [6, 1]) {
      const { id } = structured(await estate.run('estate__propose_change', { path: 'k.pem', unifiedDiff: insertAfter(line), rationale: 'r' }));
      ok(await estate.run('estate__apply_proposal', { id }));
    }
    const text = firstText(ok(await estate.run('estate__read_file', { path: 'k.pem', length: 4096 })));
    expect(text).not.toMatch(/KeyLine|MIIE/);
  });

  it('a hunk that matches a line holding a secret is looked for further, as a wrong guess is: the nearest-match search told a right guess by refusing it', async () => {
    await estate.close();
    estate = makeEstate({ scrubber: new Scrubber() });
    // The password's value is on a line of its own (held); the same text under "user" is readable.
    const diff = ['@@ -5,1 +5,1 @@', '-  "admin1234",', '+  "someone",', ''].join('\n');
    const answers: unknown[] = [];
    for (const password of ['admin1234', 'other5678']) {
      writeFileSync(join(estate.root, 'c.json'), `{\n"user":\n  "admin1234",\n"password":\n  "${password}",\n}\n`);
      answers.push((await estate.run('estate__propose_change', { path: 'c.json', unifiedDiff: diff, rationale: 'r' })).outcome);
    }
    // Before: refused for the right guess (the held line 5 nearest), accepted for a wrong one (line 3).
    expect(answers).toEqual(['ok', 'ok']);
  });

  it('a diff may not change what makes a secret one (the field name on the line before its value; a line put before that name), so an applied change never leaves it unmasked', async () => {
    await estate.close();
    estate = makeEstate({ scrubber: new Scrubber() });
    writeFileSync(join(estate.root, 'c.json'), '{\n"password":\n  "hunter2hunter2"\n}\n');
    for (const diff of [
      // The name renamed: the value on the next line is no field's.
      ['@@ -2,1 +2,1 @@', '-"password":', '+"note":', ''],
      // A line put before it whose value is the name ("token=" then `"password"`): the value after it is no field's.
      ['@@ -1,0 +2,1 @@', '+token=', ''],
    ].map((d) => d.join('\n'))) {
      const answer = await estate.run('estate__propose_change', { path: 'c.json', unifiedDiff: diff, rationale: 'r' });
      expect(answer, diff).toMatchObject({ outcome: 'error', message: expect.stringMatching(/secret/) });
    }
    expect(firstText(ok(await estate.run('estate__read_file', { path: 'c.json' })))).not.toContain('hunter2');
  });

  it("whole new content never confirms a guess at a secret either: the approval prompt's line counts are the same for a right guess and a wrong one", async () => {
    await estate.close();
    estate = makeEstate({ scrubber: new Scrubber() });
    writeFileSync(join(estate.root, '.env'), 'NAME=demo\nDB_PASSWORD=hunterhunter\nPORT=8080\n');
    // The prompt goes to the client that asked for the apply (elicitation, or an input request).
    const prompt = async (content: string) => {
      const { id } = structured(await estate.run('estate__propose_change', { path: '.env', content, rationale: 'r' }));
      const session = { sessionId: 's-local', principal: 'local', unit: 's-local', isLive: () => true };
      return (await estate.router.resolve('estate__apply_proposal')!.approvalDetail!({ id }, session))[0];
    };
    const right = await prompt('NAME=demo\nDB_PASSWORD=hunterhunter\nPORT=8080\n');
    const wrong = await prompt('NAME=demo\nDB_PASSWORD=hunterhuntex\nPORT=8080\n');
    // The same length, the same counts: before, +0/-0 lines for the right guess, +1/-1 for the wrong one.
    expect(right).toContain('+1/-1 lines');
    expect(wrong).toBe(right);
    // A change elsewhere is still counted as it is.
    expect(await prompt('NAME=demo\nDB_PASSWORD=hunterhunter\nPORT=9090\n')).toContain('+2/-2 lines');
  });

  it('exactly one of content and unifiedDiff, and a rationale, or invalid_arguments', async () => {
    for (const args of [{ path: 'x', rationale: 'r' }, { path: 'x', content: 'a', unifiedDiff: '@@', rationale: 'r' }, { path: 'x', content: 'a' }]) {
      expect(await estate.run('estate__propose_change', args)).toMatchObject({ outcome: 'error', code: 'invalid_arguments' });
    }
  });

  it('a proposal through a symlink that stays inside writes the real file', async () => {
    const proposed = structured(await estate.run('estate__propose_change', { path: 'link-in', content: 'replaced\n', rationale: 'r' }));
    expect(proposed.path).toBe('a.txt');
    ok(await estate.run('estate__apply_proposal', { id: proposed.id }));
    expect(readFileSync(join(estate.root, 'a.txt'), 'utf8')).toBe('replaced\n');
  });
});
