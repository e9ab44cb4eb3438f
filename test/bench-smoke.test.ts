/**
 * The benchmark in smoke mode (`node bench/run.js --smoke`): checks that every configuration
 * starts, answers every call correctly and is measured, and that the table and JSON come out.
 * Figures are never asserted: benchmarks are not timed tests (issue 6).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from './e2e/helpers.js';

interface SmokeResult {
  meta: { smoke: boolean };
  configurations: Array<{ id: string; status: 'ok' | 'failed' | 'unavailable'; error?: string; figures: Record<string, number | undefined>; calls: number; records?: number }>;
  targets: Array<{ status: string; text: string }>;
  versusNaive: Array<{ id: string; ratios: Record<string, number | undefined> }>;
  table: string;
}

const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-bench-smoke-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function runSmoke(out: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(ROOT, 'bench/run.js'), '--smoke', '--out', out], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('bench smoke', () => {
  it('runs every configuration once with tiny counts and writes the table and JSON', async () => {
    const out = join(dir, 'smoke.json');
    const { code, stdout, stderr } = await runSmoke(out);
    expect(code, stderr).toBe(0);
    const result = JSON.parse(readFileSync(out, 'utf8')) as SmokeResult;
    expect(result.meta.smoke).toBe(true);
    const byId = new Map(result.configurations.map((c) => [c.id, c]));
    expect([...byId.keys()].sort()).toEqual([
      'broker-http',
      'broker-http-modern',
      'broker-stdio',
      'broker-stdio-modern',
      'byte-pipe',
      'direct',
      'direct-modern',
      'mcp-proxy',
      'naive',
      'naive-modern',
      'sdk-floor',
      'sdk-floor-modern',
      'supergateway',
    ]);
    for (const id of ['direct', 'naive', 'broker-stdio', 'broker-http', 'sdk-floor', 'direct-modern', 'naive-modern', 'broker-stdio-modern', 'sdk-floor-modern', 'broker-http-modern']) {
      const c = byId.get(id)!;
      expect(c.status, `${id}: ${c.error}`).toBe('ok');
      for (const key of ['p50', 'c64', 'mib8', 'cold']) expect(c.figures[key], `${id} ${key}`).toBeGreaterThan(0);
    }
    // The c64 breakdown beside the ratios: the load's own CPU per call, and the proxy's system
    // calls where /proc has I/O accounting (elsewhere the bench prints "—" for them).
    expect(byId.get('broker-stdio')!.figures.loadCpu64, 'broker-stdio loadCpu64').toBeGreaterThan(0);
    if (existsSync('/proc/self/io')) expect(byId.get('broker-stdio')!.figures.sys64, 'broker-stdio sys64').toBeGreaterThan(0);
    // A record per call on the broker rows (the full path ran).
    for (const id of ['broker-stdio', 'broker-http', 'broker-stdio-modern', 'broker-http-modern']) expect(byId.get(id)!.records).toBe(byId.get(id)!.calls);
    expect(result.targets.length).toBeGreaterThan(0);
    expect(stdout).toContain(result.table);
    expect(stdout).toContain('targets (mcp-broker');
    expect(stdout).toContain('stdio, 2026-07-28 client');
    // Each stdio broker row against the naive SDK aggregator of its era, same run.
    expect(result.versusNaive.map((v) => v.id)).toEqual(['broker-stdio', 'broker-stdio-modern']);
    for (const v of result.versusNaive) for (const key of ['p50', 'c64', 'mib8', 'cold']) expect(v.ratios[key], `${v.id} ${key}`).toBeGreaterThan(0);
    expect(stdout).toContain('against the naive SDK aggregator');
  }, 300_000);
});
