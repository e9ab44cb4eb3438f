#!/usr/bin/env node
// Bundles the CLI program (dist/cli-main.js, after tsc) and its dependencies into one CommonJS
// file, dist/cli.bundle.cjs, and the early start (dist/cli-early.js) into dist/cli.early.cjs,
// then trains their V8 code caches (dist/cli.bundle.cache, dist/cli.early.cache) by running the
// built CLI once: a stdio client lists the tools of one upstream (scripts/code-cache-upstream.mjs)
// and calls one a few times, and the bin writes the cache of what ran as it exits
// (MCP_BROKER_CODE_CACHE_OUT; src/cli-bundle.cts loads them). It then starts the built CLI once
// more (scripts/cli-start.mjs), in the build's own environment (this Node, this NODE_OPTIONS), and
// removes, with a warning, a cache that start refused: one the training run left under V8 flags it
// set while it ran, say, which every start would refuse. A start under other flags than the
// build's (another Node, NODE_OPTIONS given only at run time) still refuses the caches and
// compiles from source; this cannot see that. Run by `npm run build` after tsc.
//
// The bundles are ASCII (one-byte strings load and hash fastest), whitespace-minified, with names
// kept; what is left outside them is listed at OUTSIDE. The first line of each names its build (a
// hash of the bundle); its cache carries the same id, so a cache is only ever used with its own
// bundle.
// A failed training run leaves no cache (a warning): the bundle then compiles from source.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { bundleText } from '../dist/cli-bundle.cjs';
import { builtCliStart, writeTrainingConfig } from './cli-start.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
/** The early start (starts the stdio upstreams before the program loads), then the program. */
const BUNDLES = [
  { entry: 'cli-early.js', name: 'cli.early' },
  { entry: 'cli-main.js', name: 'cli.bundle' },
];

/**
 * Packages left outside the bundles and required when used: better-sqlite3 (native), and what
 * only some configs or transports load, so a stdio start neither reads nor compiles them:
 * OpenTelemetry (observability.otlp), prom-client (/metrics), swagger-parser (OpenAPI upstreams),
 * pino-pretty (a terminal), and the HTTP face's express, @hono/node-server, raw-body and the
 * SDK's legacy SSE transport (with iconv-lite, mime-db and the rest they bring: ~1.2 MB).
 */
const OUTSIDE = [
  'better-sqlite3',
  '@apidevtools/swagger-parser',
  'prom-client',
  '@opentelemetry/*',
  'pino-pretty',
  'express',
  '@hono/node-server',
  'raw-body',
  '@modelcontextprotocol/server-legacy',
  '@modelcontextprotocol/server-legacy/*',
];

/**
 * zod's namespaces re-export every locale (`locales`: some 300 KB of messages in 40 languages);
 * the CLI uses the English messages zod configures by default and no other, so the bundles get
 * a `locales` with English alone.
 */
const zodEnglishOnly = {
  name: 'zod-english-only',
  setup(b) {
    b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      /[\\/]node_modules[\\/]zod[\\/]/.test(args.importer) ? { path: join(dirname(args.importer), '../locales/en.js'), namespace: 'zod-locales' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'zod-locales' }, (args) => ({
      contents: `export { default as en } from ${JSON.stringify(args.path)};`,
      resolveDir: dirname(args.path),
    }));
  },
};

/**
 * The SDK's client and server packages each carry the same Ajv provider chunk (~220 KB: Ajv and
 * ajv-formats); the bundles take the server's for both when the two files are the same but for
 * their chunk names, and keep both otherwise (or when the packages are not where this looks).
 */
const oneAjvProvider = {
  name: 'one-ajv-provider',
  setup(b) {
    // Each package's dist by its real path: esbuild resolves through symlinks (npm link, pnpm,
    // workspaces), and the server's chunk reached by a second path would be a second copy.
    const distOf = (pkg) => {
      try {
        return realpathSync(join(root, 'node_modules/@modelcontextprotocol', pkg, 'dist'));
      } catch {
        return undefined;
      }
    };
    const [clientDist, serverDist] = [distOf('client'), distOf('server')];
    if (!clientDist || !serverDist) return;
    const chunk = (dir) => readdirSync(dir).find((f) => /^ajvProvider-[\w-]+\.mjs$/.test(f));
    const [client, server] = [chunk(clientDist), chunk(serverDist)];
    if (!client || !server) return;
    const unnamed = (dir, file) => readFileSync(join(dir, file), 'utf8').replace(/-[\w-]{8}\.mjs/g, '.mjs');
    if (unnamed(clientDist, client) !== unnamed(serverDist, server)) return;
    b.onResolve({ filter: new RegExp(`^\\./${client.replace(/[.-]/g, '\\$&')}$`) }, () => ({ path: join(serverDist, server) }));
  },
};

