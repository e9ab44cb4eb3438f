/**
 * The configurations the benchmark drives, each able to start a warm connection (for load) and
 * to measure one cold start (spawn → first `tools/list` answered).
 *
 * Families: `stdio` rows are compared with `direct`, `http` rows with `sdk-floor`.
 * A connection: `{ client, tools: {echo, blob}, pid, stderr, close() }`, where `pid` is the
 * process whose memory counts (the proxy; for the floor the server itself).
 */
import { setMaxListeners } from 'node:events';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { freePort, spawnListening, tail } from './procs.mjs';

const require = createRequire(import.meta.url);

/** Resolves an installed package's bin script (run with `node`, never through a shell wrapper). */
function packageBin(pkg, bin) {
  const manifest = require.resolve(`${pkg}/package.json`);
  const json = require(manifest);
  const rel = typeof json.bin === 'string' ? json.bin : json.bin[bin ?? pkg];
  return join(manifest, '..', rel);
}

function newClient() {
  return new Client({ name: 'mcp-broker-bench', version: '1.0.0' }, { capabilities: {} });
}

/** The advertised names of the echo and blob tools (bare, or prefixed by a gateway). */
function pickTools(tools) {
  const find = (base) => tools.find((t) => t.name === base || t.name.endsWith(`__${base}`))?.name;
  const echo = find('echo');
  const blob = find('blob');
  if (!echo || !blob) throw new Error(`echo/blob tools not listed (got ${tools.map((t) => t.name).join(', ')})`);
  return { echo, blob };
}

async function stdioConnection(args, { env } = {}) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args,
    env: { ...process.env, ...env },
    stderr: 'pipe',
  });
  const stderr = tail(transport.stderr);
  const client = newClient();
  try {
    await client.connect(transport);
    const { tools } = await client.listTools();
    return { client, tools: pickTools(tools), pid: transport.pid, stderr, close: () => client.close() };
  } catch (err) {
    await client.close().catch(() => undefined);
    const why = stderr.text.trim().split('\n').slice(-3).join(' | ');
    throw new Error(`${err.message}${why ? ` (stderr: ${why})` : ''}`);
  }
}

async function httpConnection(server, path = '/mcp') {
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${server.port}${path}`));
  const client = newClient();
  try {
    await client.connect(transport);
    // The SDK's HTTP client hands one AbortSignal to every fetch and undici only drops its
    // listener at GC: silence the MaxListeners warning (the cost is the SDK client's, same for every row).
    if (transport._abortController) setMaxListeners(0, transport._abortController.signal);
    const { tools } = await client.listTools();
    return {
      client,
      tools: pickTools(tools),
      pid: server.pid,
      stderr: server.stderr,
      async close() {
        await transport.terminateSession().catch(() => undefined);
        await client.close().catch(() => undefined);
        await server.stop();
      },
    };
  } catch (err) {
    await client.close().catch(() => undefined);
    await server.stop();
    throw err;
  }
}

/** Starts an HTTP server process on a free port; `argsFor(port)` gives its argv. */
async function httpServer(argsFor, env) {
  const port = await freePort();
  const proc = await spawnListening(argsFor(port), { port, env });
  return { ...proc, port };
}

/** Milliseconds from calling `start()` to its resolving; what it started is closed after. */
async function timed(start) {
  const t0 = performance.now();
  const started = await start();
  const ms = performance.now() - t0;
  await started.close();
  return ms;
}

/**
 * @param ctx {{ echo: string, cli: string, floor: string, bindLoopback: string, bytePipe: string, stdioConfig: string,
 *   httpConfig: string, coldConfig: string, brokerNodeArgs: string[] }} files are absolute paths;
 *   the configs are servers.json files (one echo upstream; three for `coldConfig`)
 */
export function configurations(ctx) {
  const broker = (config) => [...ctx.brokerNodeArgs, ctx.cli, '--config', config];
  const mcpProxy = packageBin('mcp-proxy');
  const supergateway = packageBin('supergateway');
  const echoCmd = `'${process.execPath}' '${ctx.echo}'`;
  const overHttp = (argsFor) => async () => httpConnection(await httpServer(argsFor));

  const rows = [
    {
      id: 'direct',
      label: 'direct (stdio)',
      family: 'stdio',
      baseline: true,
      launch: () => stdioConnection([ctx.echo]),
      // Three upstreams dialled in parallel, as a client with three servers configured does.
      launchCold: async () => {
        const conns = await Promise.all([0, 1, 2].map(() => stdioConnection([ctx.echo])));
        return { close: () => Promise.all(conns.map((c) => c.close())) };
      },
      coldNote: '3 upstreams',
    },
    {
      id: 'byte-pipe',
      label: 'byte pipe (reference)',
      family: 'stdio',
      // Copies bytes and parses nothing: the least any stdio proxy can cost.
      launch: () => stdioConnection([ctx.bytePipe, process.execPath, ctx.echo]),
      noCold: true,
    },
    {
      id: 'broker-stdio',
      label: 'mcp-broker stdio',
      family: 'stdio',
      launch: () => stdioConnection(broker(ctx.stdioConfig)),
      launchCold: () => stdioConnection(broker(ctx.coldConfig)),
      coldNote: '3 upstreams',
    },
    {
      id: 'sdk-floor',
      label: 'SDK HTTP floor',
      family: 'http',
      baseline: true,
      launch: overHttp((port) => [ctx.floor, '--port', String(port)]),
      coldNote: 'tools in-process',
    },
    {
      id: 'broker-http',
      label: 'mcp-broker http',
      family: 'http',
      launch: overHttp((port) => [...broker(ctx.httpConfig), '--transport', 'http', '--host', '127.0.0.1', '--port', String(port)]),
      launchCold: overHttp((port) => [...broker(ctx.coldConfig), '--transport', 'http', '--host', '127.0.0.1', '--port', String(port)]),
      coldNote: '3 upstreams',
    },
    {
      id: 'mcp-proxy',
      label: 'mcp-proxy',
      family: 'http',
      launch: overHttp((port) => [mcpProxy, '--host', '127.0.0.1', '--port', String(port), '--server', 'stream', '--', process.execPath, ctx.echo]),
      coldNote: '1 upstream (cannot aggregate)',
    },
    {
      id: 'supergateway',
      label: 'supergateway',
      family: 'http',
      // No host option: the preload binds it to 127.0.0.1. Logging off, stateful (one child per session).
      launch: overHttp((port) => [
        '--import',
        ctx.bindLoopback,
        supergateway,
        '--stdio',
        echoCmd,
        '--outputTransport',
        'streamableHttp',
        '--stateful',
        '--port',
        String(port),
        '--logLevel',
        'none',
      ]),
      coldNote: '1 upstream (cannot aggregate)',
    },
  ];
  return rows.map((row) => ({
    ...row,
    start: row.launch,
    /** One cold start in ms: spawn → first `tools/list` answered (launch lists); everything closed after. */
    cold: row.noCold ? undefined : () => timed(row.launchCold ?? row.launch),
  }));
}
