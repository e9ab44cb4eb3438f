/**
 * `snapshot: "estate"`: the estate root's files as they were before a flow's first step, put
 * back when the flow fails (seed 000_13a5a3abd08ace07.txt: "the opt-in git snapshot is
 * restored").
 *
 * When the root is inside a git work tree, the snapshot is a git tree object of the root's
 * files (tracked and untracked, not ignored), written through a private index file, so the
 * repository's own index, HEAD, branches and stash are never touched; restoring writes every
 * file of that tree back and deletes files created since (ignored files are left alone).
 * Otherwise the snapshot is a copy of the root in a temporary folder (files, folders and
 * symlinks; a FIFO, socket or device refuses it), and restoring replaces the root's contents
 * with it. {@link EstateSnapshot.discard} removes what the snapshot holds on disk.
 *
 * The broker's own files ({@link OwnFiles}: the records file, its rotations, the store) are no
 * part of it wherever the root holds them, a hard link under another name included: they are
 * never saved (no copy of the records in the temporary folder or the repository's objects), and
 * a restore neither deletes nor writes over an entry that is one of them, nor anything below it;
 * a saved file whose name such an entry now holds is not put back.
 */
import { execFile } from 'node:child_process';
import { constants, type Stats } from 'node:fs';
import { chmod, lstat, mkdir, mkdtemp, open, readdir, readlink, realpath, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pLimit from 'p-limit';

const run = promisify(execFile);

/**
 * The broker's own files as they are now, by identity (`<dev>:<ino>`, as
 * `EstateScope.reservedNow().ids`); asked once when the snapshot is taken and once when it is
 * restored.
 */
export type OwnFiles = () => Promise<ReadonlySet<string>>;

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
 * what is saved and put back), leaving out `own`. Rejects when it cannot be taken.
 */
export async function takeSnapshot(root: string, own: OwnFiles): Promise<EstateSnapshot> {
  // A root that is a symlink was copied as the link, and restoring emptied the folder it names
  // before failing to copy the link back onto it: every file of the estate lost.
  const real = await realpath(root);
  const top = await gitTop(real);
  return top ? gitSnapshot(real, top, own) : copySnapshot(real, own);
}

const idOf = (s: Stats) => `${s.dev}:${s.ino}`;

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

async function gitSnapshot(root: string, top: string, own: OwnFiles): Promise<EstateSnapshot> {
  const scratch = await mkdtemp(join(tmpdir(), 'mcp-broker-snapshot-'));
  const git = (args: string[], index: string) => run('git', ['-C', root, ...args], { env: gitEnv(index), maxBuffer: 64 * 1024 * 1024 });
  const listed = async (args: string[], index: string) => (await git(['ls-files', '-z', ...args], index)).stdout.split('\0').filter(Boolean);
  const taken = join(scratch, 'taken.index');
  // The private index is empty: every file not ignored is "other". The broker's own are never
  // added, so no blob of theirs is written to the repository.
  const ids = await own();
  const held = await heldByOwn(root, await listed(['--others', '--exclude-standard', '--', '.'], taken), ids);
  await git(['add', '-A', '--', '.', ...held.map((rel) => `:(exclude,literal)${rel}`)], taken);
  const tree = (await git(['write-tree'], taken)).stdout.trim();
  return {
    kind: 'git',
    async restore() {
      const ids = await own();
      const index = join(scratch, 'restore.index');
      await git(['read-tree', tree], index);
      // Files created since the snapshot (untracked by the snapshot's tree, not ignored) go, but
      // for the broker's own.
      const created = await listed(['--others', '--exclude-standard', '--full-name', '--', '.'], index);
      const keep = new Set(await heldByOwn(top, created, ids));
      for (const rel of created) if (!keep.has(rel)) await rm(join(top, rel), { force: true });
      // A saved path one of the broker's own files now holds is not written (checkout-index -f
      // would unlink that name and write the saved file in its place).
      const skip = await heldByOwn(top, await listed(['--full-name', '--', '.'], index), ids);
      if (skip.length > 0) await run('git', ['-C', top, 'update-index', '--force-remove', '--', ...skip], { env: gitEnv(index) });
      await run('git', ['-C', top, 'checkout-index', '-a', '-f'], { env: gitEnv(index) });
    },
    discard: () => rm(scratch, { recursive: true, force: true }).catch(() => undefined),
  };
}

/**
 * Of `rels` (relative to `base`, `/`-separated), those that are one of the broker's own files
 * (`ids`), or lie below one (a folder, or a file where a folder was).
 */
