/**
 * What the broker loads at start (issue 19: cold start). OpenTelemetry (some 270 modules) loads
 * only when `observability.otlp` is set, prom-client only at the HTTP face's first `/metrics` scrape,
 * express at the HTTP face's first request off `/mcp`, the legacy SDK's SSE transport at its first `GET /sse`.
 * Each case spawns the CLI with hooks that log every module it imports or requires (fixtures/hooks;
 * the CLI bundle requires the packages it leaves outside itself, these among them), and the positive
 * cases show the hooks see both packages when they are used.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { connectHttp, startHttpBroker, type HttpBroker, type HttpKind } from '../transports/harness.js';
import { fixture, nodeServer, startBroker, type StartedBroker } from './helpers.js';

const HOOK = pathToFileURL(join(fixture('hooks'), 'module-log.mjs')).href;

/** User and system CPU of process `pid` so far, in seconds, from `/proc` (Linux; undefined elsewhere). */
function cpuSeconds(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    // utime and stime, fields 14 and 15 of stat(5), in clock ticks of 1/100 s on Linux.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

const loaded = (log: string) => readFileSync(log, 'utf8').split('\n');
const count = (urls: string[], pkg: string) => urls.filter((u) => u.includes(`/node_modules/${pkg}`)).length;

describe('modules loaded at start', () => {
  let broker: StartedBroker | undefined;
  const dirs: string[] = [];
  afterEach(async () => {
    await broker?.close();
    broker = undefined;
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  /** A fresh temp file for the module log, removed after the test. */
  function logFile(): string {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-modules-'));
    dirs.push(dir);
    return join(dir, 'modules.log');
  }

  async function stdioBroker(extra: Record<string, unknown> = {}): Promise<string[]> {
    const log = logFile();
    broker = await startBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) }, extra, env: { MODULE_LOG: log, NODE_OPTIONS: `--import=${HOOK}` } });
    const { tools } = await broker.client.listTools();
    expect(tools.length).toBeGreaterThan(0);
    return loaded(log);
  }

  /** An HTTP broker (one echo upstream) whose module loads go to a fresh log. */
  async function httpBroker(): Promise<{ http: HttpBroker; log: string }> {
    const log = logFile();
    const http = await startHttpBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) }, env: { MODULE_LOG: log, NODE_OPTIONS: `--import=${HOOK}` } });
    return { http, log };
  }

  /** One call of the echo tool with `text` over a fresh session of `kind`; its result. */
  async function echoOver(url: string, kind: HttpKind, text: string): Promise<unknown> {
    const session = await connectHttp(url, kind);
    try {
      const { tools } = await session.client.listTools();
      const echo = tools.find((t) => t.name.endsWith('echo'))!;
      return await session.client.callTool({ name: echo.name, arguments: { text } });
    } finally {
      await session.close();
    }
  }

  it('stdio without otlp loads neither OpenTelemetry nor prom-client', async () => {
    const urls = await stdioBroker();
    expect(count(urls, 'better-sqlite3')).toBeGreaterThan(0); // the hook saw what the broker loads (the CLI bundle requires it)
    expect(count(urls, '@opentelemetry/')).toBe(0);
    expect(count(urls, 'prom-client')).toBe(0);
  });

  it('observability.otlp set: OpenTelemetry loads', async () => {
    const urls = await stdioBroker({ observability: { otlp: { endpoint: 'http://127.0.0.1:9/v1/traces' } } });
    expect(count(urls, '@opentelemetry/')).toBeGreaterThan(0);
  });

  it('the HTTP face loads prom-client at the first /metrics scrape, with event-loop figures in it', async () => {
    const { http, log } = await httpBroker();
    try {
      await echoOver(http.url, 'streamable', 'hi');
      expect(count(loaded(log), 'better-sqlite3')).toBeGreaterThan(0); // the hook saw the broker's own loads
      // Served and called, never scraped: prom-client (and its 10 ms event-loop timer) not started.
      expect(count(loaded(log), 'prom-client')).toBe(0);
      const cpuBefore = cpuSeconds(http.child.pid!);
      const res = await fetch(`${http.url}/metrics`);
      expect(res.status).toBe(200);
      const body = await res.text();
      const cpuAfter = cpuSeconds(http.child.pid!);
      expect(count(loaded(log), 'prom-client')).toBeGreaterThan(0);
      expect(body).toMatch(/^mcp_broker_calls_total\{.*outcome="ok".*\} 1$/m);
      // The first scrape already has samples of the event loop's delay (an empty histogram reads 9.2e9 s, NaN).
      const lag = (name: string) => Number(new RegExp(`^nodejs_eventloop_lag_${name}_seconds (\\S+)$`, 'm').exec(body)?.[1]);
      expect(lag('min')).toBeGreaterThan(0);
      expect(lag('min')).toBeLessThan(60);
      expect(Number.isFinite(lag('mean'))).toBe(true);
      // The CPU counters count from the process's start (prom-client's own from the first scrape).
      const cpu = Number(/^process_cpu_seconds_total (\S+)$/m.exec(body)?.[1]);
      if (cpuBefore !== undefined && cpuAfter !== undefined) {
        expect(cpu).toBeGreaterThanOrEqual(cpuBefore - 0.02);
        expect(cpu).toBeLessThanOrEqual(cpuAfter + 0.02);
      }
      expect(cpu).toBeGreaterThan(0.05);
    } finally {
      await http.close();
    }
  });

  it('the HTTP face loads express at its first request off /mcp, the legacy SSE transport at the first GET /sse', async () => {
    const { http, log } = await httpBroker();
    try {
      expect(await echoOver(http.url, 'streamable', 'hi')).toMatchObject({ content: [{ type: 'text', text: 'hi' }] });
      expect(count(loaded(log), 'better-sqlite3')).toBeGreaterThan(0); // the hook saw the broker's own loads
      expect(count(loaded(log), 'express')).toBe(0);
      expect(count(loaded(log), '@modelcontextprotocol/server-legacy')).toBe(0);

      const health = await fetch(`${http.url}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: 'ok' });
      expect(count(loaded(log), 'express')).toBeGreaterThan(0);
      expect(count(loaded(log), '@modelcontextprotocol/server-legacy')).toBe(0);

      expect(await echoOver(http.url, 'sse', 'over sse')).toMatchObject({ content: [{ type: 'text', text: 'over sse' }] });
      expect(count(loaded(log), '@modelcontextprotocol/server-legacy')).toBeGreaterThan(0);
    } finally {
      await http.close();
    }
  });
});
