/**
 * DESIGN.md "Folders": dependencies point one way (transports → gateway → broker → router →
 * upstream; config, shared and audit import nothing of ours above them). The rules are
 * `.dependency-cruiser.cjs`. `.dependency-cruiser-known-violations.json` (the baseline
 * `--ignore-known` reads) is empty: we carry no violation, so every one fails here, named by
 * rule and files. (The router's call types live in router/call.ts; broker/types.ts extends them.)
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ROOT } from './e2e/helpers.js';

const run = promisify(execFile);
const DEPCRUISE = join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');

interface Violation {
  from: string;
  to: string;
  rule: { name: string; severity: string };
}

describe('architecture', () => {
  it("src/ imports follow DESIGN.md's one-way arrows (dependency-cruiser)", async () => {
    const { stdout } = await run(process.execPath, [DEPCRUISE, 'src', '--config', '.dependency-cruiser.cjs', '--ignore-known', '--output-type', 'json'], {
      cwd: ROOT,
      maxBuffer: 64 * 1024 * 1024,
    }).catch((err: { stdout?: string; stderr?: string }) => {
      // depcruise exits non-zero when it finds errors; the JSON on stdout still says which.
      if (!err.stdout) throw new Error(`dependency-cruiser did not run: ${err.stderr ?? String(err)}`);
      return { stdout: err.stdout };
    });
    const result = JSON.parse(stdout) as { summary: { violations: Violation[]; totalCruised: number } };
    expect(result.summary.totalCruised).toBeGreaterThan(100);
    const found = result.summary.violations.filter((v) => v.rule.severity === 'error').map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);
    expect(found).toEqual([]);
  });
});
