/**
 * The estate's scope: every path an `estate__*` tool touches is resolved here, inside
 * `estate.root` (seed 002_7bce204a86c1c7ba.txt, "the reserved `estate` relay"; issue 4).
 *
 * A path is relative and `/`-separated. Refused with `BrokerError('estate_scope_escape')` (the
 * invoke stage answers `guard_error`, reason `estate_scope_escape: …`), before anything is read:
 *  - an absolute path (`/x`, `C:\x`, `\\host\x`), a NUL byte, a backslash, any `..` segment;
 *  - a symlink whose target leaves the root, leads nowhere, or loops;
 *  - anything that is not a regular file or a directory (FIFOs, sockets, devices);
 *  - a component that changes (for example becomes a symlink) while it is being resolved;
 *  - the broker's own files ({@link EstateScope} `reserved`: `broker.dataDir`, the records file
 *    and every name beside it that starts with its name and a dot: rotations, the lock and the
 *    lock's temporary files), wherever the root puts them: one principal's records and stored
 *    state are not another's to read, and no proposal may write them. They are not listed either.
 *    Their names are refused whether they exist or not; another name is refused by identity.
 * Nothing is decoded: `%2e%2e%2f` is a file name of nine characters, inside the root.
 *
 * How (Linux; Node has no openat(2)): the root's real path is taken once and every call opens it
 * again, checked to be the same folder (device and inode). From there each component is opened
 * relative to the folder before it, through `/proc/self/fd/<fd>/<name>`, with `O_NOFOLLOW`
 * (folders also `O_DIRECTORY`), so no component is a symlink when it is opened, and a swap after
 * that cannot redirect anything: the caller holds the handles. A symlink met on the way is read
 * (`readlink`) and its target resolved the same way, never by the kernel; a target that climbs
 * above the root or is absolute outside it is refused. Writes ({@link EstateScope.writeAtomically})
 * follow no symlink at all: the temp file is created in the held folder and renamed within it.
 *
 * Error messages never name the root, the `/proc` path or the path argument.
 */