async function heldByOwn(base: string, rels: readonly string[], ids: ReadonlySet<string>): Promise<string[]> {
  if (ids.size === 0) return [];
  // One `lstat` per path and per folder above it, HELD_BY_OWN_LSTATS at a time (a tree of
  // thousands of files, looked at one after another, doubled a snapshot's time).
  const limit = pLimit(HELD_BY_OWN_LSTATS);
  const seen = new Map<string, Promise<boolean>>();
  const isOwn = (rel: string): Promise<boolean> => {
    let known = seen.get(rel);
    if (known === undefined) {
      known = limit(async () => {
        const s = await lstat(join(base, rel)).catch(() => undefined);
        return s !== undefined && ids.has(idOf(s));
      });
      seen.set(rel, known);
    }
    return known;
  };
  const held = await Promise.all(
    rels.map(async (rel) => {
      const parts = rel.split('/');
      const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
      return (await Promise.all(prefixes.map(isOwn))).some(Boolean);
    }),
  );
  return rels.filter((_, i) => held[i]);
}

/** How many `lstat`s {@link heldByOwn} has in flight at once. */
const HELD_BY_OWN_LSTATS = 32;

async function copySnapshot(root: string, own: OwnFiles): Promise<EstateSnapshot> {
  const scratch = await mkdtemp(join(tmpdir(), 'mcp-broker-snapshot-'));
  const copy = join(scratch, 'root');
  try {
    await mkdir(copy);
    await copyInto(root, copy, await own());
  } catch (err) {
    await rm(scratch, { recursive: true, force: true }).catch(() => undefined);
    throw err;
  }
  return {
    kind: 'copy',
    async restore() {
      const ids = await own();
      await clearBut(root, ids);
      await copyInto(copy, root, ids);
    },
    discard: () => rm(scratch, { recursive: true, force: true }).catch(() => undefined),
  };
}

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/**
 * Copies the entries of the folder `from` into the folder `to` (files with their permission
 * bits, folders, symlinks as written), leaving out the broker's own (`ids`). Never writes over
 * an entry `to` already has: a file or symlink there is left as it is, a folder there is copied
 * into. Throws for a FIFO, socket or device (cp(1)'s refusal, kept).
 */
async function copyInto(from: string, to: string, ids: ReadonlySet<string>): Promise<void> {
  for (const entry of await readdir(from, { withFileTypes: true })) {
    const src = join(from, entry.name);
    const dest = join(to, entry.name);
    const s = await lstat(src).catch(() => undefined);
    if (!s || ids.has(idOf(s))) continue;
    if (s.isSymbolicLink()) {
      await symlink(await readlink(src), dest).catch(unlessExists);
    } else if (s.isDirectory()) {
      const made = await mkdir(dest).then(() => true, (err: unknown) => unlessExists(err).then(() => false));
      if (!made && !(await lstat(dest)).isDirectory()) continue;
      await copyInto(src, dest, ids);
      if (made) await chmod(dest, s.mode & 0o7777);
    } else if (s.isFile()) {
      await copyFile(src, dest, ids);
    } else {
      throw new Error('the estate holds a FIFO, socket or device, which a copy snapshot cannot save');
    }
  }
}

/** Copies the regular file `src` to the new file `dest` (`O_EXCL`), unless `src` is one of `ids` once open. */
async function copyFile(src: string, dest: string, ids: ReadonlySet<string>): Promise<void> {
  const input = await open(src, READ_FLAGS);
  try {
    const s = await input.stat();
    if (!s.isFile() || ids.has(idOf(s))) return;
    const output = await open(dest, CREATE_FLAGS, 0o600).catch(async (err: unknown) => unlessExists(err).then(() => undefined));
    if (!output) return;
    try {
      const buffer = Buffer.alloc(64 * 1024);
      for (;;) {
        const { bytesRead } = await input.read(buffer, 0, buffer.length, null);
        if (bytesRead === 0) break;
        await output.write(buffer, 0, bytesRead);
      }
      await output.chmod(s.mode & 0o7777);
    } finally {
      await output.close();
    }
  } finally {
    await input.close();
  }
}

/**
 * Removes everything in the folder `dir` but the broker's own (`ids`) and the folders that hold
 * one; true when something was kept.
 */
async function clearBut(dir: string, ids: ReadonlySet<string>): Promise<boolean> {
  let kept = false;
  for (const name of await readdir(dir)) {
    const at = join(dir, name);
    const s = await lstat(at).catch(() => undefined);
    if (!s) continue;
    if (ids.has(idOf(s))) kept = true;
    else if (s.isDirectory() && (await clearBut(at, ids))) kept = true;
    else await rm(at, { recursive: true, force: true });
  }
  return kept;
}

async function unlessExists(err: unknown): Promise<void> {
  if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
}
