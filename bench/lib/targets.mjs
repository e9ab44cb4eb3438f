/**
 * The configurations the benchmark drives, each able to start a warm connection (for load) and
 * to measure one cold start (spawn → first `tools/list` answered).
 *
 * Families, each against its own baseline: `stdio` rows with `direct`, `http` rows with
 * `sdk-floor` (sessionful 2025-11-25), `stdio-modern` rows with `direct-modern` and
 * `http-modern` rows with `sdk-floor-modern` (a 2026-07-28 client: `versionNegotiation: auto`,
 * checked to have reached the modern era; over HTTP that is stateless). The broker's upstream
 * leg is 2025-11-25 in every row (the echo upstream's default mode).
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

/** A legacy (2025-11-25) client, or with `modern` one that negotiates and must reach 2026-07-28. */
function newClient(modern = false) {
  return new Client(
    { name: 'mcp-broker-bench', version: '1.0.0' },
    modern ? { capabilities: {}, versionNegotiation: { mode: 'auto' } } : { capabilities: {} },
  );
}

/** Throws unless the connected client is in the era its row claims. */
function checkEra(client, modern) {
  const era = client.getProtocolEra();
  if (era !== (modern ? 'modern' : 'legacy')) throw new Error(`connected in the ${era} era, expected ${modern ? 'modern' : 'legacy'}`);
}

/** The advertised names of the echo and blob tools (bare, or prefixed by a gateway). */
function pickTools(tools) {
  const find = (base) => tools.find((t) => t.name === base || t.name.endsWith(`__${base}`))?.name;
  const echo = find('echo');
  const blob = find('blob');
  if (!echo || !blob) throw new Error(`echo/blob tools not listed (got ${tools.map((t) => t.name).join(', ')})`);
  return { echo, blob };
}

async function stdioConnection(args, { env, modern = false } = {}) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args,
    env: { ...process.env, ...env },
    stderr: 'pipe',
  });
  const stderr = tail(transport.stderr);
  const client = newClient(modern);
  try {
    await client.connect(transport);
    checkEra(client, modern);
    const { tools } = await client.listTools();
    return { client, tools: pickTools(tools), pid: transport.pid, stderr, close: () => client.close() };
  } catch (err) {
    await client.close().catch(() => undefined);
    const why = stderr.text.trim().split('\n').slice(-3).join(' | ');
    throw new Error(`${err.message}${why ? ` (stderr: ${why})` : ''}`);
  }
}

async function httpConnection(server, { path = '/mcp', modern = false } = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${server.port}${path}`));
  const client = newClient(modern);
  try {
    await client.connect(transport);
    checkEra(client, modern);
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
        if (!modern) await transport.terminateSession().catch(() => undefined);
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
 * @param ctx {{ echo: string, cli: string, floor: string, bindLoopback: string, bytePipe: string, naive: string, stdioConfig: string,
 *   httpConfig: string, modernStdioConfig: string, modernHttpConfig: string, coldConfig: string, brokerNodeArgs: string[],
 *   timingFile?: (id: string) => string }} `timingFile`: where a warm broker row writes its call timing (--timing)
 *   files are absolute paths; the configs are servers.json files (one echo upstream, records to a
 *   file of their own; `coldConfig` too, so a cold start is one upstream in every row, as the
 *   issue's table measures it)
 */
export function configurations(ctx) {
  const broker = (config) => [...ctx.brokerNodeArgs, ctx.cli, '--config', config];
  const mcpProxy = packageBin('mcp-proxy');
  const supergateway = packageBin('supergateway');
  const echoCmd = `'${process.execPath}' '${ctx.echo}'`;
  const overHttp = (argsFor, options, env) => async () => httpConnection(await httpServer(argsFor, env), options);
  // With --timing, the warm broker processes write where their calls' time went (src/shared/call-timing.ts).
  const timing = (id) => (ctx.timingFile ? { MCP_BROKER_CALL_TIMING: ctx.timingFile(id) } : undefined);
  const modern = { modern: true };
  const brokerHttp = (config) => (port) => [...broker(config), '--transport', 'http', '--host', '127.0.0.1', '--port', String(port)];

  const rows = [
    {
      id: 'direct',
      label: 'direct (stdio)',
      family: 'stdio',
      baseline: true,
      launch: () => stdioConnection([ctx.echo]),
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
      id: 'naive',
      label: 'naive aggregator (reference)',
      family: 'stdio',
      // SDK Client + Server forwarding calls: no policy, no records (the issue's naive aggregator).
      launch: () => stdioConnection([ctx.naive, '--', process.execPath, ctx.echo]),
    },
    {
      id: 'broker-stdio',
      label: 'mcp-broker stdio',
      family: 'stdio',
      launch: () => stdioConnection(broker(ctx.stdioConfig), { env: timing('broker-stdio') }),
      launchCold: () => stdioConnection(broker(ctx.coldConfig)),
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
      launch: overHttp(brokerHttp(ctx.httpConfig), undefined, timing('broker-http')),
      launchCold: overHttp(brokerHttp(ctx.coldConfig)),
    },
    {
      id: 'mcp-proxy',
      label: 'mcp-proxy',
      family: 'http',
      launch: overHttp((port) => [mcpProxy, '--host', '127.0.0.1', '--port', String(port), '--server', 'stream', '--', process.execPath, ctx.echo]),
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
    },
    {
      id: 'direct-modern',
      label: 'direct modern (stdio)',
      family: 'stdio-modern',
      baseline: true,
      // The same echo tools through the SDK's serveStdio, which serves the modern opening.
      launch: () => stdioConnection([ctx.echo, '--modern'], modern),
    },
    {
      id: 'naive-modern',
      label: 'naive aggregator modern (reference)',
      family: 'stdio-modern',
      launch: () => stdioConnection([ctx.naive, '--modern', '--', process.execPath, ctx.echo], modern),
    },
    {
      id: 'broker-stdio-modern',
      label: 'mcp-broker stdio modern',
      family: 'stdio-modern',
      launch: () => stdioConnection(broker(ctx.modernStdioConfig), { ...modern, env: timing('broker-stdio-modern') }),
      launchCold: () => stdioConnection(broker(ctx.coldConfig), modern),
    },
    {
      id: 'sdk-floor-modern',
      label: 'SDK modern HTTP floor',
      family: 'http-modern',
      baseline: true,
      launch: overHttp((port) => [ctx.floor, '--port', String(port), '--modern'], modern),
      coldNote: 'tools in-process',
    },
    {
      id: 'broker-http-modern',
      label: 'mcp-broker http modern',
      family: 'http-modern',
      launch: overHttp(brokerHttp(ctx.modernHttpConfig), modern, timing('broker-http-modern')),
      launchCold: overHttp(brokerHttp(ctx.coldConfig), modern),
    },
  ];
  return rows.map((row) => ({
    ...row,
    // Every cold start dials one echo upstream, but the floors', which host the tools.
    coldNote: row.noCold ? undefined : (row.coldNote ?? '1 upstream'),
    start: row.launch,
    /** One cold start in ms: spawn → first `tools/list` answered (launch lists); everything closed after. */
    cold: row.noCold ? undefined : () => timed(row.launchCold ?? row.launch),
  }));
}
