/**
 * The estate snapshot (`snapshot: "estate"`) and the broker's own files inside the root: a hard
 * link to the records file is never saved, and a restore neither deletes it, nor writes over it,
 * nor puts it back as a plain file (it put back the audit records as an estate file). Real
 * folders, real hard links, real git.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, linkSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { takeSnapshot, type OwnFiles } from '../../src/flows/snapshot.js';

const RECORDS = '{"callId":"c1","principal":"alice","args":{"text":"ALICE-PRIVATE"}}\n';

let base: string;
let root: string;
let records: string;
/** The records file by identity, as EstateScope.reservedNow().ids gives it. */
const own: OwnFiles = async () => {
  const s = statSync(records);
  return new Set([`${s.dev}:${s.ino}`]);
};

beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'mcp-broker-snapshot-test-'));
  root = join(base, 'root');
  records = join(base, 'calls.ndjson');
  mkdirSync(join(root, 'notes'), { recursive: true });
  writeFileSync(records, RECORDS);
  writeFileSync(join(root, 'keep.txt'), 'before');
  writeFileSync(join(root, 'replaced.txt'), 'saved');
  writeFileSync(join(root, 'notes', 'plain.txt'), 'plain');
  writeFileSync(join(root, 'run.sh'), '#!/bin/sh\n');
  chmodSync(join(root, 'run.sh'), 0o751);
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

const sameAsRecords = (path: string) => lstatSync(path).ino === lstatSync(records).ino;

describe('an estate snapshot and a hard link to the records file', () => {
  for (const kind of ['copy', 'git'] as const) {
    it(`is not saved, not removed, not written over and not put back as a plain file (${kind})`, async () => {
      if (kind === 'git') {
        execFileSync('git', ['init', '-q', root]);
        execFileSync('git', ['-C', root, '-c', 'user.email=t@t', '-c', 'user.name=t', 'commit', '-q', '--allow-empty', '-m', 'init']);
      }
      linkSync(records, join(root, 'notes', 'today.txt'));
      const snapshot = await takeSnapshot(root, own);
      try {
        expect(snapshot.kind).toBe(kind);
        // What a failed flow's steps did meanwhile: changed a file, removed the link, made a new
        // link elsewhere, and put a link where a saved file was.
        writeFileSync(join(root, 'keep.txt'), 'after');
        unlinkSync(join(root, 'notes', 'today.txt'));
        mkdirSync(join(root, 'made'));
        linkSync(records, join(root, 'made', 'later.txt'));
        writeFileSync(join(root, 'made', 'other.txt'), 'created since');
        unlinkSync(join(root, 'replaced.txt'));
        linkSync(records, join(root, 'replaced.txt'));
        await snapshot.restore();
      } finally {
        await snapshot.discard();
      }
      expect(readFileSync(join(root, 'keep.txt'), 'utf8')).toBe('before');
      expect(readFileSync(join(root, 'notes', 'plain.txt'), 'utf8')).toBe('plain');
      // Git keeps only the executable bit.
      expect(statSync(join(root, 'run.sh')).mode & 0o777).toBe(kind === 'copy' ? 0o751 : 0o755);
      // Not saved, so not put back (as a plain file of old records, or at all).
      expect(existsSync(join(root, 'notes', 'today.txt'))).toBe(false);
      // The broker's own are left where they are, as they are; what else was created is gone.
      expect(sameAsRecords(join(root, 'made', 'later.txt'))).toBe(true);
      expect(existsSync(join(root, 'made', 'other.txt'))).toBe(false);
      expect(sameAsRecords(join(root, 'replaced.txt'))).toBe(true);
      expect(readFileSync(records, 'utf8')).toBe(RECORDS);
      if (kind === 'git') {
        const objects = execFileSync('git', ['-C', root, 'cat-file', '--batch-all-objects', '--batch']).toString();
        expect(objects).not.toContain('ALICE-PRIVATE');
      }
    });
  }

  it('a copy snapshot refuses a FIFO, as cp did', async () => {
    execFileSync('mkfifo', [join(root, 'notes', 'pipe')]);
    await expect(takeSnapshot(root, own)).rejects.toThrow(/FIFO/);
  });
});
