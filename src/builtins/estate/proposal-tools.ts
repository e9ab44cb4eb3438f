/**
 * The estate relay's change tools (issue 4): `estate__propose_change` stores a proposal and
 * writes nothing to the estate; `estate__list_proposals` lists them, `estate.maxResults` at a time
 * (a `nextCursor` reads the next page, store/list-cursor.ts); `estate__apply_proposal`
 * writes one (destructive: `destructiveHint: true`, and the judge asks by default, through the
 * tool's `policyDefault: "ask"`, unless a `policy.rules` entry names it).
 *
 * Proposals live in the durable store (`Store.addProposal`, SQLite in `broker.dataDir`). The
 * audit hook: the call that stores or applies a proposal carries `proposal: {id, action, path}`
 * into its record (calls.ndjson), and that record is what the publish stage hands to
 * `gateway.publisher` subscribers.
 *
 * A proposal belongs to the principal that made it: only that principal lists and applies it,
 * and to anyone else its id answers exactly as an unknown id (no oracle); `isPrivileged`
 * principals (`local`, role `operator`) act on all. The approval prompt of an apply shows the
 * path and a summary of the change (`approvalDetail`), not only the id.
 *
 * A diff is checked against the file when proposed and when applied, and may not match a line
 * holding a secret (refused as a hunk that does not match); no digest of a file is shown (the
 * rest of the file being readable, a digest would check guesses at a secret offline).
 *
 * Applying checks the file still has the content the proposal was made against (sha256), then
 * writes a temp file in the same (held) folder and renames it over the target, so a reader never
 * sees half a file ({@link EstateScope.writeAtomically}: nothing is written outside the root).
 */
import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { defineFunctionTool, type FunctionTool } from '../../router/function-tool.js';
import type { Clock } from '../../shared/clock.js';
import type { Scrubber } from '../../shared/scrub.js';
import { listKeyOf, pageOf } from '../../store/list-cursor.js';
import type { Proposal, Store } from '../../store/store.js';
import { cursorParameter } from '../cursor-parameter.js';
import { applyUnifiedDiff, DiffError, diffLineCounts, replacementLineCounts } from './diff.js';
import { keepsSecretsMasked, secretLines } from './redacted-bytes.js';
import type { EstateScope, WritablePath } from './scope.js';

/** What the change tools need of the store. */
export type ProposalStore = Pick<Store, 'addProposal' | 'getProposal' | 'listProposals' | 'markProposalApplied'>;

export interface ProposalToolDeps {
  /** The store, opened on first use. */
  store(): ProposalStore;
  clock: Clock;
  /** The broker's scrubber: a diff may not match a line holding a secret (`applyUnifiedDiff`'s `held`). */
  scrubber: Scrubber;
  /** Most proposals on one page of `estate__list_proposals` (`estate.maxResults`). */
  maxResults: number;
  /**
   * Whether `principal` may list and apply every principal's proposals: `local` (the stdio
   * client) and role `operator`. Everyone else sees only their own.
   */
  isPrivileged(principal: string): boolean;
  /**
   * Called by `estate__apply_proposal` after the target is resolved and checked, just before
   * anything is written. A test seam for check-then-write races; absent in production.
   */
  beforeWrite?: () => void | Promise<void>;
}

