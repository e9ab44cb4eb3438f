/**
 * Whether the estate relay is served (issue 4 review): `estate.enabled: false` turns it off, and
 * an `estate.root` that is not a folder at start advertises no `estate__*` tools (every call to
 * them would fail) and logs one warning naming the path.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ESTATE_TOOL_NAMES } from '../../src/builtins/estate/index.js';
import { registerBuiltins } from '../../src/builtins/index.js';
import { parseConfig } from '../../src/config/load.js';
import { ToolRouter } from '../../src/router/index.js';
import { ManualClock } from '../../src/shared/clock.js';
import { silentLogger } from '../../src/shared/logger.js';
import { Scrubber } from '../../src/shared/scrub.js';
import { SqliteStore } from '../../src/store/sqlite.js';
import { Registry } from '../../src/upstream/registry.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mcp-broker-estate-served-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Registers the builtins for an `estate` config; the estate tool names and the warnings logged. */
async function served(estate: Record<string, unknown> | undefined): Promise<{ tools: string[]; warnings: Array<{ msg: string; root?: string }> }> {
  const lines: string[] = [];
  const sink = new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) });
  const logger = pino({ level: 'warn' }, sink);
  const config = parseConfig(estate === undefined ? {} : { estate }, { baseDir: dir, env: {} });
  const clock = new ManualClock();
  const registry = new Registry(silentLogger());
  const router = new ToolRouter(registry, clock);
  const store = SqliteStore.open(':memory:');
  const builtins = registerBuiltins({ config, router, registry, scrubber: new Scrubber(), clock, logger, store });
  await builtins.close();
  await store.close();
  return {
    tools: router.list().map((t) => t.name).filter((n) => n.startsWith('estate__')),
    warnings: lines.map((l) => JSON.parse(l)).filter((l) => l.level === 40),
  };
}

describe('estate relay on and off', () => {
  it('an existing root serves the seven estate__* tools, without a warning', async () => {
    mkdirSync(join(dir, 'workspace'));
    const { tools, warnings } = await served({});
    expect(tools).toHaveLength(7);
    // The names `mcp-broker approve` knows as built-ins.
    expect([...tools].sort()).toEqual([...ESTATE_TOOL_NAMES].sort());
    expect(warnings).toEqual([]);
  });

  it('a pasted config without an estate section got eight extra tools: now none, and no warning (issue 18 §7)', async () => {
    mkdirSync(join(dir, 'workspace'));
    expect(await served(undefined)).toEqual({ tools: [], warnings: [] });
    rmSync(join(dir, 'workspace'), { recursive: true });
    expect(await served(undefined)).toEqual({ tools: [], warnings: [] });
  });

  it('estate.enabled false could not turn the relay off: now no estate__* tool is registered', async () => {
    mkdirSync(join(dir, 'workspace'));
    const { tools, warnings } = await served({ enabled: false });
    expect(tools).toEqual([]);
    expect(warnings).toEqual([]);
  });

  it('a missing estate.root still advertised the tools: now none, and one warning naming the path', async () => {
    const { tools, warnings } = await served({ root: './no-such-folder' });
    expect(tools).toEqual([]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toContain(join(dir, 'no-such-folder'));
    expect(warnings[0]!.root).toBe(join(dir, 'no-such-folder'));
  });

  it('a root that is a file is not served either', async () => {
    writeFileSync(join(dir, 'plain'), 'x');
    const { tools, warnings } = await served({ root: './plain' });
    expect(tools).toEqual([]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toContain('is not a folder');
  });
});
