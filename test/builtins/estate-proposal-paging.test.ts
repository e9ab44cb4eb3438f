/**
 * `estate__list_proposals` pages: it answered at most `estate.maxResults` proposals and no way
 * to the rest; now a `nextCursor` (absent on the last page) passed back as `cursor` reads the
 * next page, and every page keeps the list's ownership (a principal's own; an operator's: all).
 * Over the fixture's real SQLite store.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RouterOutcome } from '../../src/router/index.js';
import type { Proposal } from '../../src/store/index.js';
import { makeEstate, type EstateFixture } from './estate-support.js';

const T0 = 1_700_000_000_000;
const at = (n: number) => new Date(T0 + n).toISOString();

let estate: EstateFixture;
beforeEach(() => {
  estate = makeEstate({ maxResults: 2, operators: ['ops'] });
});
afterEach(async () => {
  await estate.close();
});

function proposal(id: string, principal: string, createdAt: string, status: Proposal['status'] = 'pending'): Proposal {
  return { id, path: 'a.txt', kind: 'content', body: 'x', rationale: 'r', baseSha256: null, status, principal, sessionId: `s-${principal}`, createdAt };
}

type Page = { proposals: Array<{ id: string; principal: string }>; nextCursor?: string };
const pageOf = (outcome: RouterOutcome): Page => {
  if (outcome.outcome !== 'ok') throw new Error(`expected ok, got ${JSON.stringify(outcome)}`);
  return outcome.result.structuredContent as Page;
};

/** Every page of the list for `principal`, as ids per page. */
async function pages(principal: string, args: Record<string, unknown> = {}): Promise<string[][]> {
  const out: string[][] = [];
  let page = pageOf(await estate.run('estate__list_proposals', args, principal));
  for (;;) {
    out.push(page.proposals.map((p) => p.id));
    if (page.nextCursor === undefined) return out;
    page = pageOf(await estate.run('estate__list_proposals', { ...args, cursor: page.nextCursor }, principal));
  }
}

describe('estate__list_proposals pages', () => {
  beforeEach(async () => {
    // Alice: three at one time (added out of id order), two older, one of them applied. Bob: two.
    for (const id of ['a3', 'a1', 'a2']) await estate.store.addProposal(proposal(id, 'alice', at(10)));
    await estate.store.addProposal(proposal('a0', 'alice', at(5)));
    await estate.store.addProposal(proposal('b1', 'bob', at(7)));
    await estate.store.addProposal(proposal('b0', 'bob', at(1)));
    await estate.store.addProposal(proposal('a-old', 'alice', at(0)));
    await estate.store.markProposalApplied('a0', at(11), 'alice');
  });

  it('answered the newest maxResults and no cursor: now the pages hold every proposal of the caller once, newest first (one time: by id)', async () => {
    expect(await pages('alice')).toEqual([['a3', 'a2'], ['a1', 'a0'], ['a-old']]);
    expect(await pages('alice', { status: 'pending' })).toEqual([['a3', 'a2'], ['a1', 'a-old']]);
    expect(await pages('bob')).toEqual([['b1', 'b0']]);
    expect(await pages('ops')).toEqual([['a3', 'a2'], ['a1', 'b1'], ['a0', 'b0'], ['a-old']]);
  });

  it("a cursor from another principal's list shows only the caller's own proposals after it", async () => {
    const alicePage = pageOf(await estate.run('estate__list_proposals', {}, 'alice'));
    expect(alicePage.nextCursor).toEqual(expect.any(String));
    const bob = pageOf(await estate.run('estate__list_proposals', { cursor: alicePage.nextCursor }, 'bob'));
    expect(bob).toEqual({ proposals: [expect.objectContaining({ id: 'b1', principal: 'bob' }), expect.objectContaining({ id: 'b0', principal: 'bob' })] });
  });

  it('a cursor it did not give is invalid_arguments', async () => {
    for (const cursor of ['nope!', '', Buffer.from('[1,2]').toString('base64url')]) {
      expect(await estate.run('estate__list_proposals', { cursor }, 'alice')).toMatchObject({ outcome: 'error', code: 'invalid_arguments', message: expect.stringContaining('not a cursor this list gave') });
    }
  });
});
