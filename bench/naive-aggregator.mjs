#!/usr/bin/env node
/**
 * The naive aggregator (reference row): what a gateway is when it only aggregates. One SDK
 * `Client` dials the upstream over stdio at start; one SDK `Server` over stdio lists the
 * upstream's tools under a `<name>__` prefix and forwards each `tools/call` with
 * `client.callTool`. No policy, no records, no scrubbing, no budget, breaker or retry, no deadline
 * but the SDK's default request timeout: the "naive SDK Client+Server aggregator", on the
 * SDK's v2 line like the other rows.
 *
 *   node bench/naive-aggregator.mjs [--modern] -- <command> [args…]
 *
 * `--modern` serves through the SDK's `serveStdio` (both eras; a negotiating client reaches
 * 2026-07-28), otherwise `StdioServerTransport` (2025-11-25 and older). Exits when stdin ends.
 */
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Server } from '@modelcontextprotocol/server';
import { serveStdio, StdioServerTransport } from '@modelcontextprotocol/server/stdio';

const PREFIX = 'echo__';

const argv = process.argv.slice(2);
const dash = argv.indexOf('--');
if (dash === -1 || dash === argv.length - 1) {
  process.stderr.write('usage: naive-aggregator.mjs [--modern] -- <command> [args…]\n');
  process.exit(2);
}
const [command, ...args] = argv.slice(dash + 1);
const modern = argv.slice(0, dash).includes('--modern');

const upstream = new Client({ name: 'naive-aggregator', version: '1.0.0' }, { capabilities: {} });
// The whole environment, as the direct row's upstream and the broker's get it (the SDK's default passes only a few variables).
const dialled = upstream.connect(new StdioClientTransport({ command, args, env: process.env, stderr: 'inherit' }));

/** A fresh `Server` forwarding to the one upstream client. */
function aggregator() {
  const server = new Server({ name: 'naive-aggregator', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler('tools/list', async () => {
    await dialled;
    const { tools } = await upstream.listTools();
    return { tools: tools.map((t) => ({ ...t, name: PREFIX + t.name })) };
  });
  server.setRequestHandler('tools/call', async (request) => {
    await dialled;
    const { name, arguments: input } = request.params;
    return upstream.callTool({ name: name.startsWith(PREFIX) ? name.slice(PREFIX.length) : name, arguments: input });
  });
  return server;
}

// The SDK's stdio server ignores stdin EOF; a stdio server must go when its client does.
process.stdin.on('end', () => process.exit(0));
dialled.catch((err) => {
  process.stderr.write(`naive-aggregator: upstream: ${err?.message ?? err}\n`);
  process.exit(1);
});
if (modern) serveStdio(() => aggregator());
else await aggregator().connect(new StdioServerTransport());
