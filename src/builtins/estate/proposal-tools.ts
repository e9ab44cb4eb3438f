/**
 * The estate relay's change tools (issue 4): `estate__propose_change` stores a proposal and
 * writes nothing to the estate; `estate__list_proposals` lists them; `estate__apply_proposal`
 * writes one (destructive: `destructiveHint: true`, and the judge asks by default, through the
 * tool's `policyDefault: "ask"`, unless a `policy.rules` entry names it).
 *
 * Proposals live in the durable store (`Store.addProposal`, SQLite in `broker.dataDir`). The
 * audit hook: the call that stores or applies a proposal carries `proposal: {id, action, path}`
 * into its record (calls.ndjson), and that record is what the publish stage hands to
 * `gateway.publisher` subscribers.
 *
 * Applying checks the file still has the content the proposal was made against (sha256), then
 * writes a temp file in the same (held) folder and renames it over the target, so a reader never
 * sees half a file ({@link EstateScope.writeAtomically}: nothing is written outside the root).
 */
import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { defineFunctionTool, type FunctionTool } from '../../router/function-tool.js';
import type { Clock } from '../../shared/clock.js';
import type { Proposal, Store } from '../../store/store.js';
import { applyUnifiedDiff } from './diff.js';
import type { EstateScope, WritablePath } from './scope.js';

/** What the change tools need of the store. */
export type ProposalStore = Pick<Store, 'addProposal' | 'getProposal' | 'listProposals' | 'markProposalApplied'>;

export interface ProposalToolDeps {
  /** The store, opened on first use. */
  store(): ProposalStore;
  clock: Clock;
  /** Most proposals one `estate__list_proposals` returns (`estate.maxResults`). */
  maxResults: number;
  /**
   * Called by `estate__apply_proposal` after the target is resolved and checked, just before
   * anything is written. A test seam for check-then-write races; absent in production.
   */
  beforeWrite?: () => void | Promise<void>;
}

/** `estate__propose_change`, `estate__list_proposals`, `estate__apply_proposal` over `scope`. */
export function proposalTools(scope: EstateScope, deps: ProposalToolDeps): FunctionTool[] {
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
      if (unifiedDiff !== undefined) applyUnifiedDiff(current ?? '', unifiedDiff);
      const proposal: Proposal = {
        id: `prop_${randomBytes(9).toString('hex')}`,
        path: target.rel,
        kind: content !== undefined ? 'content' : 'diff',
        body: content ?? unifiedDiff!,
        rationale,
        baseSha256: current === undefined ? null : sha256(current),
        status: 'pending',
        principal: context.session.principal,
        sessionId: context.session.sessionId,
        createdAt: new Date(deps.clock.now()).toISOString(),
      };
      await deps.store().addProposal(proposal);
      context.notes.proposal = { id: proposal.id, action: 'proposed', path: proposal.path };
      return {
        id: proposal.id,
        path: proposal.path,
        kind: proposal.kind,
        status: proposal.status,
        baseSha256: proposal.baseSha256,
        note: 'Stored; nothing was written to the estate. estate__apply_proposal {id} applies it, after approval.',
      };
    },
  });

  const list = defineFunctionTool({
    name: 'estate__list_proposals',
    title: 'List estate proposals',
    description: `Lists stored estate proposals, newest first (at most ${deps.maxResults}), without their bodies.`,
    parameters: z.object({ status: z.enum(['pending', 'applied']).optional().describe('Only proposals in this state') }),
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    async handler({ status }) {
      const rows = await deps.store().listProposals({ status, limit: deps.maxResults });
      return {
        // The body can be large and the session id is the caller's handle: neither is listed.
        proposals: rows.map(({ body, sessionId: _session, ...rest }) => ({ ...rest, bodyBytes: Buffer.byteLength(body) })),
      };
    },
  });

  const apply = defineFunctionTool({
    name: 'estate__apply_proposal',
    title: 'Apply an estate proposal',
    description:
      'Writes one stored proposal to the estate. Destructive: it replaces the file. Refused when the file changed since the proposal was made. Policy asks for approval by default.',
    parameters: z.object({ id: z.string().min(1).describe('The proposal id from estate__propose_change') }),
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    policyDefault: 'ask',
    async handler({ id }, context) {
      const store = deps.store();
      const proposal = await store.getProposal(id);
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
        next = proposal.kind === 'content' ? proposal.body : applyUnifiedDiff(current ?? '', proposal.body);
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
      return { id, path: proposal.path, status: 'applied', bytes: Buffer.byteLength(next), sha256: sha256(next) };
    },
  });

  return [propose, list, apply];
}

/** The whole current text of a writable target (read from its held handle), or undefined when it does not exist. */
async function readCurrent(target: WritablePath): Promise<string | undefined> {
  return target.file ? target.file.handle.readFile('utf8') : undefined;
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}
