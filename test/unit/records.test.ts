import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, fdatasyncSync, mkdirSync, mkdtempSync, readFileSync, rmSync, renameSync, statfsSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { build as esbuild } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';
import { readRecords, recordFiles } from '../../src/audit/query.js';
import { NdjsonRecordSink, type NdjsonSinkOptions, type RecordSink } from '../../src/audit/records.js';
import { Broker } from '../../src/broker/broker.js';
import { invokeStage } from '../../src/broker/invoke.js';
import { recordStage } from '../../src/broker/record.js';
import type { Stage } from '../../src/broker/runner.js';
import { refuse, type CallerSession, type ToolTarget } from '../../src/broker/types.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';

const root = mkdtempSync(join(tmpdir(), 'mcp-broker-records-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
/** An error as node:fs throws it, with its code and system call. */
const fsError = (code: string, syscall: string) => Object.assign(new Error(`${code}: injected, ${syscall}`), { code, syscall });
const freshPath = () => join(root, `case-${++n}`, 'calls.ndjson');
const lines = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { i: number; pad?: string });

describe('NdjsonRecordSink', () => {
  it('group commit: appends that arrive during a write go out together, in order, each resolved once written', async () => {
    // Count event-loop turns: a sink writing one line per write needs a turn per line; group
    // commit resolves everything queued behind the first write in one go.
    let turn = 0;
    let spinning = true;
    const spin = () => {
      if (!spinning) return;
      turn++;
      setImmediate(spin);
    };
    spin();
    const path = freshPath();
    const sink = new NdjsonRecordSink({ path });
    const turns = await Promise.all(Array.from({ length: 200 }, (_, i) => sink.append({ i }).then(() => turn)));
    spinning = false;
    await sink.close();
    expect(lines(path).map((l) => l.i)).toEqual(Array.from({ length: 200 }, (_, i) => i));
    expect(new Set(turns).size).toBeLessThanOrEqual(5);
  });

  it('rotates past maxBytes, keeping maxFiles older files and dropping the oldest', async () => {
    const path = freshPath();
    const sink = new NdjsonRecordSink({ path, maxBytes: 300, maxFiles: 2 });
    const pad = 'x'.repeat(80); // each line is about 100 bytes: 3 fit in one file
    for (let i = 0; i < 20; i++) await sink.append({ i, pad });
    await sink.close();
    expect(existsSync(path)).toBe(true);
    expect(existsSync(`${path}.1`)).toBe(true);
    expect(existsSync(`${path}.2`)).toBe(true);
    expect(existsSync(`${path}.3`)).toBe(false);
    for (const p of [path, `${path}.1`, `${path}.2`]) expect(readFileSync(p).length).toBeLessThanOrEqual(300);
    const kept = [...lines(`${path}.2`), ...lines(`${path}.1`), ...lines(path)].map((l) => l.i);
    // The newest records, contiguous and in order, ending with the last one.
    expect(kept.at(-1)).toBe(19);
    for (let k = 1; k < kept.length; k++) expect(kept[k]).toBe(kept[k - 1]! + 1);
  });

  it('scrubs each record before it is written', async () => {
    const path = freshPath();
    const sink = new NdjsonRecordSink({ path, scrub: <T>(v: T) => JSON.parse(JSON.stringify(v).replaceAll('hunter2', '***')) as T });
    await sink.append({ i: 1, args: { password: 'hunter2' } });
    await sink.close();
    expect(readFileSync(path, 'utf8')).not.toContain('hunter2');
  });

  it('fails closed: an append that cannot be written rejects; the sink recovers once the file is writable', async () => {
    const path = freshPath();
    mkdirSync(path, { recursive: true }); // the file name is taken by a folder
    const sink = new NdjsonRecordSink({ path });
    await expect(sink.append({ i: 1 })).rejects.toThrow(/EISDIR|illegal operation/i);
    // Both must settle before the path is freed, or the second could land after the rm.
    const settled = await Promise.allSettled([sink.append({ i: 2 }), sink.append({ i: 3 })]);
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected']);
    rmSync(path, { recursive: true });
    await sink.append({ i: 4 });
    await sink.close();
    expect(lines(path).map((l) => l.i)).toEqual([4]);
    await expect(sink.append({ i: 5 })).rejects.toThrow(/closed/);
  });
});

describe('issue 12: records are never lost silently', () => {
  /** Every line of the file, parsed or kept as the raw fragment it is. */
  const rawLines = (path: string) =>
    readFileSync(path, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        try {
          return JSON.parse(l) as { i: number };
        } catch {
          return l;
        }
      });

  it('a records file deleted while the sink runs is made again at the path; records do not go to the deleted inode', async () => {
    const path = freshPath();
    const warned: string[] = [];
    const logger = { warn: (msg: string) => void warned.push(msg) } as unknown as NonNullable<NdjsonSinkOptions['logger']>;
    const sink = new NdjsonRecordSink({ path, logger });
    await sink.append({ i: 1 });
    rmSync(path);
    await sink.append({ i: 2 });
    await sink.close();
    expect(lines(path).map((l) => l.i)).toEqual([2]);
    expect(warned).toEqual(['records file at broker.records.path was deleted or replaced; opening the path again']);
  });

  it('a records file replaced by a folder refuses the batch (no absolute path in the error), and recording recovers once the path is a file again', async () => {
    const path = freshPath();
    const sink = new NdjsonRecordSink({ path });
    await sink.append({ i: 1 });
    rmSync(path);
    mkdirSync(path);
    const refused = await sink.append({ i: 2 }).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(refused?.message).toMatch(/EISDIR/);
    expect(refused?.message).not.toContain(root);
    expect(refused?.message).not.toMatch(/\n/);
    rmSync(path, { recursive: true });
    await sink.append({ i: 3 });
    await sink.close();
    expect(lines(path).map((l) => l.i)).toEqual([3]);
  });

  it('a records file replaced by another file: records are appended to the file now at the path', async () => {
    const path = freshPath();
    const sink = new NdjsonRecordSink({ path });
    await sink.append({ i: 1 });
    writeFileSync(`${path}.new`, '{"i":100}\n');
    renameSync(`${path}.new`, path);
    await sink.append({ i: 2 });
    await sink.close();
    expect(lines(path).map((l) => l.i)).toEqual([100, 2]);
  });

  it('disk full (injected short write): the refused batch is cut back, and the next record is not glued to a half line', async () => {
    const path = freshPath();
    let full = false;
    const sink = new NdjsonRecordSink({
      path,
      fs: {
        writeSync: (fd, buffer, offset, length) => {
          if (!full) return writeSync(fd, buffer, offset, length);
          if (offset === 0) return writeSync(fd, buffer, 0, Math.floor(length / 2));
          throw fsError('ENOSPC', 'write');
        },
      },
    });
    await sink.append({ i: 1 });
    full = true;
    await expect(sink.append({ i: 2, pad: 'x'.repeat(200) })).rejects.toThrow(/could not be written \(ENOSPC\)/);
    expect(readFileSync(path, 'utf8')).toBe('{"i":1}\n');
    full = false;
    await sink.append({ i: 3 });
    await sink.close();
    expect(rawLines(path)).toEqual([{ i: 1 }, { i: 3 }]);
  });

  it('fsync "batch": the lines of one turn are flushed to the disk once, after they are written and before any of their appends resolves', async () => {
    const path = freshPath();
    const flushed: string[] = [];
    let resolved = 0;
    const sink = new NdjsonRecordSink({
      path,
      fsync: 'batch',
      fs: {
        fdatasyncSync: (fd) => {
          fdatasyncSync(fd);
          flushed.push(`${readFileSync(path, 'utf8').split('\n').length - 1} lines, ${resolved} resolved`);
        },
      },
    });
    await Promise.all([1, 2, 3].map((i) => sink.append({ i }).then(() => resolved++)));
    await sink.append({ i: 4 });
    await sink.close();
    expect(flushed).toEqual(['3 lines, 0 resolved', '4 lines, 3 resolved']);
    expect(lines(path).map((l) => l.i)).toEqual([1, 2, 3, 4]);
  });

  it('fsync "never" (the default) never flushes to the disk', async () => {
    const path = freshPath();
    let flushes = 0;
    const sink = new NdjsonRecordSink({ path, fs: { fdatasyncSync: () => void flushes++ } });
    await sink.append({ i: 1 });
    await sink.close();
    expect(flushes).toBe(0);
    expect(lines(path).map((l) => l.i)).toEqual([1]);
  });

  it('fsync "batch": a flush that fails refuses the whole batch and cuts it back out of the file; the next batch is written', async () => {
    const path = freshPath();
    let failing = false;
    const sink = new NdjsonRecordSink({
      path,
      fsync: 'batch',
      fs: {
        fdatasyncSync: (fd) => {
          if (failing) throw fsError('EIO', 'fdatasync');
          fdatasyncSync(fd);
        },
      },
    });
    await sink.append({ i: 1 });
    failing = true;
    const refused = await Promise.allSettled([sink.append({ i: 2 }), sink.append({ i: 3 })]);
    expect(refused.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(String((refused[0] as PromiseRejectedResult).reason)).toMatch(/could not be written \(EIO\)/);
    expect(readFileSync(path, 'utf8')).toBe('{"i":1}\n');
    failing = false;
    await sink.append({ i: 4 });
    await sink.close();
    expect(lines(path).map((l) => l.i)).toEqual([1, 4]);
  });

  it('disk full (injected) when the half line cannot be cut back either: it stays a line of its own, and readers skip it', async () => {
    const path = freshPath();
    let full = false;
    const sink = new NdjsonRecordSink({
      path,
      fs: {
        writeSync: (fd, buffer, offset, length) => {
          if (!full) return writeSync(fd, buffer, offset, length);
          if (offset === 0) return writeSync(fd, buffer, 0, Math.floor(length / 2));
          throw fsError('ENOSPC', 'write');
        },
        ftruncateSync: () => {
          throw fsError('EIO', 'ftruncate');
        },
      },
    });
    await sink.append({ i: 1 });
    full = true;
    await expect(sink.append({ i: 2, pad: 'x'.repeat(200) })).rejects.toThrow(/ENOSPC/);
    full = false;
    await sink.append({ i: 3 });
    await sink.close();
    const all = rawLines(path);
    expect(all).toHaveLength(3);
    expect(all[0]).toEqual({ i: 1 });
    expect(typeof all[1]).toBe('string'); // the fragment, alone on its line
    expect(all[2]).toEqual({ i: 3 });
    const read: unknown[] = [];
    for await (const r of readRecords(recordFiles(path, 5))) read.push(r);
    expect(read).toEqual([{ i: 1 }, { i: 3 }]);
  });

  it('disk full (a real 64 KiB tmpfs): no half line is left, and the record after the disk has room again reads back', async (ctx) => {
    const mountPoint = mkdtempSync(join(tmpdir(), 'mcp-broker-records-full-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', mountPoint], { stdio: 'ignore' });
    } catch {
      rmSync(mountPoint, { recursive: true, force: true });
      ctx.skip('cannot mount a tmpfs here (needs root): the injected short-write tests above cover the same path');
    }
    try {
      const path = join(mountPoint, 'calls.ndjson');
      const sink = new NdjsonRecordSink({ path });
      await sink.append({ i: 1 });
      // Take every free block but one page: a 10 KB batch then fits only part way.
      const free = statfsSync(mountPoint).bavail * statfsSync(mountPoint).bsize;
      writeFileSync(join(mountPoint, 'filler'), Buffer.alloc(free - 4096));
      await expect(sink.append({ i: 2, pad: 'x'.repeat(10_000) })).rejects.toThrow(/ENOSPC/);
      expect(readFileSync(path, 'utf8')).toBe('{"i":1}\n');
      rmSync(join(mountPoint, 'filler'));
      await sink.append({ i: 3 });
      await sink.close();
      expect(rawLines(path)).toEqual([{ i: 1 }, { i: 3 }]);
    } finally {
      execFileSync('umount', [mountPoint]);
      rmSync(mountPoint, { recursive: true, force: true });
    }
  });

  it('disk full when the batch cannot be cut back (an append-only file): the lines that landed whole are answered, the rest refused', async () => {
    for (const tornBefore of [false, true]) {
      const path = freshPath();
      if (tornBefore) {
        mkdirSync(join(path, '..'), { recursive: true });
        writeFileSync(path, '{"i":0,"pa');
      }
      let full = false;
      const sink = new NdjsonRecordSink({
        path,
        fs: {
          writeSync: (fd, buffer, offset, length) => {
            if (!full) return writeSync(fd, buffer, offset, length);
            // The first record whole (and the newline before it, on a torn file), half the second: then the disk is full.
            if (offset === 0) return writeSync(fd, buffer, 0, buffer.indexOf('\n', tornBefore ? 1 : 0) + 1 + 10);
            throw fsError('ENOSPC', 'write');
          },
          ftruncateSync: () => {
            throw fsError('EPERM', 'ftruncate');
          },
        },
      });
      full = true;
      const settled = await Promise.allSettled([sink.append({ i: 1 }), sink.append({ i: 2, pad: 'x'.repeat(50) }), sink.append({ i: 3 })]);
      expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected']);
      expect(String((settled[1] as PromiseRejectedResult).reason)).toMatch(/could not be written \(ENOSPC\)/);
      full = false;
      await sink.append({ i: 4 });
      await sink.close();
      const all = rawLines(path);
      expect(all.filter((l) => typeof l !== 'string')).toEqual([{ i: 1 }, { i: 4 }]);
      expect(all.filter((l) => typeof l === 'string')).toHaveLength(tornBefore ? 2 : 1);
    }
  });

  it('fsync "batch": of a batch that cannot be cut back, the whole lines are answered only when they could be flushed', async () => {
    for (const flushWorks of [true, false]) {
      const path = freshPath();
      let full = false;
      const sink = new NdjsonRecordSink({
        path,
        fsync: 'batch',
        fs: {
          writeSync: (fd, buffer, offset, length) => {
            if (!full) return writeSync(fd, buffer, offset, length);
            if (offset === 0) return writeSync(fd, buffer, 0, buffer.indexOf('\n') + 1 + 10);
            throw fsError('ENOSPC', 'write');
          },
          ftruncateSync: () => {
            throw fsError('EPERM', 'ftruncate');
          },
          fdatasyncSync: (fd) => {
            if (full && !flushWorks) throw fsError('EIO', 'fdatasync');
            fdatasyncSync(fd);
          },
        },
      });
      full = true;
      const settled = await Promise.allSettled([sink.append({ i: 1 }), sink.append({ i: 2, pad: 'x'.repeat(50) })]);
      expect(settled.map((r) => r.status), `flush works: ${flushWorks}`).toEqual([flushWorks ? 'fulfilled' : 'rejected', 'rejected']);
      full = false;
      await sink.close();
    }
  });

  it('a FIFO at the records path without a reader refuses the batch at once; it used to block the process in open() (not as root: EACCES first)', async (ctx) => {
    // The blocking open was the fallback for a path the broker may write but not read, which
    // root never meets: as root the check runs in a child as nobody, from a bundle of the sink.
    const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-records-fifo-'));
    try {
      chmodSync(dir, 0o777);
      const fifo = join(dir, 'calls.ndjson');
      execFileSync('mkfifo', ['-m', '0222', fifo]);
      const bundle = join(dir, 'records.cjs');
      await esbuild({ entryPoints: [join(__dirname, '../../src/audit/records.ts')], bundle: true, platform: 'node', format: 'cjs', outfile: bundle, logLevel: 'silent' });
      const script = join(dir, 'child.cjs');
      writeFileSync(
        script,
        `const { NdjsonRecordSink } = require(${JSON.stringify(bundle)});
         process.stdout.write('started\\n');
         const sink = new NdjsonRecordSink({ path: ${JSON.stringify(fifo)} });
         sink.append({ i: 1 }).then(() => 'written', (err) => err.message).then((outcome) => { process.stdout.write(outcome + '\\n'); return sink.close(); });`,
      );
      chmodSync(script, 0o644);
      chmodSync(bundle, 0o644);
      const asRoot = process.getuid?.() === 0;
      const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'pipe'], ...(asRoot && { uid: 65534, gid: 65534 }) });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d));
      const code = await new Promise<number | null>((resolve) => {
        const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
        child.on('error', () => resolve(-1));
        child.on('exit', (c) => {
          clearTimeout(timer);
          resolve(c);
        });
      });
      if (!out.startsWith('started')) ctx.skip(`the sink could not be run as another user here (exit ${code})`);
      expect(out).toBe('started\nthe records file could not be opened (ENXIO)\n');
      expect(code).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the records folder deleted while the sink runs: the lock is taken again with the file, and a broker that took it meanwhile keeps it', async () => {
    const path = freshPath();
    const other = 4243;
    const sink = new NdjsonRecordSink({ path, lock: { isAlive: (pid) => pid === other } });
    await sink.append({ i: 1 });
    rmSync(join(path, '..'), { recursive: true });
    await sink.append({ i: 2 });
    expect(readFileSync(`${path}.lock`, 'utf8')).toMatch(new RegExp(`^${process.pid} `));
    expect(() => new NdjsonRecordSink({ path, lock: { pid: other } })).toThrow(/in use by another mcp-broker/);

    // Another broker starts on the same path after the folder went, before this sink writes again.
    rmSync(join(path, '..'), { recursive: true });
    mkdirSync(join(path, '..'));
    const second = new NdjsonRecordSink({ path, lock: { pid: other } });
    await expect(sink.append({ i: 3 })).rejects.toThrow(/in use by another mcp-broker \(pid 4243/);
    await expect(sink.append({ i: 4 })).rejects.toThrow(/in use by another mcp-broker \(pid 4243/);
    await second.append({ i: 5 });
    expect(lines(path).map((l) => l.i)).toEqual([5]);
    await second.close();
    await sink.close();
  });

  it('a sink opened on a torn file (restart after a crash mid-write) starts its first record on a new line', async () => {
    const path = freshPath();
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(path, '{"i":1}\n{"i":2,"pa');
    const sink = new NdjsonRecordSink({ path });
    await sink.append({ i: 3 });
    await sink.close();
    expect(rawLines(path)).toEqual([{ i: 1 }, '{"i":2,"pa', { i: 3 }]);
  });

  it('two sinks on one records file: the second is refused until the first closes, and a clean close removes the lock', async () => {
    const path = freshPath();
    const first = new NdjsonRecordSink({ path });
    expect(() => new NdjsonRecordSink({ path })).toThrow(new RegExp(`^broker.records.path is in use by another mcp-broker \\(pid ${process.pid}, lock file calls.ndjson.lock\\)`));
    expect(existsSync(`${path}.lock`)).toBe(true);
    await first.close();
    expect(existsSync(`${path}.lock`)).toBe(false);
    const second = new NdjsonRecordSink({ path });
    await second.append({ i: 1 });
    await second.close();
    expect(lines(path).map((l) => l.i)).toEqual([1]);
  });

  it('a lock held by a live process refuses the sink; a stale one (dead pid, or this pid not held here) is taken over', () => {
    const path = freshPath();
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(`${path}.lock`, '4242 someone\n');
    expect(() => new NdjsonRecordSink({ path, lock: { isAlive: (pid) => pid === 4242 } })).toThrow(/in use by another mcp-broker \(pid 4242/);
    expect(readFileSync(`${path}.lock`, 'utf8')).toBe('4242 someone\n');

    const taken = new NdjsonRecordSink({ path, lock: { isAlive: () => false } });
    expect(readFileSync(`${path}.lock`, 'utf8')).toMatch(new RegExp(`^${process.pid} `));
    void taken.close();

    writeFileSync(`${path}.lock`, `${process.pid} a-previous-run\n`);
    const reused = new NdjsonRecordSink({ path, lock: { isAlive: () => true } });
    expect(readFileSync(`${path}.lock`, 'utf8')).not.toContain('a-previous-run');
    void reused.close();
  });

  it('the reader skips a folder at the records path and lines that are not a JSON object', async () => {
    const path = freshPath();
    mkdirSync(path, { recursive: true });
    writeFileSync(`${path}.1`, '{"i":1}\nnull\n42\n{"i":2,"pa\n{"i":3}\n');
    const read: unknown[] = [];
    for await (const r of readRecords(recordFiles(path, 5))) read.push(r);
    expect(read).toEqual([{ i: 1 }, { i: 3 }]);
  });
});