import { randomBytes } from 'node:crypto';
import { constants, type BigIntStats, type Dirent, type Stats } from 'node:fs';
import { lstat, open, readdir, readlink, realpath, rename, stat, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { BrokerError } from '../../shared/errors.js';

/** Longest estate path, in bytes (Linux `PATH_MAX`). */
export const MAX_PATH_BYTES = 4096;
/** Longest name of one path component, in bytes (Linux `NAME_MAX`). */
export const MAX_NAME_BYTES = 255;
/** Most symlinks followed while resolving one path (as Linux's `MAXSYMLINKS`). */
export const MAX_SYMLINK_HOPS = 40;

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const FILE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const TEMP_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** An open file or folder inside the root. The caller closes `handle`. */
export interface ScopedPath {
  /** Relative to the root, `/`-separated, every symlink resolved; `.` for the root. */
  readonly rel: string;
  /** `fstat` of the handle. */
  readonly stats: Stats;
  readonly handle: FileHandle;
}

/**
 * Where a proposal writes: the held folder and the name in it; the file itself open when it
 * exists. The caller calls {@link WritablePath.close}.
 */
export interface WritablePath {
  /** Relative to the root, `/`-separated, every symlink resolved. */
  readonly rel: string;
  /** The folder the file is (or would be) in, held open. */
  readonly dir: FileHandle;
  /** That folder, relative to the root (`.` for the root). */
  readonly dirRel: string;
  /** The file's name in `dir`. */
  readonly name: string;
  /** The existing file, open for reading; undefined when it does not exist yet. */
  readonly file?: { readonly handle: FileHandle; readonly stats: Stats };
  /** Closes every handle. */
  close(): Promise<void>;
}

/** One entry of {@link EstateScope.list}: but for a symlink, with the `lstat` its identity was checked by. */
export type ListedEntry = Dirent & { readonly stats?: Stats };

/** Thrown for a path inside the scope that does not exist; the tool's own failure (`tool_error`). */
export class EstateNotFound extends Error {
  constructor() {
    super('no such file or folder in the estate');
    this.name = 'EstateNotFound';
  }
}

/** One component still to resolve; `fromLink` when it came from a symlink's target. */
interface Step {
  readonly name: string;
  readonly fromLink: boolean;
}

type Final =
  | { readonly kind: 'dir' }
  | { readonly kind: 'file'; readonly name: string; readonly handle: FileHandle; readonly stats: Stats }
  | { readonly kind: 'missing'; readonly name: string };

/** The held folders from the root down (`names[i]` is the name of `dirs[i + 1]`) and what the path ends in. */
interface Walked {
  readonly dirs: FileHandle[];
  readonly names: string[];
  readonly final: Final;
}

/**
 * One of the broker's own paths ({@link EstateScope} `reserved`): an absolute path (a file, or a
 * folder with everything below it), or `{ prefix }`: every name in the folder `dirname(prefix)`
 * that starts with `basename(prefix)`, there now or made later (the files the broker writes beside
 * its records file under names it picks as it goes: rotations, the lock's temporary files).
 */
export type ReservedPath = string | { readonly prefix: string };

/**
 * The broker's own files as found now ({@link EstateScope.reservedNow}): `ids` their identities
 * (`dev:ino`), `names` each one's folder identity with its name (for names not there yet),
 * `prefixes` each `{ prefix }` folder's identity with the name prefixes reserved in it.
 */
export interface Reserved {
  readonly ids: ReadonlySet<string>;
  readonly names: ReadonlySet<string>;
  readonly prefixes: ReadonlyMap<string, readonly string[]>;
}

/** Whether `name` in the folder whose identity is `folder` (`dev:ino`) is reserved by name. */
function reservedName(reserved: Reserved, folder: string, name: string): boolean {
  return reserved.names.has(`${folder}/${name}`) || (reserved.prefixes.get(folder)?.some((p) => name.startsWith(p)) ?? false);
}

/** `dev:ino`; a bigint `stat` gives the same text as a number one (both rounded alike past 2^53). */
const idOf = (s: { dev: number | bigint; ino: number | bigint }) => `${Number(s.dev)}:${Number(s.ino)}`;

export class EstateScope {
  private rootId?: { readonly real: string; readonly dev: number; readonly ino: number };
  /** {@link reservedNow}'s last answer, with each folder it was read from and that folder's {@link folderMark} then. */
  private known?: { readonly reserved: Reserved; readonly folders: ReadonlyMap<string, string> };

  /**
   * @param root `estate.root` (absolute, resolved by config/load.ts)
   * @param reserved the broker's own files and folders, refused and unlisted inside the root
   *   (estate/index.ts `brokerOwnPaths`: `broker.dataDir`, the store's files, the records file and
   *   every name beside it that starts with its name and a dot)
   */
  constructor(
    readonly root: string,
    private readonly reserved: readonly ReservedPath[] = [],
  ) {}

  /**
   * {@link reserved} as they are now (a file may be rotated, a folder made, since the last call);
   * one `stat` each and of its folder, and for a reserved folder (`broker.dataDir`) the identity
   * of everything below it (the SQLite store and its journals), so a hard link to the store is
   * known as well as one to the records file; for a `{ prefix }` the identity of every entry of
   * its folder whose name starts with it (at most {@link MAX_RESERVED_BELOW}). A call that visits
   * many folders takes it once and passes it to {@link list} and {@link openIn}.
   *
   * Kept between calls: the answer is reused while every folder it was read from (the folder of
   * each reserved file, each reserved folder and every folder below it that was read) has the same
   * {@link folderMark} (device, inode, mtime and ctime, in ns), one `stat` each; any entry made,
   * removed or renamed in one of them changes its mtime and ctime, so the set is read again. A
   * hard link made in the root later is caught all the same: it adds a name in the root, and
   * the identity it shares is already known. An answer read while one of those folders had an
   * mtime within {@link RESERVED_SETTLE_MS} of now is not kept (a second change within the same
   * timestamp tick would leave the mark as it was).
   */
  async reservedNow(): Promise<Reserved> {
    const known = this.known;
    if (known && (await marksUnchanged(known.folders))) return known.reserved;
    const startedAt = Date.now();
    const folders = new Map<string, string>();
    let settled = true;
    /** `stat` of a folder the set is read from, its mark noted before anything in it is read. */
    /** Notes the mark of a folder the set is read from, from a `stat` taken before anything in it was read. */
    const note = (folder: string, s: BigIntStats | undefined) => {
      const mark = folderMark(s);
      const before = folders.get(folder);
      // Looked at twice and changed in between: what was read first may be stale, so never reuse it.
      folders.set(folder, before === undefined || before === mark ? mark : 'changed');
      // Any later change sets the mtime to its own time: only one within the same tick as this
      // mtime could leave the mark as it is (a ctime can be no older than the mtime unless set back).
      if (s && Number(s.mtimeNs / 1_000_000n) >= startedAt - RESERVED_SETTLE_MS) settled = false;
    };
    const look = async (folder: string): Promise<BigIntStats | undefined> => {
      const s = await stat(folder, { bigint: true }).catch(() => undefined);
      note(folder, s);
      return s;
    };
    const ids = new Set<string>();
    const names = new Set<string>();
    const prefixes = new Map<string, string[]>();
    await Promise.all(
      this.reserved.map(async (entry) => {
        if (typeof entry !== 'string') {
          const folder = dirname(entry.prefix);
          const prefix = basename(entry.prefix);
          const parent = await look(folder);
          if (!parent) return;
          const at = idOf(parent);
          prefixes.set(at, [...(prefixes.get(at) ?? []), prefix]);
          await idsStartingWith(folder, prefix, ids, MAX_RESERVED_BELOW);
          return;
        }
        const path = entry;
        // The folder's mark is taken before the file's identity, so a file replaced in between
        // shows in the next call's mark.
        const folder = dirname(path);
        const parent = await stat(folder, { bigint: true }).catch(() => undefined);
        const own = await stat(path).catch(() => undefined);
        if (own) ids.add(idOf(own));
        if (parent) names.add(`${idOf(parent)}/${basename(path)}`);
        // A reserved folder's own mark (idsBelow takes it, with its identity then) shows it
        // replaced or removed; a file, or a path not made yet, shows only in its folder's.
        if (own?.isDirectory()) await idsBelow(path, ids, MAX_RESERVED_BELOW, look);
        else note(folder, parent);
      }),
    );
    const reserved: Reserved = { ids, names, prefixes };
    this.known = settled ? { reserved, folders } : undefined;
    return reserved;
  }

  /**
   * Whether the root holds (or is) any of the broker's own files ({@link reserved}) now, by the
   * rule a symlink's absolute target is judged by ({@link within}): the real path of one is the
   * root's real path or below it. A path not made yet is judged by its folder's real path and its
   * name, one whose folder is missing too (as a missing root) as written. A hard link to one of
   * them under another name is not seen.
   */
  async holdsReserved(): Promise<boolean> {
    const root = await realpath(this.root).catch(() => resolve(this.root));
    const where = await Promise.all(
      this.reserved.map((entry) => {
        // A prefix is judged as a name in its folder: the folder is what the root may hold.
        const path = typeof entry === 'string' ? entry : entry.prefix;
        return realpath(path).catch(async () => join(await realpath(dirname(path)).catch(() => dirname(resolve(path))), basename(path)));
      }),
    );
    return where.some((at) => within(root, at));
  }

  /**
   * Opens an existing file or folder inside the root, following symlinks that stay inside
   * (`reserved` default: {@link reservedNow}).
   * Throws `estate_scope_escape`, {@link EstateNotFound}, or a one-line tool failure.
   */
  async open(path: string, expect: 'file' | 'dir' | 'any' = 'any', reserved?: Reserved): Promise<ScopedPath> {
    const walked = await this.walk(path, { follow: true, missingLast: false, reserved });
    const { dirs, names, final } = walked;
    try {
      if (final.kind === 'file') {
        if (expect === 'dir') throw new Error('the estate path names a file, not a folder');
        return { rel: relOf([...names, final.name]), stats: final.stats, handle: final.handle };
      }
      if (expect === 'file') throw new Error('the estate path names a folder, not a file');
      const stats = await dirs.at(-1)!.stat();
      return { rel: relOf(names), stats, handle: dirs.pop()! };
    } catch (err) {
      await closeWalk(walked);
      throw err;
    } finally {
      await closeAll(dirs);
    }
  }

  /**
   * Resolves where a proposal would write: the folder must exist inside the root; the file may
   * not exist yet, or is a regular file. `follow: true` (proposing) follows symlinks that stay
   * inside; `follow: false` (applying) refuses any symlink on the way, as `estate_scope_escape`.
   */
  async openWritable(path: string, options: { follow: boolean }): Promise<WritablePath> {
    if (checkLexically(path).length === 0) throw escape('names the estate root itself, not a file');
    const walked = await this.walk(path, { follow: options.follow, missingLast: true });
    const { dirs, names, final } = walked;
    if (final.kind === 'dir') {
      await closeWalk(walked);
      throw new Error('the estate path names a folder, not a file');
    }
    const dir = dirs.pop()!;
    await closeAll(dirs);
    const file = final.kind === 'file' ? { handle: final.handle, stats: final.stats } : undefined;
    return {
      rel: relOf([...names, final.name]),
      dir,
      dirRel: relOf(names),
      name: final.name,
      ...(file ? { file } : {}),
      close: async () => {
        await file?.handle.close().catch(() => undefined);
        await dir.close().catch(() => undefined);
      },
    };
  }

  /**
   * Replaces (or creates) `target` with `text`: a temp file created inside the held folder
   * (`O_CREAT | O_EXCL | O_NOFOLLOW`), written, given `mode` (permission bits) when set, fsynced,
   * then renamed over the name within that same folder, and the folder fsynced. Just before the
   * rename the held folder must still be the one at `dirRel` from the root, with no symlink on
   * the way (else `estate_scope_escape`: it moved since the check). `beforeRename` runs after
   * that check (a throw from either removes the temp file and writes nothing).
   */
  async writeAtomically(target: WritablePath, text: string, options: { mode?: number; beforeRename?: () => Promise<void> } = {}): Promise<void> {
    const temp = `.estate-tmp-${randomBytes(6).toString('hex')}`;
    let created = false;
    try {
      const handle = await open(fdPath(target.dir, temp), TEMP_FLAGS, 0o644);
      created = true;
      try {
        await handle.writeFile(text, 'utf8');
        if (options.mode !== undefined) await handle.chmod(options.mode);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await this.assertStillAt(target);
      await options.beforeRename?.();
      await rename(fdPath(target.dir, temp), fdPath(target.dir, target.name));
      created = false;
      await target.dir.sync();
    } catch (err) {
      if (created) await unlink(fdPath(target.dir, temp)).catch(() => undefined);
      throw fsFailure(err);
    }
  }

  /**
   * The entries of a held folder, sorted by name; the broker's own files left out by name and by
   * identity (`reserved` default: {@link reservedNow}), so a hard link to one of them under
   * another name is left out too. Each entry but a symlink is `lstat`ed for that (a symlink's own
   * identity is never one of them; reading through it is refused by {@link open}), and carries
   * that `lstat` as `stats`, so what is shown of it is what was checked (a second `lstat` could
   * meet another file swapped in since); an entry gone by then is left out.
   */
  async list(dir: FileHandle, reserved?: Reserved): Promise<ListedEntry[]> {
    try {
      const [entries, own, held] = await Promise.all([readdir(fdPath(dir, '.'), { withFileTypes: true }), reserved ?? this.reservedNow(), dir.stat()]);
      const at = idOf(held);
      const named = entries.filter((e) => !reservedName(own, at, e.name));
      const kept = await Promise.all(
        named.map(async (e): Promise<ListedEntry | undefined> => {
          if (e.isSymbolicLink()) return e;
          const s = await lstat(fdPath(dir, e.name)).catch(() => undefined);
          return s && !own.ids.has(idOf(s)) ? Object.assign(e, { stats: s }) : undefined;
        }),
      );
      return kept.filter((e): e is ListedEntry => e !== undefined).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    } catch (err) {
      throw fsFailure(err);
    }
  }

  /**
   * Opens one entry of a held folder without following a symlink, checked to be `kind`;
   * undefined when it is anything else, gone, or one of the broker's own files by identity
   * (`reserved`, a hard link to the records file included). The caller closes the handle.
   */
  async openIn(dir: FileHandle, name: string, kind: 'file' | 'dir', reserved: Reserved): Promise<{ handle: FileHandle; stats: Stats } | undefined> {
    let handle: FileHandle;
    try {
      handle = await open(fdPath(dir, name), kind === 'dir' ? DIR_FLAGS : FILE_FLAGS);
    } catch {
      return undefined;
    }
    const stats = await handle.stat().catch(() => undefined);
    if (stats && (kind === 'dir' ? stats.isDirectory() : stats.isFile()) && !reserved.ids.has(idOf(stats))) return { handle, stats };
    await handle.close().catch(() => undefined);
    return undefined;
  }

  /** Throws `estate_scope_escape` unless `target.dir` is still the folder at `target.dirRel`, reached without a symlink. */
  private async assertStillAt(target: WritablePath): Promise<void> {
    const held = await target.dir.stat();
    let walked: Walked;
    try {
      walked = await this.walk(target.dirRel, { follow: false, missingLast: false });
    } catch {
      throw escape('changed while it was being written (its folder moved); nothing was written');
    }
    const now = walked.final.kind === 'dir' ? await walked.dirs.at(-1)!.stat() : undefined;
    await closeWalk(walked);
    if (!now || now.dev !== held.dev || now.ino !== held.ino) throw escape('changed while it was being written (its folder moved); nothing was written');
  }

  /** The root, opened again and checked to be the folder found at first use. */
  private async openRoot(): Promise<FileHandle> {
    if (!this.rootId) {
      let real: string;
      try {
        real = await realpath(this.root);
      } catch {
        throw new Error('the estate root does not exist');
      }
      const handle = await open(real, DIR_FLAGS).catch(() => undefined);
      if (!handle) throw new Error('the estate root is not a folder that can be opened');
      try {
        const s = await handle.stat();
        // Everything below is opened through /proc/self/fd: without it, refuse rather than guess.
        const viaProc = await stat(fdPath(handle, '.')).catch(() => undefined);
        if (!viaProc || viaProc.ino !== s.ino || viaProc.dev !== s.dev) throw new Error('the estate relay needs /proc/self/fd (Linux)');
        this.rootId = { real, dev: s.dev, ino: s.ino };
        return handle;
      } catch (err) {
        await handle.close();
        throw err;
      }
    }
    const id = this.rootId;
    let handle: FileHandle;
    try {
      handle = await open(id.real, DIR_FLAGS);
    } catch {
      throw new Error('the estate root does not exist any more');
    }
    const s = await handle.stat();
    if (s.dev !== id.dev || s.ino !== id.ino) {
      await handle.close();
      throw new Error('the estate root was replaced since the broker first used it');
    }
    return handle;
  }

  /** Resolves `path` component by component from the root; see the module comment. */
  private async walk(path: string, options: { follow: boolean; missingLast: boolean; reserved?: Reserved }): Promise<Walked> {
    const queue: Step[] = checkLexically(path).map((name) => ({ name, fromLink: false }));
    const reserved = options.reserved ?? (await this.reservedNow());
    const refuseReserved = (id: string | undefined, inDir: Stats | undefined, name: string) => {
      if ((id !== undefined && reserved.ids.has(id)) || (inDir !== undefined && reservedName(reserved, idOf(inDir), name))) {
        throw escape("names the broker's own data (broker.dataDir, broker.records.path), which is no part of the estate");
      }
    };
    const dirs = [await this.openRoot()];
    const names: string[] = [];
    let hops = 0;
    try {
      // The root itself may be the broker's data folder.
      refuseReserved(idOf(await dirs[0]!.stat()), undefined, '');
      while (queue.length > 0) {
        const { name, fromLink } = queue.shift()!;
        if (name === '' || name === '.') continue;
        if (name === '..') {
          // Only a symlink's target gets here: the path itself may not hold "..".
          if (dirs.length === 1) throw escape('resolves outside the estate root');
          await dirs.pop()!.close();
          names.pop();
          continue;
        }
        if (Buffer.byteLength(name) > MAX_NAME_BYTES) throw new Error(`a name in the estate path is longer than ${MAX_NAME_BYTES} bytes`);
        // A reserved name is refused before it is looked up, so that it answers the same whether
        // it exists or not (which rotations exist tells how much was recorded).
        const inDir = await dirs.at(-1)!.stat();
        refuseReserved(undefined, inDir, name);
        const at = fdPath(dirs.at(-1)!, name);
        let link: Stats;
        try {
          link = await lstat(at);
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code !== 'ENOENT') throw fsFailure(err);
          // A symlink whose target is missing cannot be shown to stay inside: refuse it.
          if (fromLink) throw escape('is a symlink that leads nowhere');
          if (queue.length === 0 && options.missingLast) return { dirs, names, final: { kind: 'missing', name } };
          throw new EstateNotFound();
        }
        if (link.isSymbolicLink()) {
          if (!options.follow) throw escape('has a symlink on its way; writes follow none');
          if (++hops > MAX_SYMLINK_HOPS) throw escape('is a symlink loop');
          const target = await readlink(at).catch((err: unknown) => {
            throw fsFailure(err);
          });
          let next = target;
          if (target.startsWith('/')) {
            const root = this.rootId!.real;
            if (!within(root, target)) throw escape('resolves outside the estate root');
            while (dirs.length > 1) await dirs.pop()!.close();
            names.length = 0;
            next = target.slice(root.length);
          }
          queue.unshift(...next.split('/').map((n) => ({ name: n, fromLink: true })));
          continue;
        }
        if (link.isDirectory()) {
          refuseReserved(idOf(link), undefined, name);
          dirs.push(await openChecked(at, DIR_FLAGS, link));
          names.push(name);
          continue;
        }
        // A file in the middle of the path (ENOTDIR): there is nothing below it.
        if (queue.length > 0) throw new EstateNotFound();
        if (!link.isFile()) throw escape('is not a regular file or a folder');
        refuseReserved(idOf(link), undefined, name);
        const handle = await openChecked(at, FILE_FLAGS, link);
        return { dirs, names, final: { kind: 'file', name, handle, stats: await handle.stat() } };
      }
      return { dirs, names, final: { kind: 'dir' } };
    } catch (err) {
      await closeAll(dirs);
      throw err;
    }
  }
}

/** The path's segments, with `.` and empty segments dropped; throws `estate_scope_escape` for what is never allowed. */
export function checkLexically(path: unknown): string[] {
  if (typeof path !== 'string') throw escape('is not a string');
  if (path.includes('\0')) throw escape('contains a NUL byte');
  if (path.includes('\\')) throw escape('contains a backslash');
  if (path.startsWith('/') || /^[A-Za-z]:/.test(path)) throw escape('is absolute; estate paths are relative to the estate root');
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) throw new Error(`the estate path is longer than ${MAX_PATH_BYTES} bytes`);
  const segments = path.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) throw escape('contains a ".." segment');
  return segments;
}

