/**
 * `snapshot: "estate"`: the estate root's files as they were before a flow's first step, put
 * back when the flow fails (seed 000_13a5a3abd08ace07.txt: "the opt-in git snapshot is
 * restored").
 *
 * When the root is inside a git work tree, the snapshot is a git tree object of the root's
 * files (tracked and untracked, not ignored), written through a private index file, so the
 * repository's own index, HEAD, branches and stash are never touched; restoring writes every
 * file of that tree back and deletes files created since (ignored files are left alone).
 * Otherwise the snapshot is a copy of the root in a temporary folder (every file), and restoring
 * replaces the root's contents with it. {@link EstateSnapshot.discard} removes what the snapshot
 * holds on disk.
 */
import { execFile } from 'node:child_process';
import { cp, mkdtemp, readdir, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface EstateSnapshot {
  /** `git` (a tree object in the root's repository) or `copy` (a folder copy). */
  readonly kind: 'git' | 'copy';
  /** Puts the root's files back as they were when the snapshot was taken. Rejects when it cannot. */
  restore(): Promise<void>;
  /** Frees the snapshot's temporary files. Never rejects. */
  discard(): Promise<void>;
}

/**
 * Takes a snapshot of `root` (an existing folder, or a symlink to one: the folder it names is
 * what is saved and put back). Rejects when it cannot be taken.
 */
export async function takeSnapshot(root: string): Promise<EstateSnapshot> {
  // A root that is a symlink was copied as the link, and restoring emptied the folder it names
  // before failing to copy the link back onto it: every file of the estate lost.
  const real = await realpath(root);
  const top = await gitTop(real);
  return top ? gitSnapshot(real, top) : copySnapshot(real);
}

async function gitTop(root: string): Promise<string | undefined> {
  try {
    const { stdout } = await run('git', ['-C', root, 'rev-parse', '--show-toplevel'], { env: gitEnv() });
    return stdout.trim() || undefined;
  } catch {
    return undefined;
  }
}

function gitEnv(index?: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, GIT_TERMINAL_PROMPT: '0' };
  if (index) env.GIT_INDEX_FILE = index;
  return env;
}

async function gitSnapshot(root: string, top: string): Promise<EstateSnapshot> {
  const scratch = await mkdtemp(join(tmpdir(), 'mcp-broker-snapshot-'));
  const git = (args: string[], index: string) => run('git', ['-C', root, ...args], { env: gitEnv(index), maxBuffer: 64 * 1024 * 1024 });
  const taken = join(scratch, 'taken.index');
  await git(['add', '-A', '--', '.'], taken);
  const tree = (await git(['write-tree'], taken)).stdout.trim();
  return {
    kind: 'git',
    async restore() {
      const index = join(scratch, 'restore.index');
      await git(['read-tree', tree], index);
      // Files created since the snapshot (untracked by the snapshot's tree, not ignored) go.
      const created = (await git(['ls-files', '-z', '--others', '--exclude-standard', '--full-name', '--', '.'], index)).stdout.split('\0').filter(Boolean);
      for (const rel of created) await rm(join(top, rel), { force: true });
      await run('git', ['-C', top, 'checkout-index', '-a', '-f'], { env: gitEnv(index) });
    },
    discard: () => rm(scratch, { recursive: true, force: true }).catch(() => undefined),
  };
}

async function copySnapshot(root: string): Promise<EstateSnapshot> {
  const scratch = await mkdtemp(join(tmpdir(), 'mcp-broker-snapshot-'));
  const copy = join(scratch, 'root');
  await cp(root, copy, { recursive: true, verbatimSymlinks: true });
  return {
    kind: 'copy',
    async restore() {
      for (const name of await readdir(root)) await rm(join(root, name), { recursive: true, force: true });
      await cp(copy, root, { recursive: true, verbatimSymlinks: true });
    },
    discard: () => rm(scratch, { recursive: true, force: true }).catch(() => undefined),
  };
}
