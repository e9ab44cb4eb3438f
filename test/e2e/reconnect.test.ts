/**
 * `broker__reconnect` end to end through the real CLI (seed 004_359de2f3ce5e2188.txt): a real
 * upstream (server-everything) killed mid-session comes back `accepted`; a fixture that fails
 * its second start is `refused`, stays disconnected with its tools withdrawn
 * (`tools/list_changed`); an unknown name is `refused`; no upstreams is `unsupported`.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { fixture, isAlive, nodeServer, npmServer, startBroker, waitFor, type StartedBroker } from './helpers.js';

const outcome = (r: { _meta?: unknown }) => (r._meta as Record<string, unknown> | undefined)?.['mcp-broker/outcome'];

interface Answer {
  server: string;
  outcome: 'accepted' | 'refused' | 'unsupported';
  status: { state: string; errorCode?: string; httpStatus?: number };
  reason?: string;
  toolNames?: string[];
}

let broker: StartedBroker | undefined;
afterEach(async () => {
  await broker?.close();
  broker = undefined;
});

async function reconnect(b: StartedBroker, server: string): Promise<Answer> {
  const result = (await b.client.callTool({ name: 'broker__reconnect', arguments: { server } }, { timeout: 60_000 })) as CallToolResult;
  expect(outcome(result)).toBe('ok');
  expect(result.isError).toBeFalsy();
  const answer = result.structuredContent as unknown as Answer;
  // The text line carries the same answer.
  expect(JSON.parse((result.content[0] as { text: string }).text)).toEqual(answer);
  return answer;
}

async function toolNames(b: StartedBroker): Promise<string[]> {
  return (await b.client.listTools()).tools.map((t) => t.name);
}

function childPids(pid: number): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

describe('broker__reconnect (e2e)', () => {
  it('advertises experimental["mcp-broker/reconnect"] and an outputSchema; the description says it is a transaction', async () => {
    broker = await startBroker({ servers: { everything: { command: 'node', args: [npmServer('server-everything'), 'stdio'] } } });
    expect(broker.client.getServerCapabilities()?.experimental?.['mcp-broker/reconnect']).toEqual({ tool: 'broker__reconnect' });
    const tool = (await broker.client.listTools()).tools.find((t) => t.name === 'broker__reconnect')!;
    expect(tool.description).toMatch(/transaction/);
    expect(tool.inputSchema).toMatchObject({ type: 'object', required: ['server'] });
    expect(tool.outputSchema).toMatchObject({ type: 'object', required: ['server', 'outcome', 'status'] });
  });

  it('a real upstream (server-everything) killed mid-session comes back accepted, with its tools', async () => {
    broker = await startBroker({
      servers: { everything: { command: 'node', args: [npmServer('server-everything'), 'stdio'] } },
      // No automatic restart within the test: only the reconnect brings it back.
      extra: { broker: { restart: { initialDelayMs: 3_600_000, maxDelayMs: 3_600_000 } } },
    });
    const b = broker;
    expect(await toolNames(b)).toContain('everything__echo');
    const [child] = childPids(b.pid!);
    expect(child).toBeGreaterThan(0);
    process.kill(child!, 'SIGKILL');
    await waitFor(async () => !(await toolNames(b)).includes('everything__echo'), 'everything tools withdrawn after the kill', 20_000, 100);
    await waitFor(() => b.notifications.some((n) => n.method === 'notifications/tools/list_changed'), 'tools/list_changed after the kill');
    // Its upstream is down: a recorded upstream_error that says so (issue 18 §3), not "gone".
    const down = (await b.client.callTool({ name: 'everything__echo', arguments: { message: 'x' } })) as CallToolResult;
    expect(outcome(down)).toBe('upstream_error');
    expect(JSON.stringify(down.content)).toContain('upstream \\"everything\\" is not running: connection lost');

    const answer = await reconnect(b, 'everything');
    expect(answer).toMatchObject({ server: 'everything', outcome: 'accepted', status: { state: 'ready' } });
    expect(answer.reason).toBeUndefined();
    expect(answer.toolNames).toContain('everything__echo');
    expect(isAlive(child!)).toBe(false);
    const up = (await b.client.callTool({ name: 'everything__echo', arguments: { message: 'back' } })) as CallToolResult;
    expect(outcome(up)).toBe('ok');
    expect(JSON.stringify(up.content)).toContain('back');

    const records = await b.records();
    expect(records.filter((r) => r.name === 'broker__reconnect').map((r) => [r.subject, r.outcome])).toEqual([['broker/reconnect', 'ok']]);
  }, 90_000);

  it('re-dialling a healthy upstream is a transaction: its in-flight call fails (a write tool, so no retry)', async () => {
    broker = await startBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) } });
    const b = broker;
    expect(await toolNames(b)).toContain('echo__slow');
    const inFlight = b.client.callTool({ name: 'echo__slow', arguments: { ms: 30_000 } }, { timeout: 60_000 });
    await new Promise((r) => setTimeout(r, 500));
    const started = Date.now();
    const answer = await reconnect(b, 'echo');
    expect(answer).toMatchObject({ outcome: 'accepted', toolNames: expect.arrayContaining(['echo__slow', 'echo__echo']) });
    const failed = (await inFlight) as CallToolResult;
    expect(outcome(failed)).toBe('upstream_error');
    expect(Date.now() - started).toBeLessThan(20_000);
  }, 60_000);

  it('a fixture that fails its second start is refused: disconnected, tools withdrawn with tools/list_changed, reason scrubbed and cut', async () => {
    const token = 's3cr3t-reconnect-token-value';
    broker = await startBroker({
      servers: { once: nodeServer(fixture('reconnect-once.mjs'), { env: { RECONNECT_MARKER: '${configDir}/marker', RECONNECT_TOKEN: token } }) },
      extra: { broker: { restart: { initialDelayMs: 100, maxDelayMs: 200 } } },
    });
    const b = broker;
    const marker = join(b.dir, 'marker');
    expect(await toolNames(b)).toEqual(expect.arrayContaining(['once__ping', 'once__slow']));
    expect(existsSync(marker)).toBe(true);
    const inFlight = b.client.callTool({ name: 'once__slow', arguments: { ms: 30_000 } }, { timeout: 60_000 });
    await new Promise((r) => setTimeout(r, 300));
    const seenBefore = b.notifications.length;

    const answer = await reconnect(b, 'once');
    expect(answer.server).toBe('once');
    expect(answer.outcome).toBe('refused');
    expect(answer.status.state).toBe('failed');
    expect(typeof answer.status.errorCode).toBe('string');
    expect(answer.toolNames).toBeUndefined();
    expect(answer.reason).toBeDefined();
    expect(answer.reason!.length).toBeLessThanOrEqual(300);
    expect(answer.reason).not.toContain(token);
    expect(answer.reason).toContain('[REDACTED]');

    expect(outcome((await inFlight) as CallToolResult)).toBe('upstream_error');
    await waitFor(() => b.notifications.slice(seenBefore).some((n) => n.method === 'notifications/tools/list_changed'), 'tools/list_changed after the failed re-dial');
    expect((await toolNames(b)).filter((n) => n.startsWith('once__'))).toEqual([]);
    expect(outcome((await b.client.callTool({ name: 'once__ping', arguments: {} })) as CallToolResult)).toBe('upstream_error');

    // It stays disconnected: with the marker gone a restart would succeed, yet none happens.
    rmSync(marker);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(existsSync(marker)).toBe(false);
    expect((await toolNames(b)).filter((n) => n.startsWith('once__'))).toEqual([]);
    // Another explicit reconnect brings it back.
    const back = await reconnect(b, 'once');
    expect(back.outcome).toBe('accepted');
    expect(back.toolNames).toEqual(['once__ping', 'once__slow']);
  }, 90_000);

  it('an unknown server name is refused (not_declared), and the other upstreams are untouched', async () => {
    broker = await startBroker({ servers: { everything: { command: 'node', args: [npmServer('server-everything'), 'stdio'] } } });
    const before = childPids(broker.pid!);
    const answer = await reconnect(broker, 'no-such-server');
    expect(answer).toEqual({
      server: 'no-such-server',
      outcome: 'refused',
      status: { state: 'unknown', errorCode: 'not_declared' },
      reason: 'no upstream server by that name is configured',
    });
    expect(childPids(broker.pid!)).toEqual(before);
  });

  it('with no upstreams configured: unsupported, and the capability is not advertised', async () => {
    broker = await startBroker({ servers: {} });
    expect(broker.client.getServerCapabilities()?.experimental?.['mcp-broker/reconnect']).toBeUndefined();
    const answer = await reconnect(broker, 'anything');
    expect(answer).toMatchObject({ server: 'anything', outcome: 'unsupported', status: { state: 'unknown', errorCode: 'reconnect_unavailable' } });
  });

  it('a missing server argument is invalid_arguments', async () => {
    broker = await startBroker({ servers: {} });
    const result = (await broker.client.callTool({ name: 'broker__reconnect', arguments: {} })) as CallToolResult;
    expect(outcome(result)).toBe('invalid_arguments');
  });
});