/** `estate__propose_change`, `estate__list_proposals`, `estate__apply_proposal` over `scope`. */
export function proposalTools(scope: EstateScope, deps: ProposalToolDeps): FunctionTool[] {
  /** The proposal `principal` may act on; another's is undefined, exactly as an unknown id (no oracle). */
  const proposalFor = async (id: string, principal: string): Promise<Proposal | undefined> => {
    const proposal = await deps.store().getProposal(id);
    return proposal && (proposal.principal === principal || deps.isPrivileged(principal)) ? proposal : undefined;
  };

  const propose = defineFunctionTool({
    name: 'estate__propose_change',
    title: 'Propose a change to an estate file',
    description:
      'Proposes new content for one estate file, as the whole new "content" or as a "unifiedDiff" against the file as it is now (exactly one of the two), with a "rationale". Nothing is written to the estate: the proposal is stored and audited, and estate__apply_proposal applies it (with approval).',
    parameters: z
      .object({
        path: z.string().describe('The file, relative to the estate root; it may not exist yet'),
        content: z.string().optional().describe('The whole new content of the file'),
        unifiedDiff: z.string().optional().describe('A unified diff (@@ hunks) against the current file'),
        rationale: z.string().min(1).describe('Why the change is wanted'),
      })
      .refine((a) => (a.content === undefined) !== (a.unifiedDiff === undefined), { message: 'give exactly one of "content" and "unifiedDiff"' }),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    async handler({ path, content, unifiedDiff, rationale }, context) {
      const target = await scope.openWritable(path, { follow: true });
      let current: string | undefined;
      try {
        current = await readCurrent(target);
      } finally {
        await target.close();
      }
      // A diff that does not apply now is refused now, not at apply time.
      // Refused alike when it matches a line holding a secret: the answer never confirms a guess.
      if (unifiedDiff !== undefined) applyDiff(deps.scrubber, current, unifiedDiff);
      const proposal: Proposal = {
        id: `prop_${randomBytes(9).toString('hex')}`,
        path: target.rel,
        kind: content !== undefined ? 'content' : 'diff',
        body: content ?? unifiedDiff!,
        rationale,
        baseSha256: current === undefined ? null : sha256(current),
        status: 'pending',
        principal: context.session.principal,
        // A modern request has no session: its unit stands in for it.
        sessionId: context.session.sessionId ?? context.session.unit,
        createdAt: new Date(deps.clock.now()).toISOString(),
      };
      await deps.store().addProposal(proposal);
      context.notes.proposal = { id: proposal.id, action: 'proposed', path: proposal.path };
      return {
        id: proposal.id,
        path: proposal.path,
        kind: proposal.kind,
        status: proposal.status,
        note: 'Stored; nothing was written to the estate. estate__apply_proposal {id} applies it, after approval.',
      };
    },
  });

  const list = defineFunctionTool({
    name: 'estate__list_proposals',
    title: 'List estate proposals',
    description: `Lists the caller's stored estate proposals (an operator's: everyone's), newest first, ${deps.maxResults} at a time, without their bodies. Answer: {proposals, nextCursor?}; pass nextCursor back as cursor for the next page (absent on the last).`,
    parameters: z.object({ status: z.enum(['pending', 'applied']).optional().describe('Only proposals in this state'), cursor: cursorParameter }),
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    async handler({ status, cursor }, context) {
      const { principal } = context.session;
      const after = listKeyOf(cursor, 'estate__list_proposals');
      const page = pageOf(
        await deps.store().listProposals({ status, ...(after && { after }), limit: deps.maxResults + 1, ...(deps.isPrivileged(principal) ? {} : { principal }) }),
        deps.maxResults,
      );
      return {
        // The body can be large and the session id is the caller's handle: neither is listed.
        // Nor the file's digest: with the rest of a file readable, it would check guesses at a
        // secret in it offline.
        proposals: page.items.map(({ body, sessionId: _session, baseSha256: _base, ...rest }) => ({ ...rest, bodyBytes: Buffer.byteLength(body) })),
        ...(page.nextCursor !== undefined && { nextCursor: page.nextCursor }),
      };
    },
  });

  const apply = defineFunctionTool({
    name: 'estate__apply_proposal',
    title: 'Apply an estate proposal',
    description:
      "Writes one of the caller's stored proposals to the estate. Destructive: it replaces the file. Refused when the file changed since the proposal was made. Policy asks for approval by default; the prompt shows the path and a summary of the change.",
    parameters: z.object({ id: z.string().min(1).describe('The proposal id from estate__propose_change') }),
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    policyDefault: 'ask',
    async approvalDetail(args, session) {
      const id = (args as { id?: unknown } | undefined)?.id;
      const proposal = typeof id === 'string' ? await proposalFor(id, session.principal) : undefined;
      if (!proposal) return ['Change: no such proposal; applying it will fail.'];
      if (proposal.status !== 'pending') return ['Change: the proposal was already applied; applying it again will fail.'];
      // Whole: the judge scrubs each line whole, then cuts it (a cut here, before the scrub, left a secret's first characters).
      return [await describeChange(scope, deps.scrubber, proposal), `Rationale: ${JSON.stringify(proposal.rationale)}`];
    },
    async handler({ id }, context) {
      const store = deps.store();
      const proposal = await proposalFor(id, context.session.principal);
      if (!proposal) throw new Error('no such proposal');
      if (proposal.status !== 'pending') throw new Error(`the proposal was already applied (${proposal.appliedAt ?? 'earlier'})`);
      // The stored path is the real one (resolved when proposed): applying follows no symlink.
      const target = await scope.openWritable(proposal.path, { follow: false });
      let next: string;
      try {
        const current = await readCurrent(target);
        const now = current === undefined ? null : sha256(current);
        if (now !== proposal.baseSha256) {
          throw new Error('the file changed since the proposal was made; propose the change again against the current file');
        }
        next = proposal.kind === 'content' ? proposal.body : applyDiff(deps.scrubber, current, proposal.body);
        await deps.beforeWrite?.();
        await scope.writeAtomically(target, next, {
          mode: target.file ? target.file.stats.mode & 0o7777 : undefined,
          beforeRename: async () => {
            if (!(await store.markProposalApplied(id, new Date(deps.clock.now()).toISOString(), context.session.principal))) {
              throw new Error('the proposal was applied by another call first');
            }
          },
        });
      } finally {
        await target.close();
      }
      context.notes.proposal = { id, action: 'applied', path: proposal.path };
      // No digest of what was written: it holds the file's other lines, secrets too (see list).
      return { id, path: proposal.path, status: 'applied', bytes: Buffer.byteLength(next) };
    },
  });

  return [propose, list, apply];
}

