/**
 * Upstream lifecycle through the CLI: crashes (F08), process-tree cleanup (F09), failed spawns
 * (F10), a failing first listing (F12), and a downstream client that stops reading (issue 17 §3).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fixture, isAlive, nodeServer, readNdjson, ROOT, spawnRawBroker, startBroker, waitFor } from './helpers.js';

/** The resident set size of a process, in MiB (Linux `/proc/<pid>/status`). */
function rssMiB(pid: number): number {
  const kb = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  return kb / 1024;
}

const FAST_RESTART = { restart: { initialDelayMs: 100, maxDelayMs: 500 } };
const text = (r: { content?: unknown }) => ((r.content as Array<{ text?: string }>)[0]?.text ?? '') as string;
const outcome = (r: { _meta?: unknown }) => (r._meta as Record<string, unknown> | undefined)?.['mcp-broker/outcome'];

describe('upstream lifecycle', () => {
  it('F08: an upstream that exits after initialize fails fast; the others serve', async () => {
    const started = Date.now();
    const broker = await startBroker({
      servers: {
        crashy: nodeServer(fixture('crashy.mjs'), { args: [fixture('crashy.mjs'), '--exit-after-initialize'] }),
        u1: nodeServer(fixture('echo.mjs')),
      },
      extra: { broker: FAST_RESTART },
    });
    try {
      const { tools } = await broker.client.listTools();
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(tools.map((t) => t.name)).toContain('u1__echo');
      expect(tools.some((t) => t.name.startsWith('crashy__'))).toBe(false);
      expect(text(await broker.client.callTool({ name: 'u1__echo', arguments: { text: 'still here' } }))).toBe('still here');
      await waitFor(() => /crashy/.test(broker.stderr()) && /dial failed/.test(broker.stderr()), 'the dial failure in stderr');
    } finally {
      await broker.close();
    }
  });

  it('F08: a crash fails every pending call within a second or so, others keep working, and it restarts with its tools (list_changed)', async () => {
    const broker = await startBroker({
      servers: {
        crashy: nodeServer(fixture('crashy.mjs'), { env: { FIXTURE_LOG: '${configDir}/crashy.log' } }),
        u1: nodeServer(fixture('echo.mjs')),
      },
      extra: { broker: FAST_RESTART },
    });
    const crashLog = join(broker.dir, 'crashy.log');
    try {
      // A client that lists first, as clients do: the broker tells of list changes once it has served a
      // list (until every first dial is over it stays quiet; a call may be served before then).
      expect((await broker.client.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(['crashy__hello', 'u1__echo']));
      const firstHello = text(await broker.client.callTool({ name: 'crashy__hello', arguments: {} }));
      const pending = [1, 2].map(() => broker.client.callTool({ name: 'crashy__hang', arguments: {} }, { timeout: 120_000 }));
      await waitFor(() => readNdjson<{ event: string; tool?: string }>(crashLog).filter((e) => e.tool === 'hang').length === 2, 'two hang calls upstream');
      const from = broker.notifications.length;
      const crashAt = Date.now();
      const crash = broker.client.callTool({ name: 'crashy__crash', arguments: {} });
      const settled = await Promise.all([...pending, crash].map((p) => p.then((r) => ({ r, at: Date.now() }))));
      for (const { r, at } of settled) {
        expect(at - crashAt).toBeLessThan(5_000);
        expect(r.isError).toBe(true);
        expect(outcome(r)).toBe('upstream_error');
      }
      // The other upstream is unaffected.
      expect(text(await broker.client.callTool({ name: 'u1__echo', arguments: { text: 'ok' } }))).toBe('ok');
      // Restarted: tools back, and the client was told.
      await waitFor(() => broker.notifications.slice(from).filter((n) => n.method === 'notifications/tools/list_changed').length >= 2, 'list_changed after withdraw and restart', 15_000);
      await waitFor(async () => (await broker.client.listTools()).tools.some((t) => t.name === 'crashy__hello'), 'crashy tools back', 15_000);
      const secondHello = text(await broker.client.callTool({ name: 'crashy__hello', arguments: {} }));
      expect(secondHello).toMatch(/^hello from \d+$/);
      expect(secondHello).not.toBe(firstHello);

      // Variant: the upstream gets SIGTERM from outside while two calls are pending.
      const pid = Number(secondHello.split(' ').pop());
      const hangsBefore = readNdjson<{ tool?: string }>(crashLog).filter((e) => e.tool === 'hang').length;
      const pending2 = [1, 2].map(() => broker.client.callTool({ name: 'crashy__hang', arguments: {} }, { timeout: 120_000 }));
      await waitFor(() => readNdjson<{ tool?: string }>(crashLog).filter((e) => e.tool === 'hang').length === hangsBefore + 2, 'two more hang calls upstream');
      const killedAt = Date.now();
      process.kill(pid, 'SIGTERM');
      for (const r of await Promise.all(pending2)) {
        expect(Date.now() - killedAt).toBeLessThan(5_000);
        expect(outcome(r)).toBe('upstream_error');
      }
      const records = await broker.records();
      expect(records.filter((r) => r.name === 'crashy__hang').map((r) => r.outcome)).toEqual(Array(4).fill('upstream_error'));
    } finally {
      await broker.close();
    }
  }, 60_000);

  it('F10: a missing command marks that upstream failed with a clear error while the others serve', async () => {
    const broker = await startBroker({
      servers: {
        u1: nodeServer(fixture('echo.mjs')),
        broken: { command: 'does-not-exist-mcp-xyz', args: [] },
      },
    });
    try {
      const { tools } = await broker.client.listTools();
      expect(tools.map((t) => t.name)).toContain('u1__echo');
      expect(tools.some((t) => t.name.startsWith('broken__'))).toBe(false);
      expect(text(await broker.client.callTool({ name: 'u1__echo', arguments: { text: 'fine' } }))).toBe('fine');
      await waitFor(() => broker.stderr().includes('does-not-exist-mcp-xyz'), 'the failed command named in stderr');
      const line = broker.stderr().split('\n').find((l) => l.includes('does-not-exist-mcp-xyz'))!;
      expect(line).toContain('command not found');
      expect(line).toContain('"upstream":"broken"');
    } finally {
      await broker.close();
    }
  });

  it('issue 18: a call to a tool of a server that failed to start is a recorded upstream_error naming the server and its error line; the error is logged once across restarts', async () => {
    const broker = await startBroker({
      servers: {
        u1: nodeServer(fixture('echo.mjs')),
        lost: nodeServer(fixture('missing-file.js')),
        throws: nodeServer(fixture('throws-at-start.mjs'), { env: { FIXTURE_LOG: '${configDir}/throws.log' } }),
        bare: { command: 'does-not-exist-bare-xyz', prefix: false },
      },
      extra: { broker: FAST_RESTART },
    });
    try {
      expect(text(await broker.client.callTool({ name: 'u1__echo', arguments: { text: 'fine' } }))).toBe('fine');
      const lost = await broker.client.callTool({ name: 'lost__read', arguments: { path: 'x' } });
      expect(lost.isError).toBe(true);
      expect(outcome(lost)).toBe('upstream_error');
      expect(text(lost)).toContain('upstream "lost" is not running');
      expect(text(lost)).toContain("Error: Cannot find module '…/missing-file.js'");
      expect(text(lost)).not.toContain(ROOT);
      const thrown = await broker.client.callTool({ name: 'throws__anything', arguments: {} });
      expect(outcome(thrown)).toBe('upstream_error');
      expect(text(thrown)).toContain('upstream "throws" is not running');
      expect(text(thrown)).toContain('Error: fixture failed at start: no database configured');
      // A name that matches no configured server stays a JSON-RPC error; it names the bare-name servers that are down.
      await expect(broker.client.callTool({ name: 'nosuch__tool', arguments: {} })).rejects.toThrow(/Unknown tool: nosuch__tool \(not running now, so not listed: upstream "bare"\)/);

      const records = await broker.records();
      const record = records.find((r) => r.name === 'lost__read')!;
      expect(record).toMatchObject({ subject: 'lost/read', outcome: 'upstream_error', status: 502, attempts: 0 });
      expect(record.reason).toContain('Cannot find module');
      expect(records.find((r) => r.name === 'throws__anything')).toMatchObject({ outcome: 'upstream_error', status: 502 });

      // Several restarts later, each reason is still on stderr once, without the stack trace.
      await waitFor(() => readNdjson<{ event: string }>(join(broker.dir, 'throws.log')).length >= 4, 'four starts of the throwing server', 20_000);
      const restarts = (server: string) => broker.stderr().split('\n').filter((l) => l.includes(`"upstream":"${server}"`) && l.includes('restart scheduled')).length;
      await waitFor(() => restarts('lost') >= 4, 'four restarts of the missing script', 20_000);
      const count = (needle: string) => broker.stderr().split(needle).length - 1;
      expect(count('Cannot find module')).toBe(1);
      expect(count('fixture failed at start')).toBe(1);
      expect(broker.stderr()).not.toContain('Module._resolveFilename');
      expect(broker.stderr()).not.toMatch(/Node\.js v\d/);
    } finally {
      await broker.close();
    }
  }, 60_000);

  it('F12: a first tools/list that fails or stalls is retried; the tools come back with list_changed', async () => {
    const broker = await startBroker({
      servers: {
        flaky: nodeServer(fixture('flaky-list.mjs'), { env: { FIXTURE_STATE: '${configDir}/flaky.state', FIXTURE_LOG: '${configDir}/flaky.log' } }),
        stall: nodeServer(fixture('flaky-list.mjs'), {
          args: [fixture('flaky-list.mjs'), '--stall'],
          env: { FIXTURE_STATE: '${configDir}/stall.state' },
          connectTimeoutMs: 1000,
        }),
        u1: nodeServer(fixture('echo.mjs')),
      },
      // The broker is ready (and lists) after 500 ms, well before stall's first listing times out
      // (connectTimeoutMs, counted once its listing is sent) and it is dialled again: without this, an upstream slower
      // to dial than that (u1 on a loaded machine) kept the broker from being ready until stall's
      // tools were back, so no client ever held a list without them and no list_changed was owed.
      extra: { broker: { ...FAST_RESTART, startGraceMs: 500 } },
    });
    try {
      const names = async () => (await broker.client.listTools()).tools.map((t) => t.name);
      // A client that lists first, as clients do: it holds a list without stall's tools, so it is told when they come back.
      const from = broker.notifications.length;
      expect(await names()).not.toContain('stall__ping_me');
      await waitFor(async () => {
        const n = await names();
        return n.includes('flaky__ping_me') && n.includes('stall__ping_me');
      }, 'both flaky upstreams to list their tools', 20_000);
      expect(broker.notifications.slice(from).some((n) => n.method === 'notifications/tools/list_changed')).toBe(true);
      expect(text(await broker.client.callTool({ name: 'flaky__ping_me', arguments: {} }))).toMatch(/^pong from/);
      expect(text(await broker.client.callTool({ name: 'stall__ping_me', arguments: {} }))).toMatch(/^pong from/);
      const starts = readNdjson<{ event: string; first: boolean }>(join(broker.dir, 'flaky.log')).filter((e) => e.event === 'start');
      expect(starts[0]!.first).toBe(true);
      expect(starts.length).toBeGreaterThanOrEqual(2);
      await waitFor(() => broker.stderr().includes('catalog not ready'), 'catalog not ready logged');
    } finally {
      await broker.close();
    }
  }, 40_000);
});

describe('F09: no child or grandchild outlives the broker', () => {
  const treeServer = (pidsFile: string) => ({
    command: 'sh',
    args: ['-c', `"${process.execPath}" "${fixture('tree.mjs')}"; exit $?`],
    env: { FIXTURE_PIDS: pidsFile },
  });

  async function runAndStop(stop: 'SIGTERM' | 'stdin EOF') {
    const b = spawnRawBroker({ servers: { tree: treeServer('${configDir}/pids.json') } });
    const pidsFile = join(b.dir, 'pids.json');
    try {
      await b.initialize();
      const res = await b.request(2, 'tools/call', { name: 'tree__pids', arguments: {} });
      expect((res as { result?: unknown }).result).toBeDefined();
      const pids = JSON.parse(readFileSync(pidsFile, 'utf8')) as { pid: number; ppid: number; grandchild: number };
      // sh stayed as the parent: a real three-level tree.
      expect(pids.ppid).not.toBe(b.child.pid);
      for (const pid of [pids.ppid, pids.pid, pids.grandchild]) expect(isAlive(pid)).toBe(true);
      if (stop === 'SIGTERM') b.child.kill('SIGTERM');
      else b.child.stdin!.end();
      const code = await Promise.race([b.exited, new Promise((r) => setTimeout(() => r('still running'), 15_000))]);
      expect(code).toBe(0);
      await waitFor(() => ![pids.ppid, pids.pid, pids.grandchild].some(isAlive), `sh, node and grandchild to be gone after ${stop}`, 10_000);
    } finally {
      if (existsSync(pidsFile)) {
        const pids = JSON.parse(readFileSync(pidsFile, 'utf8')) as Record<string, number>;
        for (const pid of Object.values(pids)) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
      }
      await b.close();
    }
  }

  it('F09: after SIGTERM the whole process group of a `sh -c` upstream is gone', () => runAndStop('SIGTERM'), 40_000);
  it('F09: after stdin EOF the whole process group of a `sh -c` upstream is gone', () => runAndStop('stdin EOF'), 40_000);
});

describe.skipIf(process.platform !== 'linux')('issue 17 §3: a client that stops reading stdout', () => {
  /**
   * Sends `rounds` × `perRound` calls of `mb` MiB answers while the client reads nothing, and
   * returns the broker's RSS growth over that time (MiB); then reads again and expects every answer.
   */
  async function growthWhileNotReading(rounds: number, perRound: number, mb: number): Promise<{ growth: number; story: string }> {
    const b = spawnRawBroker({ servers: { big: nodeServer(fixture('big.mjs')) }, extra: { broker: { maxPendingOutputBytes: 8 * 1024 * 1024 } } });
    try {
      await b.initialize();
      const listed = (await b.request(1, 'tools/list', {}, 20_000)) as { result?: { tools?: Array<{ name: string }> } };
      expect(listed.result?.tools?.map((t) => t.name)).toContain('big__big');
      await b.request(2, 'tools/call', { name: 'big__big', arguments: { mb: 1 } }, 20_000);
      const pid = b.child.pid!;
      const baseline = rssMiB(pid);
      b.child.stdout!.pause(); // the client stops reading
      let id = 100;
      const peaks: number[] = [];
      for (let round = 0; round < rounds; round++) {
        const calls = Array.from({ length: perRound }, () => JSON.stringify({ jsonrpc: '2.0', id: id++, method: 'tools/call', params: { name: 'big__big', arguments: { mb } } }));
        b.child.stdin!.write(calls.join('\n') + '\n'); // one write: the broker reads them at once
        await new Promise((r) => setTimeout(r, 400));
        peaks.push(rssMiB(pid));
      }
      // Then a while longer: the upstream takes a second or more to produce a burst's answers.
      for (let i = 0; i < 15; i++) peaks.push((await new Promise((r) => setTimeout(r, 400)), rssMiB(pid)));
      const growth = Math.max(...peaks) - baseline;
      const story = `RSS ${baseline.toFixed(0)} MiB → ${peaks.map((p) => p.toFixed(0)).join(', ')} MiB for ${rounds * perRound * mb} MiB of answers`;
      b.child.stdout!.resume(); // the client reads again: everything is answered
      await waitFor(() => b.messages.filter((m) => typeof m.id === 'number' && m.id >= 100 && 'result' in m).length === rounds * perRound, 'every answer', 60_000);
      return { growth, story };
    } finally {
      await b.close();
    }
  }

  // Without the bound every answer waits in the broker (growth near what was sent); with it, at
  // most maxPendingOutputBytes and what was read before it was passed.
  it('the broker\'s memory climbed round after round without a plateau; now it stays bounded while nothing is read', async () => {
    const { growth, story } = await growthWhileNotReading(10, 4, 2);
    expect(growth, story).toBeLessThan(40);
  }, 120_000);

  it('a burst of calls read at once: their answers wait in the upstream\'s pipe, not in the broker', async () => {
    const { growth, story } = await growthWhileNotReading(1, 40, 2);
    expect(growth, story).toBeLessThan(40);
  }, 120_000);
});
