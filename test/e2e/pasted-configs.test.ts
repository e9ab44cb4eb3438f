/**
 * "Paste your config" (issue 18 §2): the files Claude Desktop, Claude Code, Cursor and VS Code
 * write, each served as pasted through the real CLI to real upstreams (stdio children, a
 * Streamable HTTP server, an SSE-only server).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, fixture } from './helpers.js';

const text = (r: { content?: unknown }) => ((r.content as Array<{ text?: string }>)[0]?.text ?? '') as string;

/** Writes `files` (path relative to a temp project → text) and serves `config` through the CLI. */
async function serve(files: Record<string, string>, config: string, env: Record<string, string> = {}) {
  const project = realpathSync(mkdtempSync(join(tmpdir(), 'mcp-broker-paste-e2e-')));
  for (const [rel, body] of Object.entries(files)) {
    mkdirSync(dirname(join(project, rel)), { recursive: true });
    writeFileSync(join(project, rel), body);
  }
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, '--config', join(project, config)],
    env: { ...(process.env as Record<string, string>), ...env },
    cwd: project,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const client = new Client({ name: 'e2e', version: '1.0.0' });
  const close = async () => {
    await client.close().catch(() => undefined);
    rmSync(project, { recursive: true, force: true });
  };
  try {
    await client.connect(transport, { timeout: 20_000 });
  } catch (err) {
    await close();
    throw new Error(`broker did not start: ${(err as Error).message}\n--- stderr ---\n${stderr}`);
  }
  return { client, project, close, stderr: () => stderr };
}

/** Starts `http-echo.mjs <mode> <name>`; resolves with its base URL. */
async function startHttpFixture(mode: 'sse' | 'streamable', name: string, children: ChildProcess[]): Promise<string> {
  const child = spawn(process.execPath, [fixture('http-echo.mjs'), mode, name], { stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) => resolve((JSON.parse(line) as { port: number }).port));
    child.once('exit', (code) => reject(new Error(`fixture exited ${code}`)));
  });
  return `http://127.0.0.1:${port}`;
}

describe('pasted client configs, served through the CLI', () => {
  const children: ChildProcess[] = [];
  let legacy: string;
  let modern: string;
  beforeAll(async () => {
    [legacy, modern] = await Promise.all([startHttpFixture('sse', 'legacy', children), startHttpFixture('streamable', 'modern', children)]);
  });
  afterAll(() => {
    for (const child of children) child.stdin?.end();
  });

  it('issue 18 §2: a Claude Desktop claude_desktop_config.json (stdio) serves its tools', async () => {
    const config = JSON.stringify({ mcpServers: { echo: { command: 'node', args: [fixture('echo.mjs')], env: {} } } }, null, 2);
    const broker = await serve({ 'claude_desktop_config.json': config }, 'claude_desktop_config.json');
    try {
      expect(text(await broker.client.callTool({ name: 'echo__echo', arguments: { text: 'desktop' } }))).toBe('desktop');
    } finally {
      await broker.close();
    }
  });

  it('issue 18 §2: a Claude Code .mcp.json (type http, a URL-only SSE server, ${VAR} and ${VAR:-default}) serves both', async () => {
    const config = JSON.stringify({
      mcpServers: {
        modern: { type: 'http', url: '${MODERN_URL}/mcp' },
        legacy: { url: '${LEGACY_URL:-http://127.0.0.1:9}/sse' },
      },
    });
    const broker = await serve({ '.mcp.json': config }, '.mcp.json', { MODERN_URL: modern, LEGACY_URL: legacy });
    try {
      expect(text(await broker.client.callTool({ name: 'modern__echo', arguments: { text: 'code' } }))).toBe('modern: code');
      expect(text(await broker.client.callTool({ name: 'legacy__echo', arguments: { text: 'code' } }))).toBe('legacy: code');
    } finally {
      await broker.close();
    }
  });

  it('issue 18 §2: a Cursor .cursor/mcp.json with comments, trailing commas and URL-only entries serves them', async () => {
    const config = `{
  // Cursor: a URL is Streamable HTTP, else SSE
  "mcpServers": {
    "remote": { "url": "${modern}/mcp" },
    "old": { "url": "${legacy}/sse", }, /* SSE only */
  },
}
`;
    const broker = await serve({ '.cursor/mcp.json': config }, '.cursor/mcp.json');
    try {
      expect(text(await broker.client.callTool({ name: 'remote__echo', arguments: { text: 'cursor' } }))).toBe('modern: cursor');
      expect(text(await broker.client.callTool({ name: 'old__echo', arguments: { text: 'cursor' } }))).toBe('legacy: cursor');
    } finally {
      await broker.close();
    }
  });

  it('issue 18 §2: a VS Code .vscode/mcp.json (servers, inputs from MCP_BROKER_INPUT_<ID>, envFile, ${workspaceFolder}) serves it', async () => {
    const config = JSON.stringify(
      {
        inputs: [{ type: 'promptString', id: 'api-key', description: 'API key', password: true }],
        servers: {
          env: {
            type: 'stdio',
            command: 'node',
            args: [fixture('env.mjs')],
            env: { API_KEY: '${input:api-key}', WS: '${workspaceFolder}' },
            envFile: '${workspaceFolder}/.env',
          },
          web: { type: 'http', url: `${modern}/mcp` },
        },
      },
      null,
      2,
    );
    const secret = 'vscode-input-secret-0123';
    const broker = await serve({ '.vscode/mcp.json': config, '.env': '# from the file\nMODE=dotf\nWS=overridden\n' }, '.vscode/mcp.json', {
      MCP_BROKER_INPUT_API_KEY: secret,
    });
    try {
      const out = text(await broker.client.callTool({ name: 'env__env', arguments: {} }));
      const childEnv = JSON.parse(out) as Record<string, string>;
      expect(childEnv.MODE).toBe('dotf');
      // `env` wins over the file; `${workspaceFolder}` is the project above .vscode.
      expect(childEnv.WS).toBe(broker.project);
      // The input reached the child (and, as a secret, is scrubbed on the way back).
      expect(childEnv.API_KEY).not.toContain('${input');
      expect(childEnv.API_KEY).toBeTruthy();
      expect(out).not.toContain(secret);
      expect(text(await broker.client.callTool({ name: 'web__echo', arguments: { text: 'vscode' } }))).toBe('modern: vscode');
    } finally {
      await broker.close();
    }
  });
});