/**
 * One line for the approval prompt: the path (quoted), whether the file is created or changed,
 * lines added and removed, bytes before and after, and who proposed it; or why applying it would
 * fail now. Reads the file as `estate__apply_proposal` would (no symlink followed).
 */
async function describeChange(scope: EstateScope, scrubber: Scrubber, proposal: Proposal): Promise<string> {
  const where = JSON.stringify(proposal.path);
  let current: string | undefined;
  try {
    const target = await scope.openWritable(proposal.path, { follow: false });
    try {
      current = await readCurrent(target);
    } finally {
      await target.close();
    }
  } catch {
    return `Change: ${where} cannot be resolved now; applying it will fail.`;
  }
  if ((current === undefined ? null : sha256(current)) !== proposal.baseSha256) {
    return `Change: ${where} changed since the proposal was made; applying it will be refused.`;
  }
  let next: string;
  const held = secretLines(scrubber, current);
  try {
    next = proposal.kind === 'content' ? proposal.body : applyDiff(scrubber, current, proposal.body, held);
  } catch {
    return `Change: the diff for ${where} no longer applies; applying it will fail.`;
  }
  // A line holding a secret is never common to both: the counts never confirm a guess at it.
  const { added, removed } = proposal.kind === 'diff' ? diffLineCounts(proposal.body) : replacementLineCounts(current ?? '', next, held);
  const bytes = current === undefined ? `${Buffer.byteLength(next)} bytes` : `${Buffer.byteLength(current)} → ${Buffer.byteLength(next)} bytes`;
  const how = proposal.kind === 'diff' ? 'a unified diff' : 'whole new content';
  return `Change: ${current === undefined ? 'creates' : 'changes'} ${where}: +${added}/-${removed} lines, ${bytes} (${how}), proposed by ${JSON.stringify(proposal.principal)}.`;
}

/** The whole current text of a writable target (read from its held handle), or undefined when it does not exist. */
async function readCurrent(target: WritablePath): Promise<string | undefined> {
  return target.file ? target.file.handle.readFile('utf8') : undefined;
}

/**
 * `current` with `diff` applied as the change tools apply it: no hunk matches a line holding a
 * secret nor goes between two of its lines ({@link secretLines}), and the change may not leave
 * any part of a secret unmasked (`keepsSecretsMasked`: a field name changed on the line before
 * its value). Throws {@link DiffError}.
 */
function applyDiff(scrubber: Scrubber, current: string | undefined, diff: string, held = secretLines(scrubber, current)): string {
  const moved: number[] = [];
  const next = applyUnifiedDiff(current ?? '', diff, held, held.joined, moved);
  if (held.size > 0 && !keepsSecretsMasked(scrubber, current ?? '', next, moved, held.ranges)) {
    throw new DiffError('the diff changes what makes a secret in the file one: part of it would read unmasked');
  }
  return next;
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}
