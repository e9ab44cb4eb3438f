/**
 * Creating a folder and its missing parents, failing fast where one cannot be made.
 */
import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Makes the folder `dir` and any missing parents, like `mkdirSync(dir, {recursive: true})`, and
 * throws the `mkdir` error (`ENOENT`, `ENOTDIR`, `EACCES`, `EROFS`, …) where a folder cannot be
 * made. Each folder is tried at most twice: Node's recursive `mkdir` loops for ever where `mkdir`
 * answers `ENOENT` under a parent that exists (`/proc/self/x`, other pseudo file systems).
 * An existing folder is success; an existing file at `dir` throws `EEXIST`.
 */
export function makeFolderSync(dir: string): void {
  try {
    mkdirSync(dir);
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && isFolder(dir)) return;
    const parent = dirname(dir);
    if (code !== 'ENOENT' || parent === dir) throw err;
    makeFolderSync(parent);
  }
  // The parent exists now; an ENOENT from here on is this file system refusing the folder.
  try {
    mkdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST' && isFolder(dir)) return;
    throw err;
  }
}

function isFolder(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false })?.isDirectory() ?? false;
}