const built = [];
for (const { entry, name } of BUNDLES) {
  const result = await build({
    entryPoints: [join(dist, entry)],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    // jsonc-parser's "main" is a UMD build with dynamic requires; its "module" build bundles.
    mainFields: ['module', 'main'],
    charset: 'ascii',
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'none',
    external: [...OUTSIDE],
    plugins: [zodEnglishOnly, oneAjvProvider],
    // A bundle runs as a vm.Script, which has no import(): a dynamic import of a package left
    // outside becomes a require (they are all CommonJS). User function modules (ES modules) are
    // imported through the bin's own import() (src/cli.cts).
    supported: { 'dynamic-import': false },
    // The bundles sit in dist/ as version.js does, so `new URL('../package.json', import.meta.url)` still finds package.json.
    define: { 'import.meta.url': '__bundleUrl' },
    banner: { js: "const __bundleUrl = require('node:url').pathToFileURL(__filename).href;" },
    write: false,
    logLevel: 'warning',
  });
  const body = result.outputFiles[0].text;
  // The loader reads a bundle as Latin-1 (src/cli-bundle.cts): that is its text only when it is ASCII.
  const wide = /[^\x00-\x7f]/.exec(body);
  if (wide) throw new Error(`bundle-cli: ${name}.cjs is not ASCII (character U+${wide[0].codePointAt(0).toString(16).padStart(4, '0')} at ${wide.index})`);
  const buildId = createHash('sha256').update(body).digest('hex').slice(0, 32);
  writeFileSync(join(dist, `${name}.cjs`), bundleText(buildId, body));
  rmSync(join(dist, `${name}.cache`), { force: true });
  built.push(`${name}.cjs (${(body.length / 1048576).toFixed(2)} MiB, build ${buildId.slice(0, 12)})`);
}

try {
  await train();
  const { refused, unused } = cacheStates();
  for (const name of refused) rmSync(join(dist, `${name}.cache`), { force: true });
  if (refused.length === 0 && unused.length === 0) process.stderr.write(`bundle-cli: dist/${built.join(', ')}, with their code caches\n`);
  else {
    const told = [
      ...(refused.length ? [`V8 refused the code cache of ${refused.join(' and ')} at a start (removed: compiled from source at each start)`] : []),
      ...unused.map(([name, state]) => `a start did not use the code cache of ${name} (${state ?? 'bundle not run'})`),
    ];
    process.stderr.write(`bundle-cli: dist/${built.join(', ')}; warning: ${told.join('; ')}\n`);
  }
} catch (err) {
  for (const { name } of BUNDLES) rmSync(join(dist, `${name}.cache`), { force: true });
  process.stderr.write(`bundle-cli: warning: no code cache (the bundles compile from source at each start): ${err?.message ?? err}\n`);
}

/**
 * What a start of the built CLI in the build's environment made of each cache
 * (scripts/cli-start.mjs): `refused`, the bundles whose cache V8 refused (a cache refused once is
 * refused at every such start, and only costs its read); `unused`, [bundle, state] of a cache not
 * used otherwise (absent, or its bundle not run). Throws when the CLI does not start from the bundles.
 */
function cacheStates() {
  const start = builtCliStart(dist);
  if (start?.from !== 'bundle') throw new Error(`the built CLI did not start from its bundles (${JSON.stringify(start)})`);
  const states = [
    ['cli.early', start.early],
    ['cli.bundle', start.cache],
  ];
  return {
    refused: states.filter(([, state]) => state === 'rejected').map(([name]) => name),
    unused: states.filter(([, state]) => state !== 'accepted' && state !== 'rejected'),
  };
}

/** Serves a few calls through the built CLI; its bin writes the code cache as it exits. */
async function train() {
  const { Client } = await import('@modelcontextprotocol/client');
  const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
  const tmp = mkdtempSync(join(tmpdir(), 'mcp-broker-code-cache-'));
  try {
    const config = writeTrainingConfig(tmp);
    const out = join(tmp, 'caches');
    mkdirSync(out);
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [join(dist, 'cli.cjs'), '--config', config],
      env: { ...process.env, MCP_BROKER_CODE_CACHE_OUT: out, MCP_BROKER_NO_BUNDLE: '' },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (chunk) => (stderr = (stderr + chunk).slice(-2000)));
    const client = new Client({ name: 'mcp-broker-build', version: '1.0.0' });
    try {
      await client.connect(transport);
      const { tools } = await client.listTools();
      const echo = tools.find((t) => t.name.endsWith('__echo'));
      if (!echo) throw new Error(`the training upstream's echo tool is not listed (${tools.map((t) => t.name).join(', ')})`);
      for (let i = 0; i < 20; i++) {
        const result = await client.callTool({ name: echo.name, arguments: { text: `call ${i}` } });
        if (result.isError) throw new Error(`a training call failed: ${JSON.stringify(result.content).slice(0, 200)}`);
      }
    } catch (err) {
      throw new Error(`${err.message}${stderr ? ` (stderr: ${stderr.trim().split('\n').slice(-3).join(' | ')})` : ''}`);
    } finally {
      await client.close();
    }
    // The bin writes the cache in its exit hook; wait for the process to be gone.
    const pid = transport.pid;
    for (let i = 0; i < 200 && pid !== null && alive(pid); i++) await new Promise((r) => setTimeout(r, 50));
    for (const { name } of BUNDLES) {
      if (!existsSync(join(out, `${name}.cache`))) throw new Error(`the training run wrote no code cache for ${name}.cjs`);
    }
    for (const { name } of BUNDLES) renameSync(join(out, `${name}.cache`), join(dist, `${name}.cache`));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