/** Most entries below a reserved folder whose identities {@link EstateScope.reservedNow} takes. */
export const MAX_RESERVED_BELOW = 10_000;

/**
 * How long, in ms, a folder {@link EstateScope.reservedNow} reads from must have been unchanged
 * (its mtime before the read began) for its answer to be kept: well above the tick of file
 * timestamps (a jiffy, at most 10 ms, on Linux) and small clock differences with a file server.
 */
export const RESERVED_SETTLE_MS = 2_000;

/** What a folder is now, as {@link EstateScope.reservedNow} compares it: `-` when it is missing. */
function folderMark(s: BigIntStats | undefined): string {
  return s ? `${s.dev}:${s.ino}:${s.mtimeNs}:${s.ctimeNs}` : '-';
}

/** Whether every folder still has the mark it had (one `stat` each, at once). */
async function marksUnchanged(folders: ReadonlyMap<string, string>): Promise<boolean> {
  const now = await Promise.all([...folders].map(async ([folder, mark]) => folderMark(await stat(folder, { bigint: true }).catch(() => undefined)) === mark));
  return now.every(Boolean);
}

/**
 * Adds the identity of every entry below the folder `path` (symlinks not followed) to `ids`, at
 * most `budget` of them; returns what is left of the budget. A folder that cannot be read is
 * skipped (its own identity is already reserved, so nothing in it can be reached by name). `look`
 * is told of each folder, `path` included (whose identity it answers is added), before it is read.
 */
