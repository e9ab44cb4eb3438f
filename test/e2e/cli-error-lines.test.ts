/**
 * The one-line errors the CLI prints to stderr (`mcp-broker: bad config: …`, `mcp-broker: …`)
 * can hold an upstream's text: two upstreams' tools that would get one advertised name are named
 * as each upstream spelled them. Printed raw, a tool name's escape sequences reached the
 * operator's terminal (an OSC 52 clipboard write, a C1 CSI, a right-to-left override); and a
 * name of any length was printed whole. Through the real CLI: `check`, and `serve` over HTTP,
 * each refused at start (exit 2).
 */
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { SHOWN_COLLISION_NAME_MAX_CHARS } from '../../src/upstream/roster.js';
import { cut } from '../../src/shared/cut.js';
import { CLI, fixture, nodeServer, writeConfig } from './helpers.js';

/** Any character `printable` escapes but the newline ending each line. */
const UNPRINTABLE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/;

/** An upstream's tool name: OSC 52 (a clipboard write), C1 CSI, a right-to-left override. */
const HOSTILE = 'x\u001b]52;c;cHduZWQ=\u0007\u009b2J\u202eok';
/** The name `a__<HOSTILE>` is advertised as (each character outside [A-Za-z0-9_-] a `_`), listed as it is by another upstream with bare names. */
const ADVERTISED = 'a__x__52_c_cHduZWQ___2J_ok';

function run(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, MCP_BROKER_LOG_LEVEL: 'silent' } });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stderr })));
}

describe('the error lines the CLI prints are escaped', () => {
  const { dir, configPath } = writeConfig({
    a: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: JSON.stringify([HOSTILE]) } }),
    b: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: JSON.stringify([ADVERTISED]) }, prefix: false }),
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  for (const [command, args] of [
    ['check', ['check', '--config', configPath]],
    ['serve --transport http', ['--config', configPath, '--transport', 'http', '--port', '0']],
  ] as const) {
    it(`${command}: a roster collision names an upstream's tool with its control characters shown as escapes (regression: written raw)`, async () => {
      const { code, stderr } = await run([...args]);
      expect(code).toBe(2);
      const line = stderr.split('\n').find((l) => l.startsWith('mcp-broker: bad config: mcpServers.'));
      expect(line).toContain(`"a/x\\x1b]52;c;cHduZWQ=\\x07\\x9b2J\\u202eok"`);
      expect(line).toContain(`would both be advertised as "${ADVERTISED}"`);
      expect(stderr.slice(0, -1)).not.toMatch(UNPRINTABLE);
    });
  }
});

describe('a roster collision names each tool cut', () => {
  // Over 64 characters, a name is advertised cut with the hash of its whole original: `a`'s `<long>`
  // and bare-named `b`'s `a__<long>` are one original, so one advertised name.
  const long = 'q'.repeat(5000);
  const { dir, configPath } = writeConfig({
    a: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: JSON.stringify([long]) } }),
    b: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: JSON.stringify([`a__${long}`]) }, prefix: false }),
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('check: two 5,000-character names are each cut at SHOWN_COLLISION_NAME_MAX_CHARS with a marker (regression: printed whole)', async () => {
    const { code, stderr } = await run(['check', '--config', configPath]);
    expect(code).toBe(2);
    const line = stderr.split('\n').find((l) => l.startsWith('mcp-broker: bad config: mcpServers.'))!;
    expect(line).toContain(`"${cut(`a/${long}`, SHOWN_COLLISION_NAME_MAX_CHARS)}"`);
    expect(line).toContain(`"${cut(`b/a__${long}`, SHOWN_COLLISION_NAME_MAX_CHARS)}"`);
    expect(line.length).toBeLessThan(2 * SHOWN_COLLISION_NAME_MAX_CHARS + 200);
  });
});
