/**
 * Property: whatever path an estate tool is given (dot segments, absolute paths, symlinks out,
 * encoded separators, NUL bytes, backslashes, arbitrary strings), nothing outside `estate.root`
 * is ever read or written. A canary file sits beside the root; no answer may carry its text or
 * its hash, and the folder outside stays byte-for-byte the same. Every refusal of a path that
 * names a way out is `estate_scope_escape`.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BrokerError } from '../../src/shared/errors.js';
import type { RouterOutcome } from '../../src/router/index.js';
import { makeEstate, type EstateFixture } from './estate-support.js';

let estate: EstateFixture;
beforeAll(() => {
  estate = makeEstate();
});
afterAll(async () => {
  await estate.close();
});

const SEGMENTS = [
  '..', '.', '', 'a.txt', 'sub', 'deeper', 'b.txt', 'c.txt', 'outside', 'root', 'canary.txt',
  'link-out', 'link-canary', 'up', 'abs-link', 'dangling', 'loop', 'link-in', 'link-sub', 'fifo',
  '%2e%2e', '%2e%2e%2f', '%2e%2e%2fcanary.txt', '..%2f', '%2F', '%252e%252e', '%c0%ae%c0%ae', '..\\..', '\\', 'C:', '~', '\0', 'a.txt\0', '…',
];

/** A path made of risky segments, sometimes made absolute, sometimes with odd separators. */
const riskyPath = fc
  .tuple(
    fc.array(fc.constantFrom(...SEGMENTS), { minLength: 0, maxLength: 6 }),
    fc.constantFrom('/', '//', '/./', '\\'),
    fc.constantFrom('', '/', '//', 'ABS', 'C:\\', '\\\\host\\share\\'),
  )
  .map(([segments, separator, lead]) => {
    const body = segments.join(separator);
    return lead === 'ABS' ? `${estate.outside}/${body}` : `${lead}${body}`;
  });

const anyPath = fc.oneof({ weight: 4, arbitrary: riskyPath }, { weight: 1, arbitrary: fc.string({ maxLength: 40 }) }, { weight: 1, arbitrary: fc.constant(`${'../'.repeat(8)}etc/passwd`) });

/** Whether a path must be refused by its spelling alone. */
function lexicallyForbidden(path: string): boolean {
  return path.includes('\0') || path.includes('\\') || path.startsWith('/') || /^[A-Za-z]:/.test(path) || path.split('/').includes('..');
}

function assertNothingLeaked(outcome: RouterOutcome): void {
  const shown = JSON.stringify(outcome.outcome === 'ok' ? outcome.result : outcome);
  expect(shown).not.toContain(estate.canary);
  expect(shown).not.toContain(estate.canarySha256);
  if (outcome.outcome === 'error' && outcome.error instanceof BrokerError) expect(outcome.error.code).toBe('estate_scope_escape');
  if (outcome.outcome === 'ok') {
    const structured = outcome.result.structuredContent as { path?: string } | undefined;
    if (structured?.path !== undefined) expect(structured.path === '..' || structured.path.startsWith('../') || structured.path.startsWith('/')).toBe(false);
  }
}

function isEscape(outcome: RouterOutcome): boolean {
  return outcome.outcome === 'error' && outcome.error instanceof BrokerError && outcome.error.code === 'estate_scope_escape';
}

describe('estate scope (property)', () => {
  it('no generated path reads, lists, finds or writes anything outside the root', async () => {
    const before = estate.outsideSnapshot();
    await fc.assert(
      fc.asyncProperty(anyPath, async (path) => {
        const outcomes = await Promise.all([
          estate.run('estate__read_file', { path }),
          estate.run('estate__stat', { path }),
          estate.run('estate__list_dir', { path }),
          estate.run('estate__search', { query: estate.canary.slice(0, 12), path }),
          estate.run('estate__search', { query: 'CANARY', path }),
        ]);
        for (const o of outcomes) assertNothingLeaked(o);
        // The search for the canary's text never finds it anywhere.
        for (const o of outcomes.slice(3)) if (o.outcome === 'ok') expect((o.result.structuredContent as { hits: unknown[] }).hits).toEqual([]);
        if (lexicallyForbidden(path)) for (const o of outcomes) expect(isEscape(o)).toBe(true);

        const proposed = await estate.run('estate__propose_change', { path, content: 'overwritten by a proposal\n', rationale: 'property test' });
        assertNothingLeaked(proposed);
        if (lexicallyForbidden(path)) expect(isEscape(proposed)).toBe(true);
        if (proposed.outcome === 'ok') {
          const id = (proposed.result.structuredContent as { id: string }).id;
          assertNothingLeaked(await estate.run('estate__apply_proposal', { id }));
        }
        expect(estate.outsideSnapshot()).toBe(before);
      }),
      { numRuns: 250 },
    );
  });

});

describe('estate scope (examples)', () => {
  // A fresh estate: the property above applies proposals inside the root.
  beforeAll(async () => {
    await estate.close();
    estate = makeEstate();
  });

  it.each([
    ['../outside/canary.txt'],
    ['link-canary'],
    ['sub/up'],
    ['abs-link'],
    ['link-out/canary.txt'],
    ['dangling'],
    ['loop'],
    ['fifo'],
    ['/etc/passwd'],
    ['sub/../../outside/canary.txt'],
    ['a.txt\0'],
    ['..\\outside\\canary.txt'],
  ])('%j is refused as estate_scope_escape by every read tool', async (path) => {
    for (const tool of ['estate__read_file', 'estate__stat']) {
      const outcome = await estate.run(tool, { path });
      expect(isEscape(outcome), `${tool} ${JSON.stringify(path)}`).toBe(true);
    }
  });

  it('encoded separators are names, not paths: "%2e%2e%2fcanary.txt" reads the file of that name inside the root', async () => {
    const outcome = await estate.run('estate__read_file', { path: '%2e%2e%2fcanary.txt' });
    expect(outcome.outcome).toBe('ok');
    expect(JSON.stringify(outcome)).toContain('literal name inside the root');
  });

  it('symlinks that stay inside the root are followed', async () => {
    const viaLink = await estate.run('estate__read_file', { path: 'link-in' });
    expect(viaLink).toMatchObject({ outcome: 'ok', result: { structuredContent: { path: 'a.txt' } } });
    const viaDir = await estate.run('estate__read_file', { path: 'link-sub/b.txt' });
    expect(viaDir).toMatchObject({ outcome: 'ok', result: { structuredContent: { path: 'sub/b.txt' } } });
  });
});
