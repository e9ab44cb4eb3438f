/**
 * makeFolderSync: `mkdir -p` that fails fast where Node's recursive mkdir spins (a parent that
 * exists but takes no folder, as under /proc).
 */
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeFolderSync, probeFolderSync } from '../../src/shared/make-folder.js';

describe('makeFolderSync', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-make-folder-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('makes a folder and its missing parents; a folder that exists is success', () => {
    const deep = join(dir, 'a', 'b', 'c');
    makeFolderSync(deep);
    expect(statSync(deep).isDirectory()).toBe(true);
    makeFolderSync(deep);
    makeFolderSync(dir);
  });

  it('takes a relative path', () => {
    const deep = join(dir, 'r', 's');
    makeFolderSync(relative(process.cwd(), deep));
    expect(statSync(deep).isDirectory()).toBe(true);
  });

  it('throws ENOTDIR for a file on the way and EEXIST for a file at the path', () => {
    const file = join(dir, 'file');
    writeFileSync(file, 'x');
    expect(() => makeFolderSync(join(file, 'sub', 'deeper'))).toThrow(expect.objectContaining({ code: 'ENOTDIR' }));
    expect(() => makeFolderSync(file)).toThrow(expect.objectContaining({ code: 'EEXIST' }));
  });

  it.skipIf(process.platform !== 'linux')('throws ENOENT at once under /proc, where mkdir -p would loop for ever', () => {
    expect(() => makeFolderSync('/proc/self/mcp-broker-none/deeper')).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    expect(() => makeFolderSync('/proc/self/mcp-broker-none')).toThrow(/mkdir '\/proc\/self\/mcp-broker-none'/);
  });
});

describe('probeFolderSync', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-probe-folder-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('answers whether the folder was there, and removes again the folders it made', () => {
    expect(probeFolderSync(dir)).toBe(true);
    expect(probeFolderSync(join(dir, 'a', 'b', 'c'))).toBe(false);
    expect(existsSync(join(dir, 'a'))).toBe(false);
  });

  it('throws what makeFolderSync throws, and leaves nothing it made on the way', () => {
    const file = join(dir, 'file');
    writeFileSync(file, 'x');
    expect(() => probeFolderSync(join(file, 'sub'))).toThrow(expect.objectContaining({ code: 'ENOTDIR', syscall: 'mkdir' }));
    expect(() => probeFolderSync(file)).toThrow(expect.objectContaining({ code: 'EEXIST' }));
    if (process.platform === 'linux') expect(() => probeFolderSync('/proc/self/mcp-broker-none/deeper')).toThrow(expect.objectContaining({ code: 'ENOENT' }));
  });
});
