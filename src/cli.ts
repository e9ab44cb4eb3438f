#!/usr/bin/env node
/**
 * `mcp-broker`: argv → config → gateway → transport. The only place that exits the process.
 * Exit codes (DESIGN.md "Contract"): 0 clean shutdown, 2 bad config or options, 1 anything else.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { loadConfigFile, type LoadedConfig } from './config/load.js';
import { Gateway, VERSION } from './gateway.js';
import { ConfigError, messageOf } from './shared/errors.js';
import { createLogger, LOG_LEVELS, type Logger } from './shared/logger.js';
import { Scrubber } from './shared/scrub.js';
import { serveStdio } from './transports/stdio.js';

const program = new Command('mcp-broker')
  .description('An MCP gateway: serves the upstream MCP servers of servers.json as one server, every tool call judged and recorded.')
  .version(VERSION)
  .showHelpAfterError();

program
  .command('serve', { isDefault: true })
  .description('serve the merged roster (default command)')
  .option('-c, --config <file>', 'servers.json to serve', 'servers.json')
  .addOption(new Option('-t, --transport <kind>', 'downstream transport').choices(['stdio', 'http']).default('stdio'))
  .option('--host <host>', 'address to bind (http)', '127.0.0.1')
  .option('-p, --port <port>', 'port to listen on (http)', parsePort, 8080)
  .addOption(new Option('--log-level <level>', 'log level (stderr)').choices([...LOG_LEVELS]).env('MCP_BROKER_LOG_LEVEL').default('info'))
  .action(async (opts: { config: string; transport: 'stdio' | 'http'; host: string; port: number; logLevel: string }) => {
    const config = loadOrExit(opts.config);
    const scrubber = new Scrubber(config.secrets);
    const logger = createLogger({ level: opts.logLevel, scrubber });
    const gateway = new Gateway(config, { logger, scrubber });
    const shutdown = installShutdown(gateway, logger);
    if (opts.transport === 'http') {
      const { serveHttp } = await import('./transports/http.js');
      try {
        await gateway.start();
        await serveHttp(gateway, { host: opts.host, port: opts.port });
      } catch (err) {
        fail(err, logger);
      }
      return;
    }
    const serving = await serveStdio(gateway, { onStartError: (err) => fail(err, logger) });
    void serving.closed.then(() => shutdown('stdin closed'));
    if (process.stdin.isTTY) {
      try {
        await gateway.start();
      } catch (err) {
        fail(err, logger);
      }
      printBanner(gateway);
    }
  });

await program.parseAsync(process.argv);

function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidArgumentError('must be an integer from 0 to 65535');
  return port;
}

/** Loads the config or exits 2 with the JSON path and what was wrong. */
function loadOrExit(file: string): LoadedConfig {
  try {
    return loadConfigFile(file);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`mcp-broker: bad config: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}

function fail(err: unknown, logger: Logger): never {
  if (err instanceof ConfigError) {
    process.stderr.write(`mcp-broker: bad config: ${err.message}\n`);
    logger.flush?.();
    process.exit(2);
  }
  logger.fatal({ err: messageOf(err) }, 'mcp-broker failed');
  logger.flush?.();
  process.exit(1);
}

function installShutdown(gateway: Gateway, logger: Logger): (why: string) => Promise<void> {
  let stopping: Promise<void> | undefined;
  const shutdown = (why: string) => {
    stopping ??= (async () => {
      logger.info({ why }, 'shutting down');
      const force = setTimeout(() => {
        gateway.kill();
        process.exit(0);
      }, 8000);
      force.unref();
      await gateway.stop();
      logger.flush?.();
      process.exit(0);
    })();
    return stopping;
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGHUP', () => void shutdown('SIGHUP'));
  process.stdout.on('error', () => void shutdown('stdout closed'));
  return shutdown;
}

function printBanner(gateway: Gateway): void {
  const lines = ['', `mcp-broker ${VERSION} is serving ${gateway.config.file ?? 'servers.json'} on stdio.`, ''];
  for (const u of gateway.registry.upstreams) {
    const tools = [...gateway.registry.roster.tools.values()].filter((t) => t.server === u.name).length;
    const state = u.status.state === 'ready' ? `ready, ${tools} tools` : `${u.status.state}${u.status.message ? `: ${u.status.message}` : ''}`;
    lines.push(`  ${u.name.padEnd(16)} ${state}`);
  }
  lines.push(
    '',
    `  ${gateway.router.list().length} tools in all.`,
    '',
    'stdin is a terminal, so no MCP client is attached. To connect one:',
    '  - Claude Desktop / Cursor: add {"command": "node", "args": ["<repo>/dist/cli.js", "--config", "<repo>/servers.json"]}',
    '  - MCP inspector:  npx mcp-inspector-cli --cli node <repo>/dist/cli.js --config <repo>/servers.json --method tools/list',
    '',
    'Press Ctrl-C to stop.',
    '',
  );
  process.stderr.write(lines.join('\n'));
}
