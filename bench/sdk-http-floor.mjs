#!/usr/bin/env node
/**
 * The HTTP floor: the SDK's own Streamable HTTP server transport hosting the echo tools
 * in-process (no proxy, no upstream hop), on a bare `node:http` server bound to 127.0.0.1.
 * Stateful: one `McpServer` + `StreamableHTTPServerTransport` per `Mcp-Session-Id`, as the SDK's
 * examples do. Whatever an HTTP-serving proxy costs beyond this row is its own.
 *
 * With `--modern`: the SDK's stateless modern entry instead, `createMcpHandler(…, {legacy:
 * 'reject'})` behind `toNodeHandler`, one `McpServer` per request (the 2026-07-28 floor).
 *
 *   node bench/sdk-http-floor.mjs [--port N] [--modern]     (default port 0: any free port)
 *
 * Prints one line `{"port":N}` on stdout once listening; exits on SIGTERM or stdin EOF.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';
import { NodeStreamableHTTPServerTransport, toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler } from '@modelcontextprotocol/server';
import { createEchoServer } from './echo-server.mjs';

/** The modern floor's request handler: stateless, strict (2025-era requests refused), at `/mcp`. */
function modernHandler() {
  const serve = toNodeHandler(createMcpHandler(() => createEchoServer(), { legacy: 'reject' }));
  return async (req, res) => {
    if (!req.url || !req.url.startsWith('/mcp')) {
      res.writeHead(404).end();
      return;
    }
    await serve(req, res);
  };
}

/** Serves the echo tools over Streamable HTTP at `/mcp` (`modern`: the stateless 2026-07-28 entry); resolves with the bound port. */
export async function serveSdkHttp({ port = 0, host = '127.0.0.1', modern = false } = {}) {
  const sessions = new Map();
  const http = createServer(modern ? modernHandler() : async (req, res) => {
    try {
      if (!req.url || !req.url.startsWith('/mcp')) {
        res.writeHead(404).end();
        return;
      }
      const id = req.headers['mcp-session-id'];
      let transport = typeof id === 'string' ? sessions.get(id) : undefined;
      if (!transport) {
        if (typeof id === 'string') {
          res.writeHead(404, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }));
          return;
        }
        transport = new NodeStreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sid) => sessions.set(sid, transport),
        });
        transport.onclose = () => {
          if (transport.sessionId) sessions.delete(transport.sessionId);
        };
        await createEchoServer().connect(transport);
      }
      await transport.handleRequest(req, res);
    } catch (err) {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(err));
    }
  });
  await new Promise((resolve, reject) => {
    http.once('error', reject);
    http.listen(port, host, resolve);
  });
  const bound = http.address().port;
  process.stdout.write(JSON.stringify({ port: bound }) + '\n');
  const stop = () => {
    http.close();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdin.on('end', stop);
  process.stdin.resume();
  return bound;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const i = process.argv.indexOf('--port');
  serveSdkHttp({ port: i === -1 ? 0 : Number(process.argv[i + 1]) || 0, modern: process.argv.includes('--modern') }).catch((err) => {
    process.stderr.write(`bench sdk-http-floor: ${err?.stack ?? err}\n`);
    process.exit(1);
  });
}