describe('record stage through the broker', () => {
  const clock = new ManualClock();
  const session: CallerSession = { sessionId: 's1', principal: 'local', unit: 's1', isLive: () => true };
  const target: ToolTarget = { name: 'u__t', server: 'u', toolName: 't', state: 'active', source: 'upstream' };
  const upstreamResult: CallToolResult = { content: [{ type: 'text', text: 'the side effect happened' }], structuredContent: { a: 1 } };
  const dispatcher = { dispatch: async () => upstreamResult };
  const failing: RecordSink = { append: async () => Promise.reject(new Error('disk full')), close: async () => undefined };
  const request = (args: Record<string, unknown> = {}) => ({ name: 'u__t', args, signal: new AbortController().signal });
  const recordWith = (records: RecordSink) => recordStage({ records, clock, logger: silentLogger(), scrubArgs: (a) => a, scrubText: (t) => t });

  it('writes exactly one record with the Contract fields before answering', async () => {
    const written: object[] = [];
    const sink: RecordSink = { append: async (r) => void written.push(r), close: async () => undefined };
    const broker = new Broker([recordWith(sink), invokeStage({ router: dispatcher })], clock);
    const answer = await broker.call(request({ q: 1 }), session, target);
    expect(answer.outcome).toBe('ok');
    expect(written).toHaveLength(1);
    expect(written[0]).toMatchObject({
      callId: answer.callId,
      sessionId: 's1',
      principal: 'local',
      unit: 's1',
      subject: 'u/t',
      name: 'u__t',
      outcome: 'ok',
      status: 200,
      attempts: 1,
      args: { q: 1 },
    });
    expect(written[0]).toHaveProperty('ts', new Date(clock.now()).toISOString());
    expect((written[0] as { bytesOut: number }).bytesOut).toBeGreaterThan(0);
    expect(answer.result.structuredContent).toEqual({ a: 1 });
  });

  it('a result whose record cannot be written is answered guard_error and withheld', async () => {
    const broker = new Broker([recordWith(failing), invokeStage({ router: dispatcher })], clock);
    const answer = await broker.call(request(), session, target);
    expect(answer.outcome).toBe('guard_error');
    expect(answer.status).toBe(500);
    expect(answer.record).toBeUndefined();
    expect(answer.result.isError).toBe(true);
    expect(JSON.stringify(answer.result)).not.toContain('the side effect happened');
    expect(answer.result.structuredContent).toBeUndefined();
    expect(answer.reason).toContain('record could not be written');
  });

  it('a refusal whose record cannot be written keeps its outcome', async () => {
    const deny: Stage = { name: 'judge', run: async (call) => refuse(call, 'denied', 'rule 1') };
    const broker = new Broker([recordWith(failing), deny, invokeStage({ router: dispatcher })], clock);
    const answer = await broker.call(request(), session, target);
    expect(answer.outcome).toBe('denied');
    expect(answer.result.isError).toBe(true);
  });
});
