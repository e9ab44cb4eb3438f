/** Small helpers shared by the broker-* end-to-end tests (on top of helpers.ts). */
import { execFile } from 'node:child_process';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { CLI, fixture, nodeServer, type StartedBroker } from './helpers.js';

/** The stdio fixture for the call path, with FIXTURE_LOG passed through the environment (not as a secret). */
export function brokerUpstream(more: Record<string, unknown> = {}): Record<string, unknown> {
  return nodeServer(fixture('broker-upstream.mjs'), { inheritEnv: ['FIXTURE_LOG'], ...more });
}

/** Runs `node dist/cli.cjs <args>` to completion. */
export function runCli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** The config file of a started broker. */
export function configOf(broker: StartedBroker): string {
  return join(broker.dir, 'servers.json');
}

/** Calls a tool and returns the result with its outcome. */
export async function callTool(broker: StartedBroker, name: string, args: Record<string, unknown> = {}, timeout = 20_000) {
  const result = (await broker.client.callTool({ name, arguments: args }, { timeout })) as CallToolResult;
  return { result, outcome: result._meta?.['mcp-broker/outcome'] as string, text: (result.content[0] as { text?: string } | undefined)?.text ?? '' };
}

/** Events the fixture logged to FIXTURE_LOG. */
export function fixtureEvents(path: string): Array<{ event: string; tool: string; requestId?: unknown }> {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/** How many calls of `tool` reached the fixture. */
export function callsOf(path: string, tool: string): number {
  return fixtureEvents(path).filter((e) => e.event === 'call' && e.tool === tool).length;
}
