/**
 * The `mcp-broker` program: argv → config → gateway → transport. The only place that exits the
 * process. Exit codes (DESIGN.md "Contract"): 0 clean shutdown, 2 bad config or options, 1
 * anything else. Started by the bin (`cli.cts`), from the CLI bundle or from this module.
 */
import { Console } from 'node:console';
import { realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { CommanderError } from 'commander';
import type { CallsOptions } from './commands/calls.js';
import type { LoadedConfig } from './config/load.js';
import type { Gateway } from './gateway.js';
import type { ModuleImporter } from './router/modules.js';
import type { Logger } from './shared/logger.js';
import { cliStart } from './cli-bundle.cjs';
import { optimiseSooner } from './cli-tiering.js';
import { printable } from './shared/printable.js';
import { shellQuote } from './shared/shell-quote.js';
import { HeldStdin } from './transports/held-stdin.js';
import { handOverSignals, holdSignals } from './upstream/child-transport.js';
import { SERVE_OPTIONS, type ServeOption } from './serve-options.js';

/** What the bin hands the program. */
export interface CliOptions {
  /** The command line, shaped as `process.argv`; default `process.argv`. */
  readonly argv?: readonly string[];
  /**
   * How user function modules are imported; default the native `import()`. The bin passes its
   * own, which also works when the program runs from the CLI bundle (a `vm.Script`, which has no
   * `import()` of its own).
   */
  readonly importModule?: ModuleImporter;
}

/** The modules loaded once the early start has begun (commander, the config loader with zod, pino). */
async function loadLibraries() {
  const [commander, load, errors, logger, scrub, prespawn, version] = await Promise.all([
    import('commander'),
    import('./config/load.js'),
    import('./shared/errors.js'),
    import('./shared/logger.js'),
    import('./shared/scrub.js'),
    import('./upstream/prespawn.js'),
    import('./version.js'),
  ]);
  return {
    Command: commander.Command,
    InvalidArgumentError: commander.InvalidArgumentError,
    Option: commander.Option,
    loadConfigFile: load.loadConfigFile,
    loadConfigFileAsking: load.loadConfigFileAsking,
    ConfigError: errors.ConfigError,
    messageOf: errors.messageOf,
    problemLine: errors.problemLine,
    createLogger: logger.createLogger,
    LOG_LEVELS: logger.LOG_LEVELS,
    Scrubber: scrub.Scrubber,
    prespawnUpstreams: prespawn.prespawnUpstreams,
    VERSION: version.VERSION,
  };
}

/** Set by {@link main} before anything else reads it. */
let lib!: Awaited<ReturnType<typeof loadLibraries>>;
const processIo = async () => (await import('./commands/io.js')).processIo;

/** Runs the command line; resolves once the command's action has run (serving goes on after). */
export async function main(options: CliOptions = {}): Promise<void> {
  const argv = options.argv ?? process.argv;
  // The stdio upstreams of a `serve` command line were started by the bin before this program
  // loaded (cli.cts, upstream/early-spawn.ts). The gateway, the transports and the commands load
  // when used.
  lib = await loadLibraries();
  const { Command, InvalidArgumentError, LOG_LEVELS, Option, Scrubber, VERSION, createLogger, prespawnUpstreams } = lib;
  const importModule = options.importModule;

  const program = new Command('mcp-broker')
    .description('An MCP gateway: serves the upstream MCP servers of servers.json as one server, every tool call judged and recorded.')
    .version(VERSION)
    .showHelpAfterError()
    // A bad option is exit 2 like a bad config; help and version stay 0.
    .exitOverride((err: CommanderError) => {
      if (err.exitCode === 0) process.exit(0);
      process.exit(2);
    });

  program
    .command('serve', { isDefault: true })
    .description('serve the merged roster (default command)')
    // A word that is no command lands here (serve is the default): say so instead of "too many arguments".
    .argument('[command]')
    .addOption(serveOption(SERVE_OPTIONS.config))
    .addOption(serveOption(SERVE_OPTIONS.transport))
    .addOption(serveOption(SERVE_OPTIONS.host))
    .addOption(serveOption(SERVE_OPTIONS.port))
    .addOption(serveOption(SERVE_OPTIONS.logLevel))
    .addOption(serveOption(SERVE_OPTIONS.watch))
    .action(async (word: string | undefined, opts: { config: string; transport: 'stdio' | 'http'; host: string; port: number; logLevel: string; watch: boolean }) => {
      if (word !== undefined) {
        const known = program.commands.map((c) => c.name()).join(', ');
        process.stderr.write(`mcp-broker: unknown command ${JSON.stringify(word)} (commands: ${known}; see mcp-broker --help)\n`);
        process.exit(2);
      }
      const config = await loadOrExit(opts.config);
      prespawnUpstreams(config);
      // From here on the start holds the records lock: until the shutdown is installed, a signal
      // ends the process through \`exit\`, whose hook releases it (Node's default would not).
      holdSignals();
      // Read from now on, so a client that closes stdin while the broker starts is noticed.
      const stdin = opts.transport === 'stdio' ? new HeldStdin(process.stdin, config.broker.maxMessageBytes) : undefined;
      const { Gateway, otlpTracer } = await import('./gateway.js');
      const scrubber = new Scrubber(config.secrets);
      const logger = createLogger({ level: opts.logLevel, scrubber, stream: await logStream() });
      logger.debug({ start: cliStart() }, 'program started');
      if (opts.transport === 'stdio') {
        // stdout carries the protocol: console output of function modules goes to stderr instead.
        globalThis.console = new Console({ stdout: process.stderr, stderr: process.stderr });
      }
      let gateway: Gateway;
      try {
        gateway = new Gateway(config, { logger, scrubber, cliPath: realpathSync(argv[1]!), tracer: await otlpTracer(config), importModule });
        // Function modules and OpenAPI documents load now, so a bad one exits 2 before serving.
        const prepared = gateway.prepare();
        const { drainTimeoutMs } = config.broker;
        const grace = () =>
          logger.info(
            { drainTimeoutMs, requestsSent: stdin!.requestsSent },
            'stdin closed while the broker starts; the start has up to broker.drainTimeoutMs to finish (requests sent are answered) or fail (exit 2)',
          );
        if (stdin && !(await stdin.outlastsClient(prepared, drainTimeoutMs, grace))) clientGone(logger);
        await prepared;
      } catch (err) {
        fail(err, logger);
      }
      // Once the gateway is ready (Gateway.ready): the start's one-off work (config, schemas,
      // handshakes) runs at V8's own thresholds, beside the upstreams still booting.
      void gateway.ready.then(() => logger.debug({ tiering: optimiseSooner() }, 'V8 tiering for serving'));
      const beforeStop: (() => Promise<void>)[] = [];
      const shutdown = installShutdown(gateway, logger, beforeStop);
      const { watchConfig } = await import('./config/watch.js');
      let watching!: ReturnType<typeof watchConfig>;
      handOverSignals(['SIGHUP'], () => (watching = watchConfig(gateway, { file: opts.config, watch: opts.watch, logger, answers: config.answers })));
      beforeStop.push(async () => watching.close());
      if (opts.transport === 'http') {
        try {
          // --host checked and the upstreams' first dial begun before the HTTP face's modules
          // load, so the two overlap; serveHttp listens once the gateway is ready.
          const { startHttpUpstreams } = await import('./transports/http/start.js');
          const started = startHttpUpstreams(gateway, { host: opts.host });
          started.catch(() => undefined); // awaited, and failed on, in serveHttp
          // A bundled import() is one microtask, which would load the face before the dial's own
          // chain of microtasks reaches its first write: one event-loop turn lets the dial go first.
          await new Promise((resolve) => setImmediate(resolve));
          const { serveHttp } = await import('./transports/http.js');
          const serving = await serveHttp(gateway, { host: opts.host, port: opts.port, started });
          beforeStop.push(() => serving.close());
          process.stderr.write(`mcp-broker ${VERSION} serving ${serving.url}/mcp (legacy SSE at /sse, admin API at /api/v1/)\n`);
        } catch (err) {
          fail(err, logger);
        }
        return;
      }
      const { serveStdio } = await import('./transports/stdio.js');
      const serving = await serveStdio(gateway, { stdin: stdin?.release(), onStartError: (err) => fail(err, logger) });
      void serving.closed.then(() => shutdown('stdin closed'));
      if (process.stdin.isTTY) {
        try {
          await gateway.start();
        } catch (err) {
          fail(err, logger);
        }
        if (!shutdown.started) printBanner(gateway, (await import('./commands/shown-status-message.js')).shownStatusMessage);
      }
    });

  program
    .command('calls')
    .description('print call records as a table, oldest first')
    .option('-c, --config <file>', 'servers.json whose records to read', 'servers.json')
    .option('--outcome <list>', 'only these outcomes (comma-separated, e.g. denied,timeout)')
    .option('--tool <glob>', 'only tools whose advertised name matches the glob')
    .option('--since <when>', 'only calls since an ISO-8601 time or a duration back (90s, 15m, 2h, 7d)')
    .option('--limit <n>', 'the last n matching calls (default 100; 0 = all)', parseCount)
    .option('--id <callId>', 'only the call with this callId')
    .option('--json', 'print the matching records as ndjson instead of a table')
    .option('-f, --follow', 'keep printing matching calls as they are recorded (Ctrl-C to stop)')
    .action((opts: CallsOptions & { config: string }) =>
      runCommand(async () => {
        const stop = new AbortController();
        process.once('SIGINT', () => stop.abort());
        process.once('SIGTERM', () => stop.abort());
        return (await import('./commands/calls.js')).callsCommand(await loadOrExit(opts.config), opts, await processIo(), Date.now(), stop.signal);
      }),
    );

  program
    .command('approve <tool>')
    .description('approve a tool (advertised name): satisfies "ask", and re-pins a tool whose definition changed')
    .option('-c, --config <file>', 'servers.json whose store to write', 'servers.json')
    .option('--principal <name>', 'approve for this principal only (default: every principal)')
    .option('--force', 'approve a tool the broker has not seen yet')
    .action((tool: string, opts: { config: string; principal?: string; force?: boolean }) =>
      runCommand(async () =>
        (await import('./commands/approve.js')).approveCommand(await loadOrExit(opts.config), tool, { principal: opts.principal, force: opts.force, importModule }, await processIo()),
      ),
    );

  program
    .command('revoke <tool>')
    .description('revoke a tool\'s approval: it needs approval again before it runs')
    .option('-c, --config <file>', 'servers.json whose store to write', 'servers.json')
    .option('--principal <name>', 'revoke for this principal only (default: every principal)')
    .action((tool: string, opts: { config: string; principal?: string }) =>
      runCommand(async () => (await import('./commands/approve.js')).revokeCommand(await loadOrExit(opts.config), tool, { principal: opts.principal }, await processIo())),
    );

  const approvals = program.command('approvals').description('the approval inbox: calls parked on an "ask" (policy.askMode "park", or calls made as tasks)');
  approvals
    .command('list')
    .description('list parked calls waiting for a decision, newest first, a page at a time')
    .option('-c, --config <file>', 'servers.json whose store to read', 'servers.json')
    .option('--json', 'print one JSON object per line instead of the table')
    .option('--cursor <cursor>', 'read the page after the one that printed this next cursor')
    .action((opts: { config: string; json?: boolean; cursor?: string }) =>
      runCommand(async () =>
        (await import('./commands/approvals.js')).approvalsListCommand(await loadOrExit(opts.config), { json: opts.json, cursor: opts.cursor }, await processIo()),
      ),
    );
  approvals
    .command('approve <id>')
    .description('approve a parked call: it resumes through the rest of the broker path')
    .option('-c, --config <file>', 'servers.json whose store to write', 'servers.json')
    .action((id: string, opts: { config: string }) =>
      runCommand(async () => (await import('./commands/approvals.js')).approvalsDecideCommand(await loadOrExit(opts.config), id, true, {}, await processIo())),
    );
  approvals
    .command('reject <id>')
    .description('reject a parked call: it fails with the reason')
    .option('-c, --config <file>', 'servers.json whose store to write', 'servers.json')
    .option('--reason <text>', 'why (shown to the caller)')
    .action((id: string, opts: { config: string; reason?: string }) =>
      runCommand(async () =>
        (await import('./commands/approvals.js')).approvalsDecideCommand(await loadOrExit(opts.config), id, false, { reason: opts.reason }, await processIo()),
      ),
    );

  program
    .command('check')
    .description('start every upstream of the config (serving nothing), print each one\'s state, tools and error, exit 0 when the required ones are ready')
    .option('-c, --config <file>', 'servers.json to check', 'servers.json')
    .option('--json', 'print one JSON document instead of the table')
    .addOption(new Option('--log-level <level>', 'log level (stderr)').choices([...LOG_LEVELS]).default('silent'))
    .action((opts: { config: string; json?: boolean; logLevel: string }) =>
      runCommand(async () => {
        const config = await loadOrExit(opts.config);
        const logger = createLogger({ level: opts.logLevel, scrubber: new Scrubber(config.secrets), stream: await logStream() });
        const code = await (await import('./commands/check.js')).checkCommand(config, { json: opts.json }, await processIo(), { logger });
        logger.flush?.();
        return code;
      }).then(() => {
        // Exit once the answer is out, whatever an upstream left behind (a socket, a straggler).
        process.stdout.write('', () => process.exit());
      }),
    );

  await program.parseAsync([...argv]);
}

/**
 * Where logs go: readable lines (pino-pretty, to stderr, every string escaped: shared/pretty-log-stream.ts)
 * when stderr is a terminal, JSON lines when it is piped. `MCP_BROKER_LOG_FORMAT=json` or `pretty`
 * overrides the guess.
 */
async function logStream() {
  const format = process.env.MCP_BROKER_LOG_FORMAT;
  if (format === 'json' || (format !== 'pretty' && !process.stderr.isTTY)) return undefined;
  const { prettyLogStream } = await import('./shared/pretty-log-stream.js');
  return prettyLogStream({ colorize: process.stderr.isTTY });
}

/** Runs a command body and sets the exit code it returns; a throw is exit 1 with one line on stderr. */
async function runCommand(body: () => Promise<number>): Promise<void> {
  // `mcp-broker calls | head`: the reader went away; that is a normal end, not a crash.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => process.exit(err.code === 'EPIPE' ? 0 : 1));
  try {
    process.exitCode = await body();
  } catch (err) {
    sayError(lib.messageOf(err));
    process.exitCode = 1;
  }
}

function parseCount(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new lib.InvalidArgumentError('must be a non-negative integer');
  return n;
}

/** The commander option of one entry of {@link SERVE_OPTIONS} (the table the early start reads too). */
function serveOption(spec: ServeOption): InstanceType<typeof lib.Option> {
  const option = new lib.Option(spec.flags, spec.description);
  if (spec.choices) option.choices([...spec.choices]);
  if (spec.env) option.env(spec.env);
  const parse = spec.parse;
  if (parse) {
    option.argParser((value: string) => {
      try {
        return parse(value);
      } catch (err) {
        throw new lib.InvalidArgumentError(lib.messageOf(err));
      }
    });
  }
  if (spec.default !== undefined) option.default(spec.default);
  return option;
}

/**
 * Loads the config or exits 2 with every problem (its JSON path and what was wrong) on a line
 * of its own. An `${input:id}` without its `MCP_BROKER_INPUT_<ID>` is asked on the terminal
 * when stdin and stderr are one (never over a stdio client: stdin is the protocol then).
 */
async function loadOrExit(file: string): Promise<LoadedConfig> {
  try {
    if (!process.stdin.isTTY || !process.stderr.isTTY) return lib.loadConfigFile(file);
    const { terminalAsker } = await import('./config/ask.js');
    return await lib.loadConfigFileAsking(file, terminalAsker());
  } catch (err) {
    if (err instanceof lib.ConfigError) {
      for (const problem of err.problems) sayError(`bad config: ${lib.problemLine(problem)}`);
      process.exit(2);
    }
    throw err;
  }
}

function fail(err: unknown, logger: Logger): never {
  if (err instanceof lib.ConfigError) {
    for (const problem of err.problems) sayError(`bad config: ${lib.problemLine(problem)}`);
    logger.flush?.();
    process.exit(2);
  }
  // One plain line, like a config error: what a person reads first when the broker will not start.
  logger.flush?.();
  sayError(lib.messageOf(err));
  process.exit(1);
}

/**
 * stdin closed while the broker started, and the start neither finished nor failed within
 * `broker.drainTimeoutMs` after that: exit 0, as when a client closes stdin after the start
 * (nothing was served; the exit hooks release the records lock and the store and end the children).
 */
function clientGone(logger: Logger): never {
  logger.info({ why: 'stdin closed' }, 'stdin closed while the broker started; exiting');
  logger.flush?.();
  process.exit(0);
}

/**
 * Writes `mcp-broker: <text>` to stderr as one line, every control, bidi or invisible format
 * character in `text` written as an escape ({@link printable}): an error's message can hold an
 * upstream's text (the tool names of a roster collision, a fetched document's parse error).
 */
function sayError(text: string): void {
  process.stderr.write(`mcp-broker: ${printable(text)}\n`);
}

type Shutdown = ((why: string) => Promise<void>) & { readonly started: boolean };

function installShutdown(gateway: Gateway, logger: Logger, beforeStop: readonly (() => Promise<void>)[] = []): Shutdown {
  let stopping: Promise<void> | undefined;
  const shutdown = (why: string) => {
    stopping ??= (async () => {
      logger.info({ why }, 'shutting down');
      const force = setTimeout(() => {
        gateway.kill();
        process.exit(0);
      }, 8000);
      force.unref();
      // Calls in flight are cancelled, answered and recorded while their sessions can still hear it.
      await gateway.broker.drain(3000);
      for (const stop of beforeStop) await stop().catch(() => undefined);
      await gateway.stop();
      logger.flush?.();
      process.exit(0);
    })();
    return stopping;
  };
  handOverSignals(['SIGINT', 'SIGTERM'], () => {
    process.on('SIGINT', () => void shutdown('SIGINT'));
    process.on('SIGTERM', () => void shutdown('SIGTERM'));
  });
  process.stdout.on('error', () => void shutdown('stdout closed'));
  return Object.defineProperty(shutdown, 'started', { get: () => stopping !== undefined }) as Shutdown;
}

/**
 * The banner of a broker whose stdin is a terminal: each upstream's state, the tool count, how to
 * connect a client. An upstream's status message is the upstream's text, shown through `shown`
 * (commands/shown-status-message.ts: scrubbed whole, cut, escaped).
 */
function printBanner(gateway: Gateway, shown: (message: string, scrub: (text: string) => string) => string): void {
  // Real paths, so the suggested snippets run as printed.
  const cli = realpathSync(process.argv[1]!);
  const root = dirname(dirname(cli));
  const config = gateway.config.file ?? resolve('servers.json');
  const lines = ['', `mcp-broker ${lib.VERSION} is serving ${gateway.config.file ?? 'servers.json'} on stdio.`, ''];
  for (const u of gateway.registry.upstreams) {
    const tools = [...gateway.registry.roster.tools.values()].filter((t) => t.server === u.name).length;
    const { state: now, message } = u.status;
    const state = now === 'ready' ? `ready, ${tools} tools` : `${now}${message ? `: ${shown(message, (text) => gateway.scrubber.text(text))}` : ''}`;
    lines.push(`  ${u.name.padEnd(16)} ${state}`);
  }
  // The total also holds the broker's own tools (reconnect, the estate, tasks, local functions), not listed above.
  const listed = gateway.router.list();
  const own = listed.filter((t) => !gateway.registry.roster.tools.has(t.name)).length;
  lines.push(
    '',
    `  ${listed.length} tools in all: ${listed.length - own} from the servers above, ${own} of the broker's own.`,
    '',
    'stdin is a terminal, so no MCP client is attached. To connect one:',
    `  - Claude Desktop / Cursor: add {"command": "node", "args": [${JSON.stringify(cli)}, "--config", ${JSON.stringify(config)}]}`,
    `  - MCP inspector:  cd ${shellQuote(join(root, 'node_modules'))} && npx mcp-inspector-cli --cli --method tools/list -- node ${shellQuote(cli)} --config ${shellQuote(config)}`,
    '',
    'Press Ctrl-C to stop.',
    '',
  );
  process.stderr.write(lines.join('\n'));
}
