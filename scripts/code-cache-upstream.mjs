#!/usr/bin/env node
// The upstream of the build's code cache training run (scripts/bundle-cli.mjs): one read-only
// tool, `echo {text}`, over stdio; exits when its stdin ends.
import { McpServer } from '@modelcontextprotocol/server';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { z } from 'zod';

const server = new McpServer({ name: 'code-cache-training', version: '1.0.0' });
server.registerTool(
  'echo',
  { description: 'Returns its text.', inputSchema: z.object({ text: z.string() }), annotations: { readOnlyHint: true } },
  async ({ text }) => ({ content: [{ type: 'text', text }] }),
);
process.stdin.on('end', () => process.exit(0));
await server.connect(new StdioServerTransport());
