/**
 * The CLI a user meets (issue 18 §6): an unknown command says so, a port in use names `--port`,
 * and SIGTERM to `npm start` ends the broker and its upstreams.
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { rmSync } from 'node:fs';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, ROOT, fixture, isAlive, nodeServer, waitFor, writeConfig } from './helpers.js';

function runCli(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stderr })));
}

describe('the CLI a user meets', () => {
  const { dir, configPath } = writeConfig({ echo: nodeServer(fixture('echo.mjs')) });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('an unknown command says "unknown command" and exits 2 (not "too many arguments for serve")', async () => {
    const { code, stderr } = await runCli(['frobnicate', '--config', configPath]);
    expect(code).toBe(2);
    expect(stderr).toContain('unknown command "frobnicate"');
    expect(stderr).not.toContain('too many arguments');
    expect(stderr).toContain('calls');
  });

  it('a port in use names --port, in one plain line, and exits 1', async () => {
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const { code, stderr } = await runCli(['--config', configPath, '--transport', 'http', '--port', String(port)]);
      expect(code).toBe(1);
      expect(stderr).toContain(`mcp-broker: 127.0.0.1:${port} is already in use; choose another port with --port`);
    } finally {
      taken.close();
    }
  });

  it('SIGTERM to npm start ends the broker and its upstreams (the script execs node, so npm\'s signal reaches it)', async () => {
    const script: string = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.start;
    // What npm runs after the build step, with this test's config; npm signals this shell.
    const serve = script.replace(/^npm run build --silent && /, '').replace('--config servers.json', `--config ${configPath}`);
    expect(serve).not.toBe(script);
    const shell = spawn('sh', ['-c', serve], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    shell.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => shell.once('exit', (code) => resolve(code)));
    // The echo upstream is up once tools/list answers.
    shell.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } })}\n`);
    let out = '';
    shell.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    await waitFor(() => out.includes('"id":1'), 'initialize answered', 20_000);
    const children = readFileSync(`/proc/${shell.pid}/task/${shell.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    shell.kill('SIGTERM');
    expect(await exited).toBe(0);
    for (const pid of children) await waitFor(() => !isAlive(pid), `upstream ${pid} gone`);
    expect(stderr).toContain('SIGTERM');
  });

  it('logs are JSON lines when stderr is piped, readable lines with MCP_BROKER_LOG_FORMAT=pretty (as on a terminal)', async () => {
    // stdin is /dev/null: the broker starts, sees EOF and shuts down, logging "shutting down".
    const json = await runCli(['--config', configPath]);
    const line = json.stderr.split('\n').find((l) => l.includes('shutting down'))!;
    expect(JSON.parse(line)).toMatchObject({ msg: 'shutting down' });
    const pretty = await runCli(['--config', configPath], { ...process.env, MCP_BROKER_LOG_FORMAT: 'pretty' });
    const readable = pretty.stderr.split('\n').find((l) => l.includes('shutting down'))!;
    expect(readable).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO.*: shutting down/);
  });
});
