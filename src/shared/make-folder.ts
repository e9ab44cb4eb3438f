/**
 * Creating a folder and its missing parents, failing fast where one cannot be made.
 */
import { mkdirSync, rmdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Makes the folder `dir` and any missing parents, like `mkdirSync(dir, {recursive: true})`, and
 * throws the `mkdir` error (`ENOENT`, `ENOTDIR`, `EACCES`, `EROFS`, …) where a folder cannot be
 * made. Each folder is tried at most twice: Node's recursive `mkdir` loops for ever where `mkdir`
 * answers `ENOENT` under a parent that exists (`/proc/self/x`, other pseudo file systems).
 * An existing folder is success; an existing file at `dir` throws `EEXIST`.
 *
 * @param made the folders made are pushed here, outermost first
 */
export function makeFolderSync(dir: string, made?: string[]): void {
  try {
    mkdirSync(dir);
    made?.push(dir);
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && isFolder(dir)) return;
    const parent = dirname(dir);
    if (code !== 'ENOENT' || parent === dir) throw err;
    makeFolderSync(parent, made);
  }
  // The parent exists now; an ENOENT from here on is this file system refusing the folder.
  try {
    mkdirSync(dir);
    made?.push(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST' && isFolder(dir)) return;
    throw err;
  }
}

/**
 * Whether {@link makeFolderSync} can make `dir`, found without leaving anything behind: throws
 * what it would throw; else the folders it made are removed again (innermost first; one that is
 * no longer empty stays). Returns true when `dir` already was a folder, false when it was made
 * (and removed) here.
 */
export function probeFolderSync(dir: string): boolean {
  if (isFolder(dir)) return true;
  const made: string[] = [];
  try {
    makeFolderSync(dir, made);
  } finally {
    for (const folder of made.reverse()) {
      try {
        rmdirSync(folder);
      } catch {
        // Something was put in it meanwhile (a broker starting on it): it stays.
      }
    }
  }
  return made.length === 0;
}

/** Whether `path` is a folder; false also when it cannot be looked at (`ENOTDIR`: a file on the way). */
function isFolder(path: string): boolean {
  try {
    return statSync(path, { throwIfNoEntry: false })?.isDirectory() ?? false;
  } catch {
    return false;
  }
}
