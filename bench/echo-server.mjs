#!/usr/bin/env node
/**
 * The benchmark's upstream: a tiny MCP server built on the SDK's `McpServer`, with two tools.
 *
 * - `echo {text}`  → one text block holding `text` unchanged;
 * - `blob {bytes}` → one text block of exactly `bytes` bytes of ASCII prose (cached per size).
 *
 * Both are marked read-only. Modes:
 *   node bench/echo-server.mjs                 stdio (default); exits when stdin ends
 *   node bench/echo-server.mjs --modern        stdio through the SDK's `serveStdio`: both eras, a
 *                                              2026-07-28 client's `server/discover` opening served
 *                                              modern (the broker rows keep the default, so their
 *                                              upstream leg stays 2025-11-25)
 *   node bench/echo-server.mjs --http [port]   Streamable HTTP at http://127.0.0.1:<port>/mcp
 *                                              (port 0 or absent: any free port), the same code
 *                                              as bench/sdk-http-floor.mjs
 */
import { serveStdio, StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { McpServer } from '@modelcontextprotocol/server';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';

/** A paragraph of ordinary text; `blob` repeats it. No secret shapes, so scrubbing changes nothing. */
const PROSE =
  'The quick brown fox jumps over the lazy dog; 0123456789 times, with commas, "quotes", ' +
  'and a path like /usr/share/doc/README.md plus key_name=value pairs and e-mail@example.org.\n';

const blobs = new Map();

/** `bytes` bytes of ASCII prose, cached so the upstream's cost stays flat. */
export function blobText(bytes) {
  let text = blobs.get(bytes);
  if (text === undefined) {
    text = PROSE.repeat(Math.ceil(bytes / PROSE.length)).slice(0, bytes);
    if (blobs.size > 8) blobs.clear();
    blobs.set(bytes, text);
  }
  return text;
}

/** A fresh `McpServer` with the `echo` and `blob` tools (one per session over HTTP). */
export function createEchoServer() {
  const server = new McpServer({ name: 'bench-echo', version: '1.0.0' });
  server.registerTool(
    'echo',
    {
      description: 'Returns its text argument unchanged.',
      inputSchema: z.object({ text: z.string() }),
      annotations: { readOnlyHint: true },
    },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  server.registerTool(
    'blob',
    {
      description: 'Returns a text of exactly `bytes` bytes.',
      inputSchema: z.object({ bytes: z.number().int().min(0).max(256 * 1024 * 1024) }),
      annotations: { readOnlyHint: true },
    },
    async ({ bytes }) => ({ content: [{ type: 'text', text: blobText(bytes) }] }),
  );
  return server;
}

async function main() {
  const args = process.argv.slice(2);
  const http = args.indexOf('--http');
  if (http !== -1) {
    const { serveSdkHttp } = await import('./sdk-http-floor.mjs');
    const port = Number(args[http + 1] ?? 0) || 0;
    await serveSdkHttp({ port });
    return;
  }
  // The SDK's stdio server ignores stdin EOF; an upstream must go when its client does.
  process.stdin.on('end', () => process.exit(0));
  if (args.includes('--modern')) {
    serveStdio(() => createEchoServer());
    return;
  }
  const server = createEchoServer();
  await server.connect(new StdioServerTransport());
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err) => {
    process.stderr.write(`bench echo-server: ${err?.stack ?? err}\n`);
    process.exit(1);
  });
}
