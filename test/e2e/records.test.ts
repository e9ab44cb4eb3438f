/**
 * The records file through the real CLI (issue 12, "records lost silently"): a records path
 * deleted or replaced while the broker runs, a restart onto a torn file, and two brokers on one
 * records file. Build first (`npm run build`).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, writeConfig } from './helpers.js';
import { http, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const servers = { echo: nodeServer(fixture('echo.mjs'), { required: true }) };
const shared = mkdtempSync(join(tmpdir(), 'mcp-broker-e2e-records-'));
afterAll(() => rmSync(shared, { recursive: true, force: true }));

const echo = (broker: HttpBroker, text: string) => http(`${broker.url}/api/v1/mcp/call`, { body: { subject: 'echo__echo', args: { text } } });
const calls = async (broker: HttpBroker) => {
  const res = await http(`${broker.url}/api/v1/calls?limit=1000`);
  return { status: res.status, ids: ((res.body?.calls ?? []) as { callId: string }[]).map((c) => c.callId) };
};
/** Every line of a file: parsed records, or the raw text of a line that is not one. */
const fileLines = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      try {
        return JSON.parse(l) as { callId: string };
      } catch {
        return l;
      }
    });

describe('issue 12: records are never lost silently (CLI)', () => {
  it('the records path deleted and a folder put there: calls are refused guard_error, then recorded again once the path is free; a file put there is appended to', async () => {
    const broker = await startHttpBroker({ servers });
    try {
      const path = broker.recordsPath;
      const first = await echo(broker, 'one');
      expect(first.body.outcome).toBe('ok');

      rmSync(path);
      mkdirSync(path);
      const refused = await echo(broker, 'two');
      expect(refused.status).toBe(500);
      expect(refused.body.outcome).toBe('guard_error');
      expect(refused.body.result).toBeUndefined();
      expect(refused.body.reason).toContain('could not be opened (EISDIR)');
      expect(refused.body.reason).not.toContain(broker.dir);
      expect(await calls(broker)).toEqual({ status: 200, ids: [] });

      rmSync(path, { recursive: true });
      const third = await echo(broker, 'three');
      expect(third.body.outcome).toBe('ok');
      expect(await calls(broker)).toEqual({ status: 200, ids: [third.body.callId] });

      writeFileSync(`${path}.new`, JSON.stringify({ callId: 'planted', ts: new Date().toISOString(), principal: 'local', outcome: 'ok' }) + '\n');
      renameSync(`${path}.new`, path);
      const fourth = await echo(broker, 'four');
      expect(fourth.body.outcome).toBe('ok');
      expect(await calls(broker)).toEqual({ status: 200, ids: ['planted', fourth.body.callId] });
    } finally {
      await broker.close();
    }
  });

  it('a broker restarted onto a torn records file (a crash mid-write) starts its first record on a new line', async () => {
    const dir = mkdtempSync(join(shared, 'torn-'));
    const path = join(dir, 'calls.ndjson');
    const old = JSON.stringify({ callId: 'before-the-crash', ts: new Date().toISOString(), principal: 'local', outcome: 'ok' });
    writeFileSync(path, `${old}\n{"callId":"torn","ts":"20`);
    const broker = await startHttpBroker({ servers, extra: { broker: { records: { path } } } });
    try {
      const call = await echo(broker, 'after the restart');
      expect(call.body.outcome).toBe('ok');
      expect(fileLines(path)).toEqual([JSON.parse(old), '{"callId":"torn","ts":"20', expect.objectContaining({ callId: call.body.callId })]);
      expect((await calls(broker)).ids).toEqual(['before-the-crash', call.body.callId]);
    } finally {
      await broker.close();
    }
  });

  it('a second broker on the same records file exits 1 with one line naming the lock file; a clean shutdown of the first frees it', async () => {
    const dir = mkdtempSync(join(shared, 'two-'));
    const path = join(dir, 'calls.ndjson');
    const first = await startHttpBroker({ servers, extra: { broker: { records: { path } } } });
    const second = writeConfig(servers, { broker: { records: { path } } });
    try {
      expect(readFileSync(`${path}.lock`, 'utf8')).toMatch(new RegExp(`^${first.child.pid} `));
      const child = spawn(process.execPath, [CLI, '--config', second.configPath, '--transport', 'http', '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
      const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
      expect(code).toBe(1);
      const lines = err.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(`broker.records.path is in use by another mcp-broker (pid ${first.child.pid}, lock file calls.ndjson.lock)`);
      expect(lines[0]).not.toContain(dir);
      // The first broker still records.
      expect((await echo(first, 'still here')).body.outcome).toBe('ok');

      first.child.kill('SIGTERM');
      expect(await first.exited).toBe(0);
      expect(existsSync(`${path}.lock`)).toBe(false);
      const again = await startHttpBroker({ servers, extra: { broker: { records: { path } } } });
      try {
        expect((await echo(again, 'after the first stopped')).body.outcome).toBe('ok');
      } finally {
        await again.close();
      }
    } finally {
      await first.close();
      rmSync(second.dir, { recursive: true, force: true });
    }
  });

  it('a lock left by a killed broker (kill -9) is taken over by the next broker on that records file', async () => {
    const dir = mkdtempSync(join(shared, 'killed-'));
    const path = join(dir, 'calls.ndjson');
    const killed = await startHttpBroker({ servers, extra: { broker: { records: { path } } } });
    try {
      killed.child.kill('SIGKILL');
      await killed.exited;
      expect(readFileSync(`${path}.lock`, 'utf8')).toMatch(new RegExp(`^${killed.child.pid} `));
      const next = await startHttpBroker({ servers, extra: { broker: { records: { path } } } });
      try {
        expect(readFileSync(`${path}.lock`, 'utf8')).toMatch(new RegExp(`^${next.child.pid} `));
        expect((await echo(next, 'after the kill')).body.outcome).toBe('ok');
      } finally {
        await next.close();
      }
    } finally {
      await killed.close();
    }
  });
});
