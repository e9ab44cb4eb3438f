/**
 * Issue 12 item 3: estate proposals belong to the principal that proposed them. Another
 * principal neither lists nor applies them, and a foreign id answers exactly as an unknown one
 * (no oracle); `local` and operators act on all. The approval prompt of `estate__apply_proposal`
 * shows the path and a summary of the change, not only an id.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CallerSession } from '../../src/broker/types.js';
import type { RouterOutcome } from '../../src/router/index.js';
import { makeEstate, type EstateFixture } from './estate-support.js';

let estate: EstateFixture;
beforeEach(() => {
  estate = makeEstate({ operators: ['ops'] });
});
afterEach(async () => {
  await estate.close();
});

const structured = (outcome: RouterOutcome) => {
  if (outcome.outcome !== 'ok') throw new Error(`expected ok, got ${JSON.stringify(outcome)}`);
  return outcome.result.structuredContent as Record<string, any>;
};
/** What a caller is shown of a refusal (the error object itself is not sent). */
const answer = (outcome: RouterOutcome) => JSON.stringify({ ...outcome, error: undefined });
const session = (principal: string): CallerSession => ({ sessionId: `s-${principal}`, principal, unit: `s-${principal}`, isLive: () => true });
const detail = async (id: string, principal: string) => estate.router.resolve('estate__apply_proposal')!.approvalDetail!({ id }, session(principal));

async function proposeAsAlice(): Promise<string> {
  const diff = ['@@ -1,2 +1,2 @@', ' alpha line', '-second line', '+second line, edited', ''].join('\n');
  return structured(await estate.run('estate__propose_change', { path: 'a.txt', unifiedDiff: diff, rationale: 'tidy' }, 'alice')).id;
}

describe('estate proposals belong to their principal', () => {
  it("another principal listed and applied a principal's proposal: now it is as unknown to them as a made-up id", async () => {
    const id = await proposeAsAlice();
    expect(structured(await estate.run('estate__list_proposals', {}, 'bob')).proposals).toEqual([]);
    const foreign = await estate.run('estate__apply_proposal', { id }, 'bob');
    const unknown = await estate.run('estate__apply_proposal', { id: 'prop_000000000000000000' }, 'bob');
    expect(foreign).toMatchObject({ outcome: 'error', message: 'no such proposal' });
    expect(answer(foreign)).toBe(answer(unknown));
    expect(readFileSync(join(estate.root, 'a.txt'), 'utf8')).toBe('alpha line\nsecond line\n');
    expect(structured(await estate.run('estate__list_proposals', { status: 'pending' }, 'alice')).proposals.map((p: { id: string }) => p.id)).toEqual([id]);
    // Applied by its owner, it stays foreign to the other: not even "already applied".
    structured(await estate.run('estate__apply_proposal', { id }, 'alice'));
    expect(answer(await estate.run('estate__apply_proposal', { id }, 'bob'))).toBe(answer(unknown));
    expect(structured(await estate.run('estate__list_proposals', {}, 'bob')).proposals).toEqual([]);
  });

  it("an operator and the local (stdio) principal list and apply every principal's proposals", async () => {
    const first = await proposeAsAlice();
    expect(structured(await estate.run('estate__list_proposals', {}, 'ops')).proposals).toEqual([expect.objectContaining({ id: first, principal: 'alice' })]);
    expect(structured(await estate.run('estate__list_proposals', {}, 'local')).proposals).toHaveLength(1);
    expect(structured(await estate.run('estate__apply_proposal', { id: first }, 'ops'))).toMatchObject({ status: 'applied' });
    expect(readFileSync(join(estate.root, 'a.txt'), 'utf8')).toBe('alpha line\nsecond line, edited\n');
  });
});

describe('the approval prompt of estate__apply_proposal', () => {
  it('showed only the proposal id: now the path, lines added and removed, bytes before and after, and who proposed it', async () => {
    const id = await proposeAsAlice();
    const lines = await detail(id, 'alice');
    expect(lines[0]).toBe('Change: changes "a.txt": +1/-1 lines, 23 → 31 bytes (a unified diff), proposed by "alice".');
    expect(lines[1]).toBe('Rationale: "tidy"');
    const created = structured(await estate.run('estate__propose_change', { path: 'sub/new.txt', content: 'one\ntwo\n', rationale: 'r' }, 'alice')).id;
    expect((await detail(created, 'alice'))[0]).toBe('Change: creates "sub/new.txt": +2/-0 lines, 8 bytes (whole new content), proposed by "alice".');
  });

  it("shows another principal's proposal exactly as an unknown id", async () => {
    const id = await proposeAsAlice();
    expect(await detail(id, 'bob')).toEqual(await detail('prop_000000000000000000', 'bob'));
    expect(JSON.stringify(await detail(id, 'bob'))).not.toContain('a.txt');
    expect((await detail(id, 'ops'))[0]).toContain('"a.txt"');
  });
});
