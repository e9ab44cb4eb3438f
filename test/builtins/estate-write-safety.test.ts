/**
 * Issue 12 item 2: the estate never writes outside its root, and never shows the root's path.
 * A folder swapped for a symlink between `estate__apply_proposal`'s checks and its write (the
 * `beforeWrite` seam runs exactly there) must not redirect the write or its temp file; no error
 * message, however the file system fails, carries the root's absolute path.
 */
import { readdirSync, readFileSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RouterOutcome } from '../../src/router/index.js';
import { makeEstate, type EstateFixture } from './estate-support.js';

let estate: EstateFixture | undefined;
afterEach(async () => {
  await estate?.close();
  estate = undefined;
});

/** Every file name below `dir`, recursively, without following symlinks. */
function namesBelow(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true }).map((d) => join(d.parentPath, d.name));
}

/** The id of a stored proposal. */
function idOf(outcome: RouterOutcome): string {
  if (outcome.outcome !== 'ok') throw new Error(`expected ok, got ${JSON.stringify(outcome)}`);
  return (outcome.result.structuredContent as { id: string }).id;
}

const shown = (outcome: RouterOutcome) => JSON.stringify(outcome.outcome === 'ok' ? outcome.result : { ...outcome, error: String((outcome as { error?: unknown }).error) });

describe('estate writes stay inside the root', () => {
  it('a folder swapped for a symlink out between check and write wrote the file and its temp file outside: now it is refused and nothing lands outside', async () => {
    let swapped = false;
    const fixture = (estate = makeEstate({
      beforeWrite: () => {
        // Another writer in the estate: sub/ moves away and a symlink to the outside takes its name.
        renameSync(join(fixture.root, 'sub'), join(fixture.root, 'sub-moved'));
        symlinkSync(fixture.outside, join(fixture.root, 'sub'));
        swapped = true;
      },
    }));
    const before = fixture.outsideSnapshot();
    const proposed = await fixture.run('estate__propose_change', { path: 'sub/b.txt', content: 'written by the proposal\n', rationale: 'race' });
    const id = idOf(proposed);
    const applied = await fixture.run('estate__apply_proposal', { id });
    expect(swapped).toBe(true);
    expect(fixture.outsideSnapshot()).toBe(before);
    expect(readdirSync(fixture.outside)).toEqual(['canary.txt']);
    // The folder moved since the check: refused, and nothing written anywhere.
    expect(applied).toMatchObject({ outcome: 'error', error: { code: 'estate_scope_escape' } });
    expect(readFileSync(join(fixture.root, 'sub-moved', 'b.txt'), 'utf8')).toBe('bravo\n');
    expect(namesBelow(fixture.root).filter((n) => n.includes('estate-tmp'))).toEqual([]);
    // Still pending: a refused write does not mark the proposal applied.
    const pending = await fixture.run('estate__list_proposals', { status: 'pending' });
    expect(JSON.stringify(pending)).toContain(id);
  });

  it('the final file swapped for a symlink to the outside is replaced as a name, never written through', async () => {
    const fixture = (estate = makeEstate({
      beforeWrite: () => {
        rmSync(join(fixture.root, 'a.txt'));
        symlinkSync(join(fixture.outside, 'canary.txt'), join(fixture.root, 'a.txt'));
      },
    }));
    const before = fixture.outsideSnapshot();
    const proposed = await fixture.run('estate__propose_change', { path: 'a.txt', content: 'new\n', rationale: 'race' });
    const id = idOf(proposed);
    await fixture.run('estate__apply_proposal', { id });
    expect(fixture.outsideSnapshot()).toBe(before);
    expect(namesBelow(fixture.root).filter((n) => n.includes('estate-tmp'))).toEqual([]);
  });
  it('applying followed a symlink that appeared on the proposal\'s path since it was proposed: now refused, nothing written', async () => {
    const fixture = (estate = makeEstate());
    const id = idOf(await fixture.run('estate__propose_change', { path: 'sub/b.txt', content: 'through a link\n', rationale: 'r' }));
    renameSync(join(fixture.root, 'sub'), join(fixture.root, 'sub-moved'));
    symlinkSync('sub-moved', join(fixture.root, 'sub'));
    const applied = await fixture.run('estate__apply_proposal', { id });
    expect(applied).toMatchObject({ outcome: 'error', error: { code: 'estate_scope_escape' } });
    expect(readFileSync(join(fixture.root, 'sub-moved', 'b.txt'), 'utf8')).toBe('bravo\n');
    expect(namesBelow(fixture.root).filter((n) => n.includes('estate-tmp'))).toEqual([]);
  });
});

describe("estate errors never show the root's absolute path", () => {
  it('a 5,000-character path answered ENAMETOOLONG with the root in it: now a one-line error without it', async () => {
    const fixture = (estate = makeEstate());
    const long = 'a'.repeat(5000);
    for (const path of [long, `sub/${'x'.repeat(300)}`, `sub/${'d/'.repeat(2500)}f`]) {
      const outcomes = [
        await fixture.run('estate__read_file', { path }),
        await fixture.run('estate__stat', { path }),
        await fixture.run('estate__list_dir', { path }),
        await fixture.run('estate__search', { query: 'x', path }),
        await fixture.run('estate__propose_change', { path, content: 'x', rationale: 'r' }),
      ];
      for (const outcome of outcomes) {
        expect(outcome.outcome).toBe('error');
        const text = shown(outcome);
        expect(text).not.toContain(fixture.base);
        expect(text).not.toContain('/proc/');
        expect(text).not.toContain(long);
        expect((outcome as { message: string }).message).not.toMatch(/\n/);
      }
    }
  });

  it('a root removed after start named its absolute path in the answer: now it does not', async () => {
    const fixture = (estate = makeEstate());
    rmSync(fixture.root, { recursive: true, force: true });
    for (const [tool, args] of [
      ['estate__read_file', { path: 'a.txt' }],
      ['estate__list_dir', {}],
      ['estate__propose_change', { path: 'a.txt', content: 'x', rationale: 'r' }],
    ] as const) {
      const outcome = await fixture.run(tool, args);
      expect(outcome.outcome).toBe('error');
      expect(shown(outcome)).not.toContain(fixture.base);
    }
  });
});
