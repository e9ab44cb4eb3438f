/**
 * The estate's scope: every path an `estate__*` tool touches is resolved here, inside
 * `estate.root` (seed 002_7bce204a86c1c7ba.txt, "the reserved `estate` relay"; issue 4).
 *
 * A path is relative and `/`-separated. Refused with `BrokerError('estate_scope_escape')` (the
 * invoke stage answers `guard_error`, reason `estate_scope_escape: …`), before anything is read:
 *  - an absolute path (`/x`, `C:\x`, `\\host\x`), a NUL byte, a backslash, any `..` segment;
 *  - a path whose real path (`realpath`, every symlink followed) is not the root or below it;
 *  - a symlink that leads nowhere (it cannot be proven to stay inside);
 *  - anything that is not a regular file or a directory (FIFOs, sockets, devices).
 * Nothing is decoded: `%2e%2e%2f` is a file name of nine characters, inside the root.
 * Files are opened with `O_NOFOLLOW | O_NONBLOCK` on the resolved real path and checked again
 * with `fstat` (same inode, regular file), so a swap between check and open is refused too.
 */
import { constants, type Stats } from 'node:fs';
import { lstat, open, realpath, stat, type FileHandle } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { BrokerError } from '../../shared/errors.js';

/** A resolved path inside the root. */
export interface ScopedPath {
  /** Absolute real path. */
  readonly abs: string;
  /** Relative to the root's real path, `/`-separated; `.` for the root. */
  readonly rel: string;
  readonly stats: Stats;
}

/** A path a proposal may write: the real path of the file, or where a new file would go. */
export interface WritablePath {
  readonly abs: string;
  readonly rel: string;
  /** Undefined when the file does not exist yet. */
  readonly stats?: Stats;
}

/** Thrown for a path inside the scope that does not exist; the tool's own failure (`tool_error`). */
export class EstateNotFound extends Error {
  constructor(rel: string) {
    super(`no such file or directory in the estate: ${rel}`);
    this.name = 'EstateNotFound';
  }
}

export class EstateScope {
  private rootReal?: string;

  /** `root` is `estate.root` (absolute, resolved by config/load.ts). */
  constructor(readonly root: string) {}

  /** The real path of the root; throws (a tool failure) when it does not exist or is not a folder. */
  async realRoot(): Promise<string> {
    if (this.rootReal) return this.rootReal;
    let real: string;
    try {
      real = await realpath(this.root);
    } catch {
      throw new Error(`the estate root ${this.root} does not exist`);
    }
    if (!(await stat(real)).isDirectory()) throw new Error(`the estate root ${this.root} is not a folder`);
    this.rootReal = real;
    return real;
  }

  /** Resolves an existing file or folder inside the root. Throws `estate_scope_escape` or {@link EstateNotFound}. */
  async resolve(path: string, expect: 'file' | 'dir' | 'any' = 'any'): Promise<ScopedPath> {
    const segments = checkLexically(path);
    const root = await this.realRoot();
    const joined = join(root, ...segments);
    let real: string;
    try {
      real = await realpath(joined);
    } catch (err) {
      throw await this.notFoundOrEscape(err, joined, path);
    }
    this.assertInside(root, real, path);
    const stats = await stat(real);
    if (!stats.isFile() && !stats.isDirectory()) throw escape(path, 'is not a regular file or a folder');
    if (expect === 'file' && !stats.isFile()) throw new Error(`${path} is a folder, not a file`);
    if (expect === 'dir' && !stats.isDirectory()) throw new Error(`${path} is a file, not a folder`);
    return { abs: real, rel: relativeOf(root, real), stats };
  }

  /**
   * Resolves where a proposal would write: the folder must exist inside the root; the file may
   * not exist yet, or is a regular file (through a symlink only when that stays inside).
   */
  async resolveWritable(path: string): Promise<WritablePath> {
    const segments = checkLexically(path);
    if (segments.length === 0) throw escape(path, 'names the estate root itself, not a file');
    const root = await this.realRoot();
    const parent = await this.resolve(segments.slice(0, -1).join('/') || '.', 'dir');
    const name = segments[segments.length - 1]!;
    const joined = join(parent.abs, name);
    let link: Stats;
    try {
      link = await lstat(joined);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { abs: joined, rel: relativeOf(root, joined) };
      throw err;
    }
    if (link.isSymbolicLink() || link.isFile()) {
      const target = await this.resolve(path, 'file');
      return { abs: target.abs, rel: target.rel, stats: target.stats };
    }
    if (link.isDirectory()) throw new Error(`${path} is a folder, not a file`);
    throw escape(path, 'is not a regular file');
  }

  /**
   * Opens a resolved file for reading; the handle is checked to be the same regular file.
   * The caller closes it.
   */
  async openFile(file: ScopedPath | WritablePath): Promise<FileHandle> {
    let handle: FileHandle;
    try {
      handle = await open(file.abs, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ELOOP') throw escape(file.rel, 'became a symlink');
      if (code === 'ENOENT') throw new EstateNotFound(file.rel);
      throw err;
    }
    const now = await handle.stat();
    if (!now.isFile() || (file.stats && (now.ino !== file.stats.ino || now.dev !== file.stats.dev))) {
      await handle.close();
      throw escape(file.rel, 'changed while it was opened');
    }
    return handle;
  }

  /** Whether a real path is the root or below it. */
  isInside(real: string): boolean {
    const root = this.rootReal;
    return root !== undefined && (real === root || real.startsWith(root.endsWith(sep) ? root : root + sep));
  }

  private assertInside(root: string, real: string, path: string): void {
    if (real !== root && !real.startsWith(root.endsWith(sep) ? root : root + sep)) throw escape(path, 'resolves outside the estate root');
  }

  private async notFoundOrEscape(err: unknown, joined: string, path: string): Promise<Error> {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') return escape(path, 'is a symlink loop');
    if (code !== 'ENOENT' && code !== 'ENOTDIR') return err as Error;
    // A dangling symlink (anywhere on the way) cannot be shown to stay inside: refuse it.
    try {
      if ((await lstat(joined)).isSymbolicLink()) return escape(path, 'is a symlink that leads nowhere');
    } catch {
      /* nothing at that path */
    }
    return new EstateNotFound(path);
  }
}

/** The path's segments, with `.` and empty segments dropped; throws `estate_scope_escape` for what is never allowed. */
export function checkLexically(path: unknown): string[] {
  if (typeof path !== 'string') throw escape(String(path), 'is not a string');
  if (path.includes('\0')) throw escape(path, 'contains a NUL byte');
  if (path.includes('\\')) throw escape(path, 'contains a backslash');
  if (path.startsWith('/') || /^[A-Za-z]:/.test(path)) throw escape(path, 'is absolute; estate paths are relative to the estate root');
  const segments = path.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) throw escape(path, 'contains a ".." segment');
  return segments;
}

function relativeOf(root: string, real: string): string {
  if (real === root) return '.';
  return real.slice(root.length + (root.endsWith(sep) ? 0 : 1)).split(sep).join('/');
}

/** The refusal; the message says why, never the path itself (an argument value). */
function escape(_path: string, why: string): BrokerError {
  return new BrokerError('estate_scope_escape', `the estate path ${why}`);
}
