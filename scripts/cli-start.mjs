// How the built CLI starts (issue 19: cold start): runs `dist/cli.cjs` once, as a user would, with
// one stdio upstream (scripts/code-cache-upstream.mjs) and stdin closed, and reads the start from
// its "program started" debug line: `{ from: 'bundle', cache, early }` (each cache 'accepted',
// 'rejected' or 'absent') or `{ from: 'modules', why }` (src/cli-bundle.cts, `CliStart`).
// scripts/bundle-cli.mjs checks the caches it trained with it, in its own environment (this Node,
// this NODE_OPTIONS): V8 refuses a cache made under other V8 flags than a start's, at every start.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const upstream = join(dirname(fileURLToPath(import.meta.url)), 'code-cache-upstream.mjs');

/**
 * Writes the servers.json of the build's runs of the built CLI into folder `dir` and returns its
 * path: one stdio upstream (scripts/code-cache-upstream.mjs, started by this Node), the records
 * and data in `dir/data`.
 */
export function writeTrainingConfig(dir) {
  const config = join(dir, 'servers.json');
  writeFileSync(
    config,
    JSON.stringify({ mcpServers: { train: { command: process.execPath, args: [upstream] } }, broker: { records: { path: join(dir, 'data/calls.ndjson') }, dataDir: join(dir, 'data') } }),
  );
  return config;
}

/**
 * The start of the CLI in `dist` (`dist/cli.cjs`) run by this Node with `nodeArgs` before it.
 * Throws when the CLI logs no start within `timeoutMs` (default 30,000), naming its exit and the
 * end of its stderr.
 *
 * @param {string} dist
 * @param {{ nodeArgs?: string[]; timeoutMs?: number }} [options]
 */
export function builtCliStart(dist, { nodeArgs = [], timeoutMs = 30_000 } = {}) {
  const tmp = mkdtempSync(join(tmpdir(), 'mcp-broker-cli-start-'));
  try {
    const config = writeTrainingConfig(tmp);
    const run = spawnSync(process.execPath, [...nodeArgs, join(dist, 'cli.cjs'), '--config', config, '--log-level', 'debug'], {
      input: '',
      encoding: 'utf8',
      timeout: timeoutMs,
      env: { ...process.env, MCP_BROKER_LOG_FORMAT: 'json', MCP_BROKER_CODE_CACHE_OUT: '', MCP_BROKER_NO_BUNDLE: '' },
    });
    for (const line of (run.stderr ?? '').split('\n')) {
      if (line.includes('"msg":"program started"')) return JSON.parse(line).start;
    }
    const why = run.error ? run.error.message : `exit ${run.status ?? run.signal}`;
    throw new Error(`the built CLI logged no start (${why}): ${(run.stderr ?? '').trim().split('\n').slice(-3).join(' | ').slice(0, 500)}`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