async function idsBelow(path: string, ids: Set<string>, budget: number, look: (folder: string) => Promise<BigIntStats | undefined>): Promise<number> {
  const own = await look(path);
  if (own) ids.add(idOf(own));
  let entries: Dirent[];
  try {
    entries = await readdir(path, { withFileTypes: true });
  } catch {
    return budget;
  }
  for (const e of entries) {
    if (budget <= 0) return 0;
    budget--;
    if (e.isSymbolicLink()) continue;
    const at = join(path, e.name);
    const s = await lstat(at).catch(() => undefined);
    if (!s) continue;
    ids.add(idOf(s));
    if (s.isDirectory()) budget = await idsBelow(at, ids, budget, look);
  }
  return budget;
}

/**
 * Adds the identity of every entry of the folder `path` whose name starts with `prefix` (symlinks
 * not followed) to `ids`, at most `budget` of them. A folder that cannot be read adds nothing.
 */
async function idsStartingWith(path: string, prefix: string, ids: Set<string>, budget: number): Promise<void> {
  let entries: string[];
  try {
    entries = (await readdir(path)).filter((name) => name.startsWith(prefix)).slice(0, budget);
  } catch {
    return;
  }
  await Promise.all(
    entries.map(async (name) => {
      const s = await lstat(join(path, name)).catch(() => undefined);
      if (s) ids.add(idOf(s));
    }),
  );
}

