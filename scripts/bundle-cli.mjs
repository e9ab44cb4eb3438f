#!/usr/bin/env node
/**
 * Bundles the CLI (`src/cli.ts`) and what it imports into one file, `dist/cli.js`, replacing
 * what tsc emitted there (`npm run build` runs tsc first, then this). The rest of `dist/` stays
 * tsc's: `dist/index.js` is the package's API for function-tool modules.
 *
 * Why: resolving and loading ~400 module files was a third of the broker's cold start; one file
 * loads in one go (issue 6, bench/README.md). Modules the CLI imports only for some commands
 * (the gateway, the HTTP face, `calls`) stay lazy: esbuild turns each dynamic `import()` into an
 * initialiser that runs when first reached.
 *
 * Left outside the bundle, loaded from node_modules as before:
 * - `zod`: function-tool modules define their schemas with the same zod instance the broker
 *   reads them with (its registries hold descriptions);
 * - `better-sqlite3`: a native addon;
 * - `@apidevtools/swagger-parser`: loaded only for OpenAPI upstreams.
 */
import { build } from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

await build({
  entryPoints: [join(root, 'src/cli.ts')],
  outfile: join(root, 'dist/cli.js'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: ['zod', 'better-sqlite3', '@apidevtools/swagger-parser'],
  // CommonJS dependencies (express, pino) call require() at run time.
  banner: { js: "import { createRequire as __createRequire } from 'node:module';\nconst require = __createRequire(import.meta.url);" },
  sourcemap: true,
  logLevel: 'warning',
});