/** Whether the absolute path `path` is `root` (a real path) or below it, compared as written. */
function within(root: string, path: string): boolean {
  return path === root || path.startsWith(root.endsWith('/') ? root : `${root}/`);
}

/** Opens `at` (no symlink followed) and checks it is still what `lstat` saw. */
async function openChecked(at: string, flags: number, seen: Stats): Promise<FileHandle> {
  let handle: FileHandle;
  try {
    handle = await open(at, flags);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP' || code === 'ENOTDIR' || code === 'ENOENT') throw escape('changed while it was resolved');
    throw fsFailure(err);
  }
  const now = await handle.stat();
  if (now.dev !== seen.dev || now.ino !== seen.ino) {
    await handle.close();
    throw escape('changed while it was resolved');
  }
  return handle;
}

/** `name` inside the held folder `dir`, as a path the kernel resolves from that folder. */
function fdPath(dir: FileHandle, name: string): string {
  return `/proc/self/fd/${dir.fd}/${name}`;
}

function relOf(names: readonly string[]): string {
  return names.length === 0 ? '.' : names.join('/');
}

async function closeAll(handles: FileHandle[]): Promise<void> {
  for (const h of handles.splice(0)) await h.close().catch(() => undefined);
}

async function closeWalk(walked: Walked): Promise<void> {
  await closeAll(walked.dirs);
  if (walked.final.kind === 'file') await walked.final.handle.close().catch(() => undefined);
}

/**
 * A file system error as one line without any path (Node's messages carry the path it was
 * given: here a `/proc/self/fd` path, before this a path under the root). Our own errors pass.
 */
function fsFailure(err: unknown): Error {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (err instanceof BrokerError || err instanceof EstateNotFound || typeof code !== 'string') return err as Error;
  if (code === 'ENOENT' || code === 'ENOTDIR') return new EstateNotFound();
  if (code === 'ELOOP') return escape('changed while it was resolved');
  if (code === 'ENAMETOOLONG') return new Error('a name in the estate path is too long');
  if (code === 'EACCES' || code === 'EPERM') return new Error('permission denied in the estate');
  if (code === 'EISDIR') return new Error('the estate path names a folder, not a file');
  return new Error(`the estate file system failed (${code})`);
}

/** The refusal; the message says why, never the path itself (an argument value). */
function escape(why: string): BrokerError {
  return new BrokerError('estate_scope_escape', `the estate path ${why}`);
}
